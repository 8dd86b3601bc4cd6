/* tsr_onnx_wire: bounded, non-recursive nesting check of an ONNX protobuf (see tsr_onnx_wire.h). */
#include "tsr_onnx_wire.h"

#include <stdint.h>

#include "onnx.pb-c.h"
#include "tsr_error.h"

/* One open message: its type and where its bytes end. */
typedef struct {
    const ProtobufCMessageDescriptor *d;
    size_t end;
} wire_frame_t;

/* A varint at *pos below end (at most 10 bytes, as protobuf allows);
 * 0 if it is truncated or too long. */
static int get_varint(const uint8_t *p, size_t *pos, size_t end, uint64_t *v)
{
    uint64_t r = 0;
    for (int i = 0; i < 10 && *pos < end; i++) {
        const uint8_t b = p[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

int tsr_onnx_wire_check(const void *buf, size_t n, const char *name)
{
    const uint8_t *p = buf;
    wire_frame_t st[TSR_ONNX_MAX_MSG_DEPTH];
    int sp = 0, graphs = 0, types = 0;
    size_t pos = 0;
    if (!p && n)
        return tsr_err(TSR_EINVAL, "%s: no model bytes given", name);
    st[0] = (wire_frame_t){&onnx__model_proto__descriptor, n};
    while (sp >= 0) {
        wire_frame_t *f = &st[sp];
        if (pos == f->end) { /* the message is done: back to its parent */
            graphs -= f->d == &onnx__graph_proto__descriptor;
            types -= f->d == &onnx__type_proto__descriptor;
            sp--;
            continue;
        }
        uint64_t key, len;
        if (!get_varint(p, &pos, f->end, &key))
            goto corrupt;
        switch (key & 7) {
        case 0: /* varint */
            if (!get_varint(p, &pos, f->end, &len))
                goto corrupt;
            break;
        case 1: /* 64-bit */
            if (f->end - pos < 8)
                goto corrupt;
            pos += 8;
            break;
        case 5: /* 32-bit */
            if (f->end - pos < 4)
                goto corrupt;
            pos += 4;
            break;
        case 2: { /* length-delimited: a string, bytes, a packed array or a message */
            if (!get_varint(p, &pos, f->end, &len) || len > f->end - pos)
                goto corrupt;
            const ProtobufCFieldDescriptor *fd =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(f->d, (unsigned)(key >> 3)) : NULL;
            if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) {
                pos += (size_t)len; /* not a message: protobuf-c does not recurse into it */
                break;
            }
            const ProtobufCMessageDescriptor *cd = fd->descriptor;
            if (sp + 1 >= TSR_ONNX_MAX_MSG_DEPTH)
                return tsr_err(TSR_EINVAL, "%s: model nests protobuf messages deeper than %d levels", name,
                               TSR_ONNX_MAX_MSG_DEPTH);
            if (cd == &onnx__graph_proto__descriptor && ++graphs > TSR_ONNX_MAX_GRAPH_DEPTH)
                return tsr_err(TSR_EINVAL, "%s: model nests subgraphs deeper than %d levels", name,
                               TSR_ONNX_MAX_GRAPH_DEPTH);
            if (cd == &onnx__type_proto__descriptor && ++types > TSR_ONNX_MAX_TYPE_DEPTH)
                return tsr_err(TSR_EINVAL, "%s: model nests types deeper than %d levels", name,
                               TSR_ONNX_MAX_TYPE_DEPTH);
            st[++sp] = (wire_frame_t){cd, pos + (size_t)len}; /* its fields are scanned next */
            break;
        }
        default: /* groups (3, 4) and 6, 7: protobuf-c refuses them */
            goto corrupt;
        }
    }
    return TSR_OK;
corrupt:
    return tsr_err(TSR_EPARSE, "%s: not a valid ONNX protobuf (truncated or corrupt)", name);
}
