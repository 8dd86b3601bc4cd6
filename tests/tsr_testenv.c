/* tsr_testenv: shared backend, config, device and random-number helpers of
 * the operator tests (see tsr_testenv.h). */
#include "tsr_testenv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "tsr_error.h"
#include "tsr_graph.h"
#include "tsr_netref.h"
#include "tsr_pipenet.h"
#include "tsr_util.h"

static const char *CFG_B2 = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, \"LOG_ACC_WIDTH\": 5, "
                            "\"LOG_BATCH\": 1, \"LOG_BLOCK\": 2, \"LOG_UOP_BUFF_SIZE\": 12, \"LOG_INP_BUFF_SIZE\": 11, "
                            "\"LOG_WGT_BUFF_SIZE\": 11, \"LOG_ACC_BUFF_SIZE\": 13}";
static const char *CFG_RECT = "{\"TARGET\": \"sim\", \"LOG_INP_WIDTH\": 3, \"LOG_WGT_WIDTH\": 3, \"LOG_ACC_WIDTH\": 5, "
                              "\"LOG_BATCH\": 0, \"LOG_BLOCK_IN\": 3, \"LOG_BLOCK_OUT\": 2, \"LOG_UOP_BUFF_SIZE\": 12, "
                              "\"LOG_INP_BUFF_SIZE\": 11, \"LOG_WGT_BUFF_SIZE\": 12, \"LOG_ACC_BUFF_SIZE\": 13}";

const char *tsr_test_backend(void)
{
    const char *b = getenv("TSR_TEST_BACKEND");
    return b && *b ? b : "fsim";
}

uint64_t tsr_test_seed(const char *env, uint64_t dflt)
{
    const char *s = getenv(env);
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

/* The preset with "key": value set (added, or replacing its own value). */
static int preset_with(const char *preset, const char *key, int value, const char *name, tsr_config_t *cfg)
{
    (void)name;
    if (!tsr_config_preset_json(preset))
        return tsr_err(TSR_ECONFIG, "no preset %s", preset);
    return tsr_config_load_with(preset, key, value, cfg);
}

void tsr_test_preset_with(const char *preset, const char *key, int value, tsr_config_t *cfg)
{
    if (preset_with(preset, key, value, preset, cfg))
        fail_msg("%s + %s %d: %s", preset, key, value, tsr_errmsg());
}

int tsr_test_config(const char *name, tsr_config_t *cfg)
{
    /* "<preset>+exact": the preset with EXACT_REQUANT = 1 */
    const char *plus = strstr(name, "+exact");
    if (plus && !plus[6]) {
        char base[32];
        snprintf(base, sizeof base, "%.*s", (int)(plus - name), name);
        return preset_with(base, "EXACT_REQUANT", 1, name, cfg);
    }
    /* "<preset>+lut<N>": the preset with ACT_LUT = N ("default+lut0": the default without its tables) */
    const char *lut = strstr(name, "+lut");
    int n = 0, end = 0;
    if (lut && sscanf(lut, "+lut%d%n", &n, &end) == 1 && !lut[end]) {
        char base[32];
        snprintf(base, sizeof base, "%.*s", (int)(lut - name), name);
        return preset_with(base, "ACT_LUT", n, name, cfg);
    }
    if (!strcmp(name, "b2"))
        return tsr_config_parse(CFG_B2, "b2", cfg);
    if (!strcmp(name, "rect"))
        return tsr_config_parse(CFG_RECT, "rect", cfg);
    return tsr_config_load(name, cfg);
}

tsr_device_t *tsr_test_open(const char *name, uint64_t seed)
{
    tsr_config_t cfg;
    if (tsr_test_config(name, &cfg))
        fail_msg("config %s: %s", name, tsr_errmsg());
    tsr_device_t *dev = NULL;
    tsr_device_opts_t o = {.seed = seed};
    if (tsr_device_open(tsr_test_backend(), &cfg, &o, &dev))
        fail_msg("open %s/%s: %s", tsr_test_backend(), name, tsr_errmsg());
    return dev;
}

uint64_t tsr_test_next(uint64_t *s)
{
    return tsr_splitmix64(s);
}

int tsr_test_rnd(uint64_t *s, int lo, int hi)
{
    return lo + (int)(tsr_test_next(s) % (uint64_t)((int64_t)hi - lo + 1));
}

uint64_t tsr_test_uops(tsr_device_t *dev, const tsr_uop_t *uops, size_t n)
{
    const tsr_config_t *c = tsr_device_config(dev);
    uint8_t *b = calloc(n ? n : 1, c->uop_bytes);
    uint64_t addr = 0;
    if (!b)
        fail_msg("out of memory");
    for (size_t k = 0; k < n; k++) {
        uint64_t raw;
        if (tsr_uop_encode(c, &uops[k], &raw))
            fail_msg("uop %zu: %s", k, tsr_errmsg());
        for (uint32_t i = 0; i < c->uop_bytes && i < 8; i++)
            b[k * c->uop_bytes + i] = (uint8_t)(raw >> (8 * i));
    }
    if (tsr_mem_alloc(dev, (uint64_t)(n ? n : 1) * c->uop_bytes, &addr) ||
        tsr_mem_write(dev, addr, b, (uint64_t)n * c->uop_bytes))
        fail_msg("uop buffer: %s", tsr_errmsg());
    free(b);
    return addr;
}

void tsr_test_mov_store(tsr_device_t *dev, tsr_insn_t s[4], uint64_t addr, int v)
{
    const tsr_config_t *c = tsr_device_config(dev);
    const tsr_uop_t z = {0, 0, 0};
    memset(s, 0, 4 * sizeof *s);
    s[0].opcode = TSR_OP_LOAD;
    s[0].mem_type = TSR_MEM_UOP;
    s[0].dram_base = (uint32_t)(tsr_test_uops(dev, &z, 1) / c->uop_bytes);
    s[0].y_size = s[0].x_size = s[0].x_stride = 1;
    s[1].opcode = TSR_OP_ALU;
    s[1].alu_opcode = TSR_ALU_MOV;
    s[1].use_imm = 1;
    s[1].imm = v;
    s[1].uop_end = 1;
    s[1].iter_out = s[1].iter_in = 1;
    s[1].push_next = 1;
    s[2].opcode = TSR_OP_STORE;
    s[2].mem_type = TSR_MEM_OUT;
    s[2].dram_base = (uint32_t)(addr / c->out_bytes);
    s[2].y_size = s[2].x_size = s[2].x_stride = 1;
    s[2].pop_prev = s[2].push_prev = 1;
    s[3].opcode = TSR_OP_FINISH;
    s[3].pop_next = 1;
}

int tsr_test_conv_cycles(const char *backend, const tsr_config_t *cfg, const tsr_conv2d_params_t *p, const void *w,
                         const int32_t *bias, double *cost, uint64_t *cycles, double *cpu_s)
{
    struct timespec t0, t1;
    tsr_device_t *dev = NULL;
    tsr_conv2d_plan_t pl;
    tsr_counters_t ct;
    int rc = tsr_device_open(backend, cfg, NULL, &dev);
    if (rc)
        return rc;
    if (!(rc = tsr_conv2d_plan(dev, p, &pl))) {
        size_t nx = (size_t)p->n * (size_t)p->c_in * (size_t)p->h * (size_t)p->w;
        void *x = calloc(nx ? nx : 1, 1);
        *cost = pl.cost;
        if (!x)
            rc = tsr_err(TSR_ENOMEM, "out of memory");
        if (!rc && !(rc = tsr_conv2d_write_weights(dev, &pl, w, bias)) && !(rc = tsr_conv2d_write_input(dev, &pl, x)) &&
            !(rc = tsr_reset_counters(dev)) && !clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0) &&
            !(rc = tsr_conv2d_exec(dev, &pl)) && !clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1) &&
            !(rc = tsr_read_counters(dev, &ct))) {
            *cycles = ct.cycles;
            if (cpu_s)
                *cpu_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        }
        free(x);
        tsr_conv2d_plan_free(dev, &pl);
    }
    tsr_device_close(dev);
    return rc;
}

tsr_insn_t tsr_test_mem_insn(uint32_t op, uint32_t m, uint32_t sram, uint64_t addr, uint32_t bytes, uint32_t n)
{
    tsr_insn_t in;
    memset(&in, 0, sizeof in);
    in.opcode = op;
    in.mem_type = m;
    in.sram_base = sram;
    in.dram_base = (uint32_t)(addr / bytes);
    in.y_size = 1;
    in.x_size = in.x_stride = n;
    return in;
}

void tsr_test_graph_vs_netref(tsr_device_t *dev, const tsr_netdesc_t *nd, size_t in_bytes, size_t out_bytes,
                              uint64_t *rs, const char *op, const char *what)
{
    assert_int_equal(tsr_netdesc_validate(nd), TSR_OK);
    tsr_graph_t *g = NULL;
    if (tsr_graph_from_netdesc(tsr_device_config(dev), nd, &g) || tsr_graph_plan(g, dev, 0))
        fail_msg("%s: graph: %s", what, tsr_errmsg());
    uint8_t *x = malloc(in_bytes), *y = malloc(out_bytes);
    assert_true(x && y);
    for (size_t i = 0; i < in_bytes; i++)
        x[i] = (uint8_t)tsr_test_next(rs);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    assert_int_equal(tsr_graph_exec(g, ins, outs), TSR_OK);
    void **ref = calloc((size_t)nd->ntensors, sizeof *ref);
    assert_true(ref != NULL);
    assert_int_equal(tsr_netref_run(nd, x, ref), TSR_OK);
    assert_memory_equal(y, ref[nd->output], out_bytes);
    int found = 0;
    for (int i = 0; tsr_graph_layer(g, i); i++)
        found |= !strcmp(tsr_graph_layer(g, i)->op, op);
    if (!found)
        fail_msg("%s: no %s layer in the plan", what, op);
    for (int t = 0; t < nd->ntensors; t++)
        free(ref[t]);
    free(ref), free(x), free(y);
    tsr_graph_free(g);
}

int tsr_test_run_cli(const char *cli, const char *args, char *buf, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli, args);
    return tsr_test_run_cmd(cmd, buf, cap);
}

int tsr_test_run_cmd(const char *cmd, char *buf, size_t cap)
{
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tsr_test_small_resnet_problem(int k, double bw, tsr_config_t *cfg, tsr_netdesc_t *nd, tsr_pp_t **pp)
{
    *pp = NULL;
    assert_int_equal(tsr_config_load("default", cfg), 0);
    assert_int_equal(tsr_netdesc_resnet18_small(3, 1, 32, 16, 10, nd), 0);
    if (tsr_pipenet_problem(nd, cfg, 1, pp, NULL))
        fail_msg("%s", tsr_errmsg());
    for (int d = 0; d < k; d++)
        assert_int_equal(tsr_pp_device(*pp, NULL, 0, 1ull << 30, NULL), 0);
    assert_int_equal(tsr_pp_set_link(*pp, bw, 500), 0);
}
