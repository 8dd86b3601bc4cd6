/*
 * small_graph: a program built against an installed libtessera (pkg-config
 * tessera) that builds a small network with the graph API (tsr_graph.h):
 *
 *   x [1,8,12,12] uint8 --conv 3x3 + relu--> [1,16,12,12] uint8
 *     --maxpool 2x2/2--> [1,16,6,6] --global avgpool--> [1,16,1,1]
 *     --dense 16->10--> logits [1,10,1,1] int8
 *
 * plans it once, runs it twice on new inputs (activations stay on the
 * device between layers) and checks the logits against the same operators
 * run one at a time through the single-operator API (host round trip
 * between them). Prints the graph's per-layer report.
 *
 *   usage: small_graph [BACKEND [CONFIG]]     (fsim default)
 * Exit status 0 when both agree.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tsr_error.h>
#include <tsr_graph.h>

enum { CI = 8, H = 12, CO = 16, M = 10 };

static int fail(const char *what, int rc)
{
    fprintf(stderr, "small_graph: %s: %s (%s)\n", what, tsr_errmsg(), tsr_errname(rc));
    return 1;
}

static uint32_t rnd(uint32_t *s) { return (*s = *s * 1103515245u + 12345u) >> 8; }

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "fsim", *cfgname = argc > 2 ? argv[2] : "default";
    static uint8_t x[CI * H * H], y1[CO * H * H], y2[CO * 6 * 6], y3[CO];
    static int8_t w[CO * CI * 9], wd[M * CO], logits[M], ref[M];
    int32_t bias[CO], mult[CO], shift[CO], dmult[M], dshift[M], zero = 0;
    uint32_t s = 7;
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (int8_t)rnd(&s);
    for (size_t i = 0; i < sizeof wd; i++)
        wd[i] = (int8_t)rnd(&s);
    for (int o = 0; o < CO; o++) {
        bias[o] = (int32_t)(rnd(&s) % 4096) - 2048;
        mult[o] = (int32_t)(0x40000000u + rnd(&s) % 0x40000000u);
        shift[o] = -9;
    }
    for (int o = 0; o < M; o++) {
        dmult[o] = (int32_t)(0x40000000u + rnd(&s) % 0x40000000u);
        dshift[o] = -7;
    }
    const tsr_conv2d_params_t cp = {
        .n = 1, .c_in = CI, .h = H, .w = H, .c_out = CO, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
        .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .groups = 1,
        .x_dtype = TSR_DT_UINT8, .x_zp = 128, .w_dtype = TSR_DT_INT8, .w_zp = &zero, .w_zp_count = 1,
        .y_dtype = TSR_DT_UINT8, .y_zp = 0, .mult = mult, .shift = shift, .rq_count = CO,
        .act_min = 0, .act_max = 255}; /* relu: the clamp at the zero point */
    const tsr_pool_params_t mp = {.kind = TSR_POOL_MAX, .n = 1, .c = CO, .h = H, .w = H, .kh = 2, .kw = 2,
                                  .stride_h = 2, .stride_w = 2, .dtype = TSR_DT_UINT8, .zp = 0};
    const tsr_pool_params_t gp = {.kind = TSR_POOL_GLOBAL_AVG, .n = 1, .c = CO, .h = 6, .w = 6,
                                  .dtype = TSR_DT_UINT8, .zp = 0};
    const tsr_dense_params_t dp = {.n = 1, .k = CO, .m = M, .x_dtype = TSR_DT_UINT8, .x_zp = 0,
                                   .w_dtype = TSR_DT_INT8, .w_zp = &zero, .w_zp_count = 1,
                                   .y_dtype = TSR_DT_INT8, .y_zp = 0, .mult = dmult, .shift = dshift,
                                   .rq_count = M, .act_min = -128, .act_max = 127};
    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    tsr_graph_t *g = NULL;
    int rc, t[5];
    if ((rc = tsr_config_load(cfgname, &cfg)) || (rc = tsr_device_open(backend, &cfg, NULL, &dev)))
        return fail("open", rc);
    /* the graph: tensors, then operators over them */
    if ((rc = tsr_graph_create(&cfg, &g)) ||
        (rc = tsr_graph_tensor(g, 1, CI, H, H, TSR_DT_UINT8, 128, &t[0])) ||
        (rc = tsr_graph_tensor(g, 1, CO, H, H, TSR_DT_UINT8, 0, &t[1])) ||
        (rc = tsr_graph_tensor(g, 1, CO, 6, 6, TSR_DT_UINT8, 0, &t[2])) ||
        (rc = tsr_graph_tensor(g, 1, CO, 1, 1, TSR_DT_UINT8, 0, &t[3])) ||
        (rc = tsr_graph_tensor(g, 1, M, 1, 1, TSR_DT_INT8, 0, &t[4])) ||
        (rc = tsr_graph_conv2d(g, "conv", t[0], t[1], &cp, w, bias)) ||
        (rc = tsr_graph_pool(g, "maxpool", t[1], t[2], &mp)) || (rc = tsr_graph_pool(g, "gap", t[2], t[3], &gp)) ||
        (rc = tsr_graph_dense(g, "fc", t[3], t[4], &dp, wd, NULL)) || (rc = tsr_graph_output(g, t[4])) ||
        (rc = tsr_graph_plan(g, dev, 0)))
        return fail("graph", rc);
    int bad = 0;
    for (int run = 0; run < 2 && !bad; run++) {
        for (size_t i = 0; i < sizeof x; i++)
            x[i] = (uint8_t)rnd(&s);
        const void *ins[1] = {x};
        void *outs[1] = {logits};
        if ((rc = tsr_graph_exec(g, ins, outs)))
            return fail("exec", rc);
        /* the same network one operator at a time */
        if ((rc = tsr_conv2d_run(dev, &cp, x, w, bias, y1)) || (rc = tsr_pool_run(dev, &mp, y1, y2)) ||
            (rc = tsr_pool_run(dev, &gp, y2, y3)) || (rc = tsr_dense_run(dev, &dp, y3, wd, NULL, ref)))
            return fail("single operators", rc);
        for (int i = 0; i < M; i++)
            if (logits[i] != ref[i]) {
                fprintf(stderr, "small_graph: run %d: logit %d is %d, the single operators give %d\n", run, i,
                        logits[i], ref[i]);
                bad = 1;
            }
    }
    tsr_graph_print_report(g, stdout);
    printf("small_graph: %s on %s/%s\n", bad ? "DIFFERENT" : "graph == single operators", backend, cfgname);
    tsr_graph_free(g);
    tsr_device_close(dev);
    return bad;
}
