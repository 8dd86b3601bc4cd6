/*
 * tsr_onnx: the public entry points of the ONNX importer (tsr_onnx.h):
 * load (parse, lower, build segments), free, and the placement table.
 * The importer's passes are in the tsr_onnx_*.c files and its operator
 * handlers in ops/ (tsr_onnx_ir.h lists them); running is tsr_onnx_exec.c.
 */
#include "tsr_onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

/* --place's kinds (tsr_onnx.h's TSR_PLACE_* order) and the value each takes by default
 * (TSR_PLACE_DEFAULT: softmax's own rule, neither all nor none). */
static const char *const place_kind[TSR_PLACE_NKINDS] = {"concat", "attn-matmul", "shuffle", "softmax", "bias"};
static const unsigned char place_dflt[TSR_PLACE_NKINDS] = {TSR_PLACE_DEVICE, TSR_PLACE_DEVICE, TSR_PLACE_DEVICE,
                                                           TSR_PLACE_DEFAULT, TSR_PLACE_DEVICE};

/* One "KIND=VALUE" of len bytes at s into o. */
static int place_one(const char *s, size_t len, tsr_onnx_opts_t *o)
{
    const char *eq = memchr(s, '=', len);
    const size_t kl = eq ? (size_t)(eq - s) : len, vl = eq ? len - kl - 1 : 0;
    int k = 0;
    while (k < TSR_PLACE_NKINDS && (strlen(place_kind[k]) != kl || strncmp(place_kind[k], s, kl)))
        k++;
    char w[65]; /* the word named in a message, cut at 64 bytes, control bytes escaped (TSR_SAFE) */
    if (k == TSR_PLACE_NKINDS) {
        snprintf(w, sizeof w, "%.*s", (int)(kl > 64 ? 64 : kl), s);
        return tsr_err(TSR_EINVAL, "--place: unknown kind \"%s\" (concat, attn-matmul, shuffle, softmax, bias)",
                       TSR_SAFE(w));
    }
    const char *v = eq ? eq + 1 : "";
    const int val = vl == 6 && !strncmp(v, "device", 6) ? TSR_PLACE_DEVICE
                    : vl == 4 && !strncmp(v, "host", 4) ? TSR_PLACE_HOST : -1;
    if (val < 0) {
        snprintf(w, sizeof w, "%.*s", (int)(vl > 64 ? 64 : vl), v);
        return tsr_err(TSR_EINVAL, "--place: %s needs device or host, not \"%s\"", place_kind[k], TSR_SAFE(w));
    }
    o->place[k] = val == place_dflt[k] ? TSR_PLACE_DEFAULT : (unsigned char)val;
    return 0;
}

int tsr_onnx_parse_place(const char *arg, tsr_onnx_opts_t *o)
{
    if (!arg || !o)
        return tsr_err(TSR_EINVAL, "--place: NULL argument");
    if (!*arg)
        return tsr_err(TSR_EINVAL, "--place needs KIND=device|host[,KIND=...]");
    for (const char *s = arg;;) {
        const char *c = strchr(s, ',');
        const size_t len = c ? (size_t)(c - s) : strlen(s);
        int rc = place_one(s, len, o);
        if (rc || !c)
            return rc;
        s = c + 1;
    }
}

void tsr_onnx_place_str(const tsr_onnx_opts_t *o, char *buf, size_t n)
{
    size_t at = 0;
    if (n)
        buf[0] = 0;
    for (int k = 0; o && k < TSR_PLACE_NKINDS && at < n; k++)
        if (o->place[k] != TSR_PLACE_DEFAULT) {
            int w = snprintf(buf + at, n - at, "%s%s=%s", at ? "," : "", place_kind[k],
                             o->place[k] == TSR_PLACE_DEVICE ? "device" : "host");
            at += w > 0 ? (size_t)w : 0;
        }
}

void tsr_ox_lop_to_host(ox_lop_t *L, int hkind)
{
    tsr_nd_node_free(&L->nd);
    memset(&L->nd, 0, sizeof L->nd);
    L->side = SIDE_HOST, L->hkind = hkind, L->seg = -1;
    memset(L->geo, 0, sizeof L->geo);
    L->ort_host = 2;
}

int tsr_ox_exact_to_host(tsr_onnx_t *m)
{
    int k = 0;
    for (int l = 0; l < m->nlops; l++) {
        const ox_lop_t *L = &m->lops[l];
        if (L->side != SIDE_DEV || L->ort_host != 1)
            continue;
        if (L->nd.kind == TSR_ND_ADD)
            tsr_ox_add_to_host(m, l), k++;
        else if (L->nd.kind == TSR_ND_CONV)
            tsr_ox_bn_to_host(m, l), k++;
    }
    return k;
}

int tsr_onnx_load_buffer(const void *buf, size_t n, const char *name, int batch, tsr_onnx_t **out)
{
    return tsr_onnx_load_buffer_opts(buf, n, name, batch, NULL, out);
}

int tsr_onnx_load_buffer_opts(const void *buf, size_t n, const char *name, int batch, const tsr_onnx_opts_t *o,
                              tsr_onnx_t **out)
{
    *out = NULL;
    if (batch < 1 || batch > 65536)
        return tsr_err(TSR_EINVAL, "%s: batch %d out of range", name, batch);
    tsr_onnx_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr_err(TSR_ENOMEM, "out of memory");
    snprintf(m->path, sizeof m->path, "%s", name);
    for (int k = 0; o && k < TSR_PLACE_NKINDS; k++) /* (values out of range: the default) */
        m->opts.place[k] = o->place[k] <= TSR_PLACE_HOST && o->place[k] != place_dflt[k] ? o->place[k] : 0;
    int rc = tsr_ox_parse(m, buf, n, name, batch);
    if (!rc)
        rc = tsr_ox_lower_graph(m);
    if (!rc)
        rc = tsr_ox_build_segments(m);
    if (rc) {
        tsr_onnx_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int tsr_onnx_load(const char *path, int batch, tsr_onnx_t **out)
{
    return tsr_onnx_load_opts(path, batch, NULL, out);
}

int tsr_onnx_load_opts(const char *path, int batch, const tsr_onnx_opts_t *o, tsr_onnx_t **out)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    *out = NULL;
    int rc = tsr_ox_read_file(path, "ONNX model", &buf, &n);
    if (rc)
        return rc;
    rc = tsr_onnx_load_buffer_opts(buf, n, path, batch, o, out);
    free(buf);
    return rc;
}

void tsr_onnx_free(tsr_onnx_t *m)
{
    if (!m)
        return;
    tsr_ox_free_segments(m);
    for (int i = 0; i < m->nlops; i++) {
        if (m->lops[i].side == SIDE_DEV)
            tsr_nd_node_free(&m->lops[i].nd);
        free(m->lops[i].zpa); /* (host lops', and a device matmul of two activations') */
        free(m->lops[i].zpb);
    }
    free(m->lops);
    for (int i = 0; i < m->nvals; i++) {
        free(m->vals[i].cdata);
        free(m->vals[i].vscale);
        free(m->vals[i].vzp);
        if (m->vals[i].base == i)
            free(m->vals[i].rt);
    }
    free(m->vals);
    free(m->vidx);
    tsr_ox_names_free(&m->cons);
    free(m->order);
    free(m->placed);
    free(m->node_lop);
    free(m->qsel);
    if (m->mp)
        onnx__model_proto__free_unpacked(m->mp, NULL);
    free(m);
}

int tsr_onnx_set_target(tsr_onnx_t *m, const tsr_config_t *cfg)
{
    if (!m || !cfg)
        return tsr_err(TSR_EINVAL, "onnx: NULL model or config");
    const int lut = cfg->act_lut > 0;
    /* Concats go on the device as views where the target's BLOCK and BATCH allow (ops/tsr_ox_concat.c) */
    const int cat = m->cat_block != cfg->block_out || m->cat_batch != cfg->batch;
    const int ex = cfg->exact_requant != 0;
    if (lut == m->act_lut && !cat && ex == m->exact_rq)
        return 0;
    if (!lut && m->act_lut) /* the chains' host lops are gone: only a new load brings them back */
        return tsr_err(TSR_EINVAL, "%s: set up for a config with activation tables (ACT_LUT), the config has none "
                       "(ACT_LUT = 0): load the model again", m->path);
    if (!ex && m->exact_rq) /* (the device forms of the Adds moved to the host are gone) */
        return tsr_err(TSR_EINVAL, "%s: set up for a config with EXACT_REQUANT, the config has none: load the model "
                       "again", m->path);
    for (int s = 0; s < m->nsegs; s++)
        if (m->segs[s].g)
            return tsr_err(TSR_EINVAL, "%s: already prepared for a config %s: load the model again", m->path,
                           lut != m->act_lut ? "without activation tables (ACT_LUT = 0)"
                           : cat ? "of another BLOCK or BATCH" : "without EXACT_REQUANT");
    /* the segments again, after the passes: the act lops join the device runs around them */
    tsr_ox_free_segments(m);
    m->cat_block = cfg->block_out, m->cat_batch = cfg->batch;
    int rc = 0;
    if (ex && !m->exact_rq) { /* an Add or BN without an exact device form: ORT's bytes on the host (issue 30) */
        tsr_ox_exact_to_host(m);
        m->exact_rq = 1;
    }
    if (lut && !m->act_lut) {
        rc = tsr_ox_act_tables(m);
        if (!rc)
            rc = tsr_ox_softmax_device(m, cfg->act_lut);
        if (!rc)
            rc = tsr_ox_concat_tables(m);
    }
    if (!rc)
        rc = tsr_ox_build_segments(m);
    if (!rc && lut)
        m->act_lut = 1;
    return rc;
}

int tsr_onnx_device_ops(const tsr_onnx_t *m)
{
    int c = 0;
    for (int i = 0; i < m->nlops; i++)
        c += m->lops[i].side == SIDE_DEV;
    return c;
}

int tsr_onnx_host_ops(const tsr_onnx_t *m)
{
    return m->nlops - tsr_onnx_device_ops(m);
}

/* A device operator's kind as the placement table names it. */
static const char *dev_kind(const tsr_nd_node_t *nd)
{
    if (!nd->kind) /* no netdesc node: a matmul of two activations (tsr_ox_is_bmm) */
        return "matmul of two activations";
    if (nd->kind == TSR_ND_CONV)
        return nd->conv.kh * nd->conv.kw > 1 && nd->conv.h == nd->conv.kh && nd->conv.w == nd->conv.kw
                   ? "conv over the whole input = dense" : "conv";
    if (nd->kind == TSR_ND_ACT)
        return "activation table";
    if (nd->kind == TSR_ND_MUL)
        return "mul by a per-channel vector";
    if (nd->kind == TSR_ND_GAVG)
        return "global average";
    if (nd->kind == TSR_ND_SOFTMAX)
        return "softmax";
    if (nd->kind == TSR_ND_CONCAT)
        return "concat (views, no copy)";
    return nd->kind == TSR_ND_ADD ? "add" : nd->kind == TSR_ND_DENSE ? "dense"
         : nd->pool.kind == TSR_POOL_MAX ? "maxpool" : "avgpool";
}

void tsr_onnx_print_placement(const tsr_onnx_t *m, FILE *f)
{
    fprintf(f, "placement: %zu ONNX nodes -> %d device operators in %d segment%s, %d host operators\n", m->gp->n_node,
            tsr_onnx_device_ops(m), m->nsegs, m->nsegs == 1 ? "" : "s", tsr_onnx_host_ops(m));
    int nconst = 0;
    for (size_t k = 0; k < m->gp->n_node; k++)
        nconst += m->placed[k] == OX_CONST;
    if (nconst)
        fprintf(f, "  (%d constant node%s folded at import, not listed)\n", nconst, nconst == 1 ? "" : "s");
    char pl[128];
    tsr_onnx_place_str(&m->opts, pl, sizeof pl);
    if (*pl)
        fprintf(f, "placement options: --place %s (the rest as by default)\n", pl);
    if (m->nexact)
        fprintf(f, "requantization: the integers of %d operator%s from the model's tessera.requant metadata (checked "
                "against the scales)\n", m->nexact, m->nexact == 1 ? "" : "s");
    for (size_t k = 0; k < m->gp->n_node; k++) {
        const int i = m->order[k];
        const int l = m->node_lop[i];
        char where[96];
        if (m->placed[i] == OX_CONST)
            continue; /* constants: counted above */
        switch (m->placed[i]) {
        case OX_CONST: snprintf(where, sizeof where, "constant (folded at import)"); break;
        case OX_ALIAS: snprintf(where, sizeof where, "relabel (no data movement)"); break;
        case OX_VIEW: snprintf(where, sizeof where, "folded into its consumers (quantized view)"); break;
        case OX_FOLDED:
            if (m->lops[l].side == SIDE_DEV)
                snprintf(where, sizeof where, "folded into device op \"%s\"", m->lops[l].nd.name);
            else /* a host kernel's QDQ group (a quantized add or mul, softmax, ...): no device name */
                snprintf(where, sizeof where, "folded into host op (%s)", tsr_ox_host_name(m->lops[l].hkind));
            break;
        case OX_LOP:
            if (m->lops[l].side == SIDE_DEV)
                snprintf(where, sizeof where, "device, segment %d (%s)", m->lops[l].seg, dev_kind(&m->lops[l].nd));
            else if (m->lops[l].ort_host == 2) /* (tsr_onnx_set_target) */
                snprintf(where, sizeof where, "host (%s: no exact integer form on the device, EXACT_REQUANT)",
                         tsr_ox_host_name(m->lops[l].hkind));
            else
                snprintf(where, sizeof where, "host (%s)", tsr_ox_host_name(m->lops[l].hkind));
            break;
        default: snprintf(where, sizeof where, "?"); break;
        }
        char nm[29], op[19]; /* the column widths, cut with "..." */
        fprintf(f, "  %-28s %-18s %s\n", tsr_strsafe(nname(m, i), nm, sizeof nm),
                tsr_strsafe(m->gp->node[i]->op_type, op, sizeof op), where);
    }
}

/* A name as a JSON string: tsr_strsafe's form whole (no "..." cut), then
 * '"' and '\' escaped; what strsafe keeps is printable UTF-8, valid JSON. */
static int json_str(FILE *f, const char *s)
{
    const size_t len = s ? strlen(s) : 6;
    char *b = malloc(4 * len + 8);
    if (!b)
        return tsr_err(TSR_ENOMEM, "out of memory");
    tsr_strsafe_n(s, (size_t)-1, b, 4 * len + 8);
    fputc('"', f);
    for (const char *p = b; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', f);
        fputc(*p, f);
    }
    fputc('"', f);
    free(b);
    return 0;
}

/* Multiply-accumulates of a lop (batch included), 0 for those without. */
static int64_t lop_macs(const tsr_onnx_t *m, const ox_lop_t *L)
{
    if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_CONV) {
        const tsr_conv2d_params_t *c = &L->nd.conv;
        return numel(&m->vals[L->out]) * (c->c_in / (c->groups ? c->groups : 1)) * c->kh * c->kw;
    }
    if (L->side == SIDE_DEV && L->nd.kind == TSR_ND_DENSE)
        return (int64_t)L->nd.dense.n * L->nd.dense.k * L->nd.dense.m;
    if (L->side == SIDE_HOST && L->hkind == H_CONVINT)
        return numel(&m->vals[L->out]) * L->geo[9] * L->geo[0] * L->geo[1];
    if ((L->side == SIDE_HOST && L->hkind == H_MATMULINT) || L->hkind == H_QMATMUL)
        return L->geo[0] * L->geo[1] * L->geo[2] * L->geo[3];
    return 0;
}

int tsr_onnx_write_placement_json(const tsr_onnx_t *m, FILE *f)
{
    int rc = 0;
    fputs("{\"model\": ", f);
    rc = json_str(f, m->path);
    /* the bytes a run moves between the host and the device segments (each segment's input in and its
     * output back): with "segments" and the host ops' "elements", what the DSE's host-time model costs */
    int64_t boundary = 0;
    for (int s = 0; s < m->nsegs; s++)
        boundary += (int64_t)m->vals[m->segs[s].in_val].nbytes + (int64_t)m->vals[m->segs[s].out_val].nbytes;
    fprintf(f, ", \"nodes\": %zu, \"device_ops\": %d, \"segments\": %d, \"host_ops\": %d, "
            "\"boundary_bytes\": %lld, \"placement\": [", m->gp->n_node, tsr_onnx_device_ops(m), m->nsegs,
            tsr_onnx_host_ops(m), (long long)boundary);
    for (size_t i = 0; i < m->gp->n_node && !rc; i++) {
        const int l = m->node_lop[i];
        const ox_lop_t *L = l >= 0 ? &m->lops[l] : NULL;
        const char *side = "?", *kernel = "";
        int seg = -1;
        int64_t macs = 0, elements = 0;
        switch (m->placed[i]) {
        case OX_CONST: side = "constant"; break;
        case OX_ALIAS: side = "alias"; break;
        case OX_VIEW: side = "view"; break;
        case OX_FOLDED:
            side = "folded";
            if (L)
                kernel = L->side == SIDE_DEV ? L->nd.name : tsr_ox_host_name(L->hkind), seg = L->seg;
            break;
        case OX_LOP:
            if (!L)
                break;
            side = L->side == SIDE_DEV ? "device" : "host";
            kernel = L->side == SIDE_DEV ? dev_kind(&L->nd) : tsr_ox_host_name(L->hkind);
            seg = L->side == SIDE_DEV ? L->seg : -1;
            macs = lop_macs(m, L);
            elements = L->side == SIDE_HOST ? host_elements(m, L) : 0;
            break;
        default: break;
        }
        fprintf(f, "%s\n {\"index\": %zu, \"name\": ", i ? "," : "", i);
        if ((rc = json_str(f, nname(m, (int)i))))
            break;
        fputs(", \"op\": ", f);
        if ((rc = json_str(f, m->gp->node[i]->op_type)))
            break;
        fprintf(f, ", \"side\": \"%s\", \"segment\": %d, \"kernel\": ", side, seg);
        if ((rc = json_str(f, kernel)))
            break;
        fprintf(f, ", \"macs\": %lld, \"elements\": %lld}", (long long)macs, (long long)elements);
    }
    fputs("\n]}\n", f);
    if (!rc && (fflush(f) || ferror(f)))
        rc = tsr_err(TSR_EIO, "placement JSON: write failed");
    return rc;
}
