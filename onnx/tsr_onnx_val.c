/*
 * tsr_onnx_val: the importer's value and lop tables (tsr_onnx_ir.h): node
 * errors, values by name, node outputs, aliases and float views, and the
 * lops that lowering appends, on the device or the host.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_strsafe.h"

int tsr_ox_node_err(const tsr_onnx_t *m, int ni, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tsr_err(TSR_EINVAL, "%s: node \"%s\" (%s): %s", m->path, TSR_SAFE(nname(m, ni)),
                   TSR_SAFE(m->gp->node[ni]->op_type), msg);
}

/* FNV-1a of a name: the slot it starts probing at in m->vidx. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Value i into the index, unless a lower id has its name (find_val returns
 * the first). The table is kept at most half full. */
static void vidx_put(tsr_onnx_t *m, int i)
{
    const uint32_t mask = (uint32_t)m->vidx_cap - 1;
    for (uint32_t s = name_hash(m->vals[i].name) & mask;; s = (s + 1) & mask) {
        const int j = m->vidx[s];
        if (j < 0) {
            m->vidx[s] = i;
            m->vidx_n++;
            return;
        }
        if (!strcmp(m->vals[j].name, m->vals[i].name))
            return;
    }
}

/* Index value i (new) by its name; without memory for the index, find_val
 * scans the table as before (the index is dropped, never half right). */
static void vidx_add(tsr_onnx_t *m, int i)
{
    if (!m->vals[i].name[0])
        return;
    if (2 * (m->vidx_n + 1) > m->vidx_cap) {
        const int cap = m->vidx_cap ? 2 * m->vidx_cap : 1024;
        int *t = malloc(sizeof *t * (size_t)cap);
        free(m->vidx);
        m->vidx = t;
        m->vidx_cap = t ? cap : 0;
        m->vidx_n = 0;
        if (!t)
            return;
        memset(t, 0xff, sizeof *t * (size_t)cap); /* -1 */
        for (int k = 0; k < i; k++)
            if (m->vals[k].name[0])
                vidx_put(m, k);
    }
    vidx_put(m, i);
}

int tsr_ox_find_val(const tsr_onnx_t *m, const char *name)
{
    if (m->vidx_cap && name[0]) {
        const uint32_t mask = (uint32_t)m->vidx_cap - 1;
        for (uint32_t s = name_hash(name) & mask;; s = (s + 1) & mask) {
            const int j = m->vidx[s];
            if (j < 0 || !strcmp(m->vals[j].name, name))
                return j;
        }
    }
    for (int i = 0; i < m->nvals; i++)
        if (!strcmp(m->vals[i].name, name))
            return i;
    return -1;
}

int tsr_ox_new_val(tsr_onnx_t *m, const char *name)
{
    if (m->nvals == m->capvals) {
        int cap = m->capvals ? m->capvals * 2 : 64;
        ox_val_t *nv = realloc(m->vals, sizeof *nv * (size_t)cap);
        if (!nv)
            return tsr_err(TSR_ENOMEM, "%s: out of memory", m->path);
        m->vals = nv;
        m->capvals = cap;
    }
    ox_val_t *v = &m->vals[m->nvals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->base = m->nvals;
    v->view_of = -1;
    v->real_lop = -1;
    v->prod = -1;
    v->seg_tensor = -1;
    vidx_add(m, m->nvals);
    return m->nvals++;
}

int tsr_ox_in_val(tsr_onnx_t *m, int ni, size_t k)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (k >= n->n_input || !n->input[k][0])
        return -1;
    return tsr_ox_find_val(m, n->input[k]);
}

int tsr_ox_new_lop(tsr_onnx_t *m, int node, int side)
{
    ox_lop_t *nl = realloc(m->lops, sizeof *nl * (size_t)(m->nlops + 1));
    if (!nl)
        return tsr_err(TSR_ENOMEM, "%s: out of memory", m->path);
    m->lops = nl;
    ox_lop_t *l = &m->lops[m->nlops];
    memset(l, 0, sizeof *l);
    l->node = node;
    l->side = side;
    l->in = l->in2 = l->out = -1;
    l->seg = -1;
    m->node_lop[node] = m->nlops;
    m->placed[node] = OX_LOP;
    return m->nlops++;
}

/* Define the output k of node ni with a type and shape (a new value). */
int tsr_ox_def_out(tsr_onnx_t *m, int ni, size_t k, int elem, int ndim, const int64_t *dims)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    if (k >= n->n_output || !n->output[k][0])
        return NERR(m, ni, "output %zu is missing", k);
    if (tsr_ox_find_val(m, n->output[k]) >= 0)
        return NERR(m, ni, "output \"%s\" is produced twice", TSR_SAFE(n->output[k]));
    int64_t d[MAXD]; /* dims may point into m->vals, which new_val may move */
    if (ndim < 0 || ndim > MAXD)
        return NERR(m, ni, "%d output dimensions", ndim);
    memcpy(d, dims, sizeof(int64_t) * (size_t)ndim);
    dims = d;
    int v = tsr_ox_new_val(m, n->output[k]);
    if (v < 0)
        return v;
    ox_val_t *x = &m->vals[v];
    x->elem = elem;
    x->ndim = ndim;
    int64_t cnt = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (cnt *= dims[i]) > TSR_ONNX_MAX_ELEMS)
            return NERR(m, ni, "output shape has more than %lld elements or a negative dimension",
                        (long long)TSR_ONNX_MAX_ELEMS);
        x->dims[i] = dims[i];
    }
    x->nbytes = (size_t)cnt * esize(elem);
    x->defined = 1;
    return v;
}

/* Make x a float view of quantized value q with one scale and zero point
 * (the bytes stay q's; a consumer dequantizes on the host). */
int tsr_ox_set_view(ox_val_t *x, int q, float scale, int32_t zp)
{
    x->view_of = q;
    x->vcount = 1;
    x->vscale = malloc(sizeof(float));
    x->vzp = malloc(sizeof(int32_t));
    if (!x->vscale || !x->vzp)
        return tsr_err(TSR_ENOMEM, "out of memory");
    x->vscale[0] = scale;
    x->vzp[0] = zp;
    return 0;
}

/* An alias of value src with another shape (Flatten, Reshape, Cast to the same type). */
int tsr_ox_def_alias(tsr_onnx_t *m, int ni, int src, int ndim, const int64_t *dims)
{
    const ox_val_t s = m->vals[src];
    int v = tsr_ox_def_out(m, ni, 0, s.elem, ndim, dims);
    if (v < 0)
        return v;
    ox_val_t *x = &m->vals[v];
    if (x->nbytes != s.nbytes)
        return NERR(m, ni, "the new shape has %zu bytes, its input %zu", x->nbytes, s.nbytes);
    x->base = s.base;
    if (s.cdata) {
        x->cdata = malloc(s.nbytes ? s.nbytes : 1);
        if (!x->cdata)
            return tsr_err(TSR_ENOMEM, "out of memory");
        memcpy(x->cdata, s.cdata, s.nbytes);
        x->base = v;
    }
    if (s.view_of >= 0) { /* a relabelled float view views a relabelled quantized value: the same bytes */
        int rc = tsr_ox_set_view(x, s.view_of, s.vscale[0], s.vzp[0]);
        if (rc)
            return rc;
        if (s.vcount != 1)
            return NERR(m, ni, "a relabelled per-channel view is not supported");
    }
    m->placed[ni] = OX_ALIAS;
    return v;
}

int tsr_ox_host_lop(tsr_onnx_t *m, int ni, int hk, int in, int out)
{
    int l = tsr_ox_new_lop(m, ni, SIDE_HOST);
    if (l < 0)
        return l;
    m->lops[l].hkind = hk;
    m->lops[l].in = in;
    m->lops[l].out = out;
    m->vals[m->vals[out].base].prod = l;
    return l;
}

/* A device operator for node ni: nd (kind and parameters; arrays owned by
 * the lop from here on) gets the node's name; in/in2/out are values (bases). */
int tsr_ox_dev_lop(tsr_onnx_t *m, int ni, const tsr_nd_node_t *nd, int in, int in2, int out)
{
    int l = tsr_ox_new_lop(m, ni, SIDE_DEV);
    if (l < 0)
        return l;
    ox_lop_t *L = &m->lops[l];
    L->nd = *nd;
    /* the device operator's name reaches the graph's messages and tables: made safe here, once */
    tsr_strsafe(nname(m, ni), L->nd.name, sizeof L->nd.name);
    L->name_node = ni;
    L->in = in;
    L->in2 = in2;
    L->out = out;
    m->vals[m->vals[out].base].prod = l;
    return l;
}

/* v is needed as real floats: a float view gets its host DequantizeLinear. */
int tsr_ox_need_real(tsr_onnx_t *m, int ni, int v)
{
    ox_val_t *x = &m->vals[v];
    if (x->view_of < 0 || x->cdata || x->real_lop >= 0)
        return 0;
    if (x->vcount != 1)
        return NERR(m, ni, "input \"%s\": a per-channel DequantizeLinear of a computed tensor is not supported",
                    TSR_SAFE(x->name));
    int dqn = -1; /* the DequantizeLinear node that made the view */
    for (size_t i = 0; i < m->gp->n_node; i++)
        for (size_t k = 0; k < m->gp->node[i]->n_output; k++)
            if (!strcmp(m->gp->node[i]->output[k], x->name))
                dqn = (int)i;
    if (dqn < 0)
        dqn = ni;
    int l = tsr_ox_host_lop(m, dqn, H_DEQUANT, m->vals[x->view_of].base, x->base);
    if (l < 0)
        return l;
    m->lops[l].scale = x->vscale[0];
    m->lops[l].zp = x->vzp[0];
    x = &m->vals[v];
    x->real_lop = l;
    return 0;
}

int tsr_ox_names_init(ox_names_t *t, size_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n + 2 && cap < (1u << 30))
        cap *= 2;
    t->key = calloc(cap, sizeof *t->key);
    t->val = malloc(cap * sizeof *t->val);
    t->cap = t->key && t->val ? cap : 0;
    if (!t->cap) {
        tsr_ox_names_free(t);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    return TSR_OK;
}

int *tsr_ox_names_put(ox_names_t *t, const char *name, int *added)
{
    const uint32_t mask = t->cap - 1;
    for (uint32_t s = name_hash(name) & mask;; s = (s + 1) & mask) {
        if (!t->key[s]) { /* (init sized the table for every name: never full) */
            t->key[s] = name;
            t->val[s] = 0;
            *added = 1;
            return &t->val[s];
        }
        if (!strcmp(t->key[s], name)) {
            *added = 0;
            return &t->val[s];
        }
    }
}

const int *tsr_ox_names_get(const ox_names_t *t, const char *name)
{
    const uint32_t mask = t->cap - 1;
    for (uint32_t s = name_hash(name) & mask; t->cap && t->key[s]; s = (s + 1) & mask)
        if (!strcmp(t->key[s], name))
            return &t->val[s];
    return NULL;
}

void tsr_ox_names_free(ox_names_t *t)
{
    free(t->key);
    free(t->val);
    memset(t, 0, sizeof *t);
}

/* tsr_ox_sole_consumer's answer for every name a node reads or the graph
 * outputs, in m->cons (none without the memory: the callers scan). */
static void cons_build(tsr_onnx_t *m)
{
    size_t n = m->gp->n_output;
    m->cons_built = 1;
    for (size_t i = 0; i < m->gp->n_node; i++)
        n += m->gp->node[i]->n_input;
    if (tsr_ox_names_init(&m->cons, n)) {
        tsr_err_clear(); /* (the scans instead) */
        return;
    }
    int added;
    for (size_t i = 0; i < m->gp->n_node; i++)
        for (size_t k = 0; k < m->gp->node[i]->n_input; k++) {
            int *c = tsr_ox_names_put(&m->cons, m->gp->node[i]->input[k], &added);
            *c = added || *c == (int)i ? (int)i : -2;
        }
    for (size_t i = 0; i < m->gp->n_output; i++)
        if (m->gp->output[i]->name)
            *tsr_ox_names_put(&m->cons, m->gp->output[i]->name, &added) = -2;
}

/* The (only) consumer node of value name, -1 if none, -2 if several or a
 * graph output: from the table of every name's (the graph does not change
 * after loading; the importer asks for hundreds of names), else a scan. */
int tsr_ox_sole_consumer(const tsr_onnx_t *m, const char *name)
{
    if (!m->cons_built)
        cons_build((tsr_onnx_t *)m); /* (a cache: m's meaning does not change) */
    if (m->cons.cap) {
        const int *c = tsr_ox_names_get(&m->cons, name);
        return c ? *c : -1;
    }
    int c = -1;
    for (size_t i = 0; i < m->gp->n_node; i++)
        for (size_t k = 0; k < m->gp->node[i]->n_input; k++)
            if (!strcmp(m->gp->node[i]->input[k], name)) {
                if (c >= 0 && c != (int)i)
                    return -2;
                c = (int)i;
            }
    for (size_t i = 0; i < m->gp->n_output; i++)
        if (!strcmp(m->gp->output[i]->name, name))
            return -2;
    return c;
}
