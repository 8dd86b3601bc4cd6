/*
 * tsr_netdump: write a generated network description (jit/tsr_netdesc.h,
 * ResNet-18 or its small variant) as plain files, and the bytes of every
 * tensor the graph runtime computes for it, so that a script can rebuild the
 * same network as an ONNX model (scripts/onnx/resnet18_onnx.py) and the
 * ONNX importer's result can be compared with the graph runtime's byte for
 * byte. Not a CTest test by itself: scripts/onnx/test_resnet18.sh drives it.
 *
 * usage: tsr_netdump DIR [--seed N] [--small HW,WIDTH,CLASSES] [--backend fsim|rtl]
 * DIR receives net.json (tensors: shape, dtype, zero point, scale; nodes:
 * kind, name, tensor ids, geometry, requantization integers, clamp),
 * w<i>.npy / b<i>.npy (node i's int8 weights, int32 bias), input0.npy (the
 * seeded input of tsr_netdesc_random_input) and t<id>.npy (tensor id as the
 * graph runtime computed it on the backend, every tensor kept).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_config.h"
#include "tsr_driver.h"
#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_netdesc.h"
#include "tsr_npy.h"

static int write_npy(const char *dir, const char *stem, int i, tsr_dtype_e dt, int ndim, const int64_t *shape,
                     const void *data)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s%d.npy", dir, stem, i);
    tsr_tensor_t t;
    int rc = tsr_tensor_alloc(&t, dt, ndim, shape);
    if (rc)
        return rc;
    memcpy(t.data, data, t.nbytes);
    rc = tsr_npy_write(path, &t);
    tsr_tensor_free(&t);
    return rc;
}

static void ints(FILE *f, const char *key, const int32_t *v, int n)
{
    fprintf(f, ", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? ", " : "", (int)v[i]);
    fputc(']', f);
}

static const char *dtn(tsr_dtype_e dt)
{
    return dt == TSR_DT_UINT8 ? "uint8" : "int8";
}

/* net.json and the weight files */
static int dump_desc(const tsr_netdesc_t *nd, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/net.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return tsr_err(TSR_EIO, "%s: cannot create", path);
    int rc = 0;
    fprintf(f, "{\"name\": \"%s\", \"output\": %d, \"tensors\": [\n", nd->name, nd->output);
    for (int t = 0; t < nd->ntensors; t++) {
        const tsr_nd_tensor_t *x = &nd->tensors[t];
        fprintf(f, "  {\"shape\": [%d, %d, %d, %d], \"dtype\": \"%s\", \"zp\": %d, \"scale\": %.17g}%s\n", x->n, x->c,
                x->h, x->w, dtn(x->dtype), (int)x->zp, x->scale, t + 1 < nd->ntensors ? "," : "");
    }
    fprintf(f, "], \"nodes\": [\n");
    for (int i = 0; i < nd->nnodes && !rc; i++) {
        const tsr_nd_node_t *n = &nd->nodes[i];
        fprintf(f, "  {\"name\": \"%s\", \"in\": [%d, %d], \"out\": %d", n->name, n->in[0], n->in[1], n->out);
        switch (n->kind) {
        case TSR_ND_CONV: {
            const tsr_conv2d_params_t *p = &n->conv;
            fprintf(f, ", \"kind\": \"conv\", \"k\": [%d, %d], \"stride\": [%d, %d], \"pads\": [%d, %d, %d, %d], "
                       "\"groups\": %d, \"act\": [%d, %d], \"w_dtype\": \"%s\"",
                    p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right,
                    p->groups, (int)p->act_min, (int)p->act_max, dtn(p->w_dtype));
            ints(f, "mult", p->mult, p->rq_count);
            ints(f, "shift", p->shift, p->rq_count);
            ints(f, "w_zp", p->w_zp, p->w_zp_count);
            const int64_t ws[4] = {p->c_out, p->c_in / p->groups, p->kh, p->kw}, bs[1] = {p->c_out};
            rc = write_npy(dir, "w", i, TSR_DT_INT8, 4, ws, n->w);
            if (!rc && n->bias)
                rc = write_npy(dir, "b", i, TSR_DT_INT32, 1, bs, n->bias);
            break;
        }
        case TSR_ND_DENSE: {
            const tsr_dense_params_t *p = &n->dense;
            fprintf(f, ", \"kind\": \"dense\", \"act\": [%d, %d], \"w_dtype\": \"%s\"", (int)p->act_min,
                    (int)p->act_max, dtn(p->w_dtype));
            ints(f, "mult", p->mult, p->rq_count);
            ints(f, "shift", p->shift, p->rq_count);
            ints(f, "w_zp", p->w_zp, p->w_zp_count);
            const int64_t ws[2] = {p->m, p->k}, bs[1] = {p->m};
            rc = write_npy(dir, "w", i, TSR_DT_INT8, 2, ws, n->w);
            if (!rc && n->bias)
                rc = write_npy(dir, "b", i, TSR_DT_INT32, 1, bs, n->bias);
            break;
        }
        case TSR_ND_POOL: {
            const tsr_pool_params_t *p = &n->pool;
            const char *k = p->kind == TSR_POOL_MAX ? "max" : p->kind == TSR_POOL_AVG ? "avg" : "global_avg";
            fprintf(f, ", \"kind\": \"pool\", \"pool\": \"%s\", \"k\": [%d, %d], \"stride\": [%d, %d], "
                       "\"pads\": [%d, %d, %d, %d], \"count_include_pad\": %d",
                    k, p->kh, p->kw, p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->pad_bottom, p->pad_right,
                    p->count_include_pad);
            break;
        }
        case TSR_ND_ADD: {
            const tsr_add_params_t *p = &n->add;
            fprintf(f, ", \"kind\": \"add\", \"add\": [%d, %d, %d, %d, %d, %d, %d], \"act\": [%d, %d]", p->left_shift,
                    (int)p->mult_a, p->shift_a, (int)p->mult_b, p->shift_b, (int)p->mult_out, p->shift_out,
                    (int)p->act_min, (int)p->act_max);
            break;
        }
        default:
            rc = tsr_err(TSR_EINVAL, "node %s: kind %d is not dumped", n->name, (int)n->kind);
        }
        fprintf(f, "}%s\n", i + 1 < nd->nnodes ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fclose(f) && !rc)
        rc = tsr_err(TSR_EIO, "%s: write failed", path);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *backend = "fsim";
    unsigned long long seed = 1;
    int small = 0, hw = 0, width = 0, classes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--small") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d", &hw, &width, &classes) != 3)
                return fprintf(stderr, "tsr_netdump: --small needs HW,WIDTH,CLASSES\n"), 2;
            small = 1;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else
            return fprintf(stderr, "usage: tsr_netdump DIR [--seed N] [--small HW,WIDTH,CLASSES] [--backend B]\n"), 2;
    }
    if (!dir)
        return fprintf(stderr, "usage: tsr_netdump DIR [--seed N] [--small HW,WIDTH,CLASSES] [--backend B]\n"), 2;
    tsr_netdesc_t nd;
    memset(&nd, 0, sizeof nd);
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    uint8_t *buf = NULL;
    int rc = small ? tsr_netdesc_resnet18_small(seed, 1, hw, width, classes, &nd) : tsr_netdesc_resnet18(seed, 1, &nd);
    if (!rc)
        rc = dump_desc(&nd, dir);
    if (!rc)
        rc = tsr_config_load("default", &cfg);
    if (!rc)
        rc = tsr_device_open(backend, &cfg, NULL, &dev);
    if (!rc)
        rc = tsr_graph_from_netdesc(&cfg, &nd, &g);
    if (!rc)
        rc = tsr_graph_plan(g, dev, TSR_GRAPH_KEEP_ALL | TSR_GRAPH_NO_FUSE); /* every tensor is read back */
    uint64_t most = 0;
    for (int t = 0; t < nd.ntensors; t++)
        most = tsr_netdesc_tensor_bytes(&nd, t) > most ? tsr_netdesc_tensor_bytes(&nd, t) : most;
    if (!rc && !(buf = malloc(most)))
        rc = tsr_err(TSR_ENOMEM, "out of memory");
    if (!rc) {
        tsr_netdesc_random_input(&nd, seed, buf);
        const int64_t s[4] = {nd.tensors[0].n, nd.tensors[0].c, nd.tensors[0].h, nd.tensors[0].w};
        rc = write_npy(dir, "input", 0, nd.tensors[0].dtype, 4, s, buf);
        const void *ins[1] = {buf};
        if (!rc)
            rc = tsr_graph_exec(g, ins, NULL);
    }
    for (int t = 1; t < nd.ntensors && !rc; t++) {
        const tsr_nd_tensor_t *x = &nd.tensors[t];
        const int64_t s[4] = {x->n, x->c, x->h, x->w};
        rc = tsr_graph_read_tensor(g, t, buf);
        if (!rc)
            rc = write_npy(dir, "t", t, x->dtype, 4, s, buf);
    }
    if (!rc)
        printf("tsr_netdump: %s (%d tensors, %d nodes, seed %llu) on %s -> %s\n", nd.name, nd.ntensors, nd.nnodes,
               seed, backend, dir);
    free(buf);
    tsr_graph_free(g);
    tsr_device_close(dev);
    tsr_netdesc_free(&nd);
    if (rc) {
        fprintf(stderr, "tsr_netdump: %s\n", tsr_errmsg());
        return 1;
    }
    return 0;
}
