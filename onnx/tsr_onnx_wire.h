/*
 * tsr_onnx_wire: a bounded pre-scan of an ONNX file's protobuf wire format,
 * run before protobuf-c unpacks it.
 *
 * Why: protobuf-c's unpack recurses once per nested message with about a
 * kilobyte of stack per level and no depth limit, so a 112 KB model whose
 * If/Loop subgraphs nest 3,000 deep (GraphProto -> NodeProto ->
 * AttributeProto -> GraphProto ...) overflows the stack before any check
 * of ours runs; so do deeply nested TypeProtos (sequence, map and optional
 * types nest recursively). This scan walks the same messages protobuf-c
 * would unpack, without recursion (an explicit stack of at most
 * TSR_ONNX_MAX_MSG_DEPTH frames), in one pass over the bytes, and refuses:
 *   - subgraphs nested deeper than TSR_ONNX_MAX_GRAPH_DEPTH graph levels
 *     (the main graph is level 1): "model nests subgraphs deeper than 64
 *     levels";
 *   - types nested deeper than TSR_ONNX_MAX_TYPE_DEPTH TypeProto levels;
 *   - any message nesting deeper than TSR_ONNX_MAX_MSG_DEPTH (a guard for
 *     message kinds a newer onnx.proto may add);
 *   - framing protobuf-c would refuse anyway (a truncated varint, a length
 *     past the end of its message, an unsupported wire type): "not a valid
 *     ONNX protobuf (truncated or corrupt)".
 * Which fields are messages comes from the protobuf-c descriptors generated
 * from the same onnx.proto, so the scan follows exactly what unpack will.
 * Real models nest a few levels (a Loop inside an If); with these limits
 * unpack needs well under 1 MB of stack.
 */
#ifndef TSR_ONNX_WIRE_H
#define TSR_ONNX_WIRE_H

#include <stddef.h>

#define TSR_ONNX_MAX_GRAPH_DEPTH 64
#define TSR_ONNX_MAX_TYPE_DEPTH 64
#define TSR_ONNX_MAX_MSG_DEPTH 400

/* TSR_OK if buf[0..n) (a serialized ModelProto) nests within the limits
 * above; else TSR_EINVAL (too deep) or TSR_EPARSE (bad framing) with a
 * message "NAME: ...". Linear in n, no allocation. */
int tsr_onnx_wire_check(const void *buf, size_t n, const char *name);

#endif
