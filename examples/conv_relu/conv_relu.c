/*
 * conv_relu: a program built against an installed libtessera (pkg-config
 * tessera). It opens a device (fsim by default), runs a small quantized
 * conv2d (int8, 3x3, pad 1, per-channel requantization) and a relu on it
 * with the public API, and checks every output byte against a naive loop
 * written here from jit/operators.md.
 *
 *   usage: conv_relu [BACKEND [CONFIG]]     (fsim default; rtl needs
 *          TESSERA_ROOT=<prefix>/share/tessera and Verilator)
 * Exit status 0 when the device agrees with the loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tsr_config.h>
#include <tsr_conv2d.h>
#include <tsr_driver.h>
#include <tsr_eltwise.h>
#include <tsr_error.h>

enum { N = 1, CI = 8, H = 12, W = 12, CO = 16, K = 3 };

/* TFLite MultiplyByQuantizedMultiplier for shift <= 0 (the only case
 * here): round(acc * M / 2^31) ties up, then / 2^-shift ties away from 0. */
static int32_t requant(int32_t acc, int32_t m, int shift)
{
    int64_t p = (int64_t)acc * m + ((int64_t)1 << 30);
    int64_t hi = p >= 0 ? p >> 31 : -((-p + ((int64_t)1 << 31) - 1) >> 31);
    int64_t d = (int64_t)1 << -shift, a = hi < 0 ? -hi : hi, r = (a + d / 2) / d;
    return (int32_t)(hi < 0 ? -r : r);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "conv_relu: %s: %s (%s)\n", what, tsr_errmsg(), tsr_errname(rc));
    return 1;
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "fsim", *cfgname = argc > 2 ? argv[2] : "default";
    static int8_t x[N * CI * H * W], w[CO * CI * K * K], y[N * CO * H * W], r[N * CO * H * W];
    int32_t bias[CO], mult[CO], shift[CO], w_zp = 0;
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
    for (int o = 0; o < CO; o++) {
        bias[o] = (int32_t)((s = s * 1103515245u + 12345u) >> 20) - 2048;
        mult[o] = (int32_t)(0x40000000u + ((s = s * 1103515245u + 12345u) >> 2));
        shift[o] = -10 - o % 3;
    }
    const tsr_conv2d_params_t p = {
        .n = N, .c_in = CI, .h = H, .w = W, .c_out = CO, .kh = K, .kw = K, .stride_h = 1, .stride_w = 1,
        .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .groups = 1,
        .x_dtype = TSR_DT_INT8, .x_zp = -3, .w_dtype = TSR_DT_INT8, .w_zp = &w_zp, .w_zp_count = 1,
        .y_dtype = TSR_DT_INT8, .y_zp = 5, .mult = mult, .shift = shift, .rq_count = CO,
        .act_min = -128, .act_max = 127};

    tsr_config_t cfg;
    tsr_device_t *dev = NULL;
    int rc = tsr_config_load(cfgname, &cfg);
    if (rc)
        return fail("config", rc);
    if ((rc = tsr_device_open(backend, &cfg, NULL, &dev)))
        return fail("open", rc);
    /* conv2d, then relu (clip at the zero point) on its output, on the device */
    const tsr_eltwise_desc_t yd = {.n = N, .c = CO, .h = H, .w = W, .dtype = TSR_DT_INT8, .zp = p.y_zp};
    if ((rc = tsr_conv2d_run(dev, &p, x, w, bias, y)) || (rc = tsr_relu_run(dev, &yd, y, y))) {
        tsr_device_close(dev);
        return fail("run", rc);
    }
    tsr_device_close(dev);

    /* the naive loop */
    for (int o = 0; o < CO; o++)
        for (int oy = 0; oy < H; oy++)
            for (int ox = 0; ox < W; ox++) {
                int32_t acc = bias[o];
                for (int c = 0; c < CI; c++)
                    for (int ky = 0; ky < K; ky++)
                        for (int kx = 0; kx < K; kx++) {
                            int iy = oy - 1 + ky, ix = ox - 1 + kx;
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                acc += (x[(c * H + iy) * W + ix] - p.x_zp) * w[((o * CI + c) * K + ky) * K + kx];
                        }
                int32_t v = requant(acc, mult[o], shift[o]) + p.y_zp;
                v = v < -128 ? -128 : v > 127 ? 127 : v;
                r[(o * H + oy) * W + ox] = (int8_t)(v < p.y_zp ? p.y_zp : v); /* relu: max(y, y_zp) */
            }
    int inside = 0;
    for (size_t i = 0; i < sizeof y; i++) {
        if (y[i] != r[i]) {
            fprintf(stderr, "conv_relu: output %zu: device %d, naive loop %d\n", i, y[i], r[i]);
            return 1;
        }
        inside += r[i] > p.y_zp && r[i] < 127;
    }
    if (inside < (int)sizeof y / 8) {
        fprintf(stderr, "conv_relu: only %d of %zu outputs strictly inside (0, 127]: a weak check\n", inside,
                sizeof y);
        return 1;
    }
    printf("conv_relu: %s/%s: conv2d %dx%dx%d -> %d (3x3) + relu: all %zu outputs equal the naive loop (%d "
           "positive)\n", backend, cfgname, CI, H, W, CO, sizeof y, inside);
    return 0;
}
