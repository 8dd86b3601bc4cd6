/*
 * tsr_sgd: the SGD-with-momentum update on the device ALU, exact in int32
 * (issue 27). The formulas below are its definition, bit for bit, as in
 * jit/operators.md "SGD update" (tests/test_sgd.c holds an independent
 * plain-C reference of them).
 *
 * State of one trained tensor of n values, resident in device DRAM for the
 * life of the operator: its master copy w_m (int32 fixed point: the value
 * on its quantization grid times 2^frac) and its momentum v (int32, the
 * same fixed point). Each step takes the tensor's exact int32 gradient sums
 * g_raw (the dW sums of jit/tsr_grad.h, or bias gradients) and computes on
 * the ALU, per element, with mulhr / rshr as isa/semantics.md defines them:
 *
 *   g  = rshr(clamp(mulhr(g_raw, mg), -gl, gl), sg)   mg and sg of the step; gl = L >> -sg for sg < 0,
 *                                                      else min(L << sg, 2^31 - 1): |g| <= L = 2^30
 *   v  = clamp(mulhr(v, mmu) + g, -(L - 1), L - 1)
 *   w_m = clamp(w_m - rshr(mulhr(v, mlr), slr), w_lo, w_hi)
 *   q  = clamp(rshr(w_m, frac), q_lo, q_hi)
 *
 * With per-channel scales (chans C > 1: the tensor is C channels of K = n / C
 * consecutive values) mg is channel c's own, mg_c, and sg the tensor's.
 *
 * q (int8, q_bytes 1: the weights the next forward uses; int32, q_bytes 4:
 * a bias) is read back. No step can leave int32: every sum's operands are
 * bounded by 2^30 by the clamps before it (the parameter check refuses the
 * ranges that would not be; w_m in three planes: within 2^22).
 *
 * The state is kept in DRAM as four int8 planes per tensor (w_m: or three; a
 * STORE keeps 8 bits of each accumulator): digit k of x is sext8(x_k), x_0 = x,
 * x_(k+1) = (x_k + 128) >> 8, and x = SUM_k digit_k * 256^k (mod 2^32):
 * the device splits with add/shr and joins the acc8 loads with shr/add.
 */
#ifndef TSR_SGD_H
#define TSR_SGD_H

#include <stdint.h>

#include "tsr_driver.h"

/* Bound of g, v (exclusive) and each ALU sum's operands: 2^30; of w_m and q with w_m in P planes (3 or 4):
 * 2^(8P - 2) */
#define TSR_SGD_LIM_OF(P) (INT32_C(1) << (8 * (P) - 2))
#define TSR_SGD_LIM TSR_SGD_LIM_OF(4)

typedef struct tsr_sgd_params {
    int64_t n;        /* values of the tensor, 1 .. 2^26 */
    int frac;         /* fractional bits F of w_m, 0 .. 30 */
    int32_t mmu;      /* momentum as mulhr multiplier: round(mu * 2^31), 0 .. 2^31 - 1 */
    int32_t mlr;      /* learning rate: lr = mlr / 2^31 / 2^slr, mlr 0 .. 2^31 - 1 */
    int slr;          /* 0 .. 31 */
    int32_t w_lo, w_hi; /* clamp of w_m, within [-2^30, 2^30 - 1] */
    int32_t q_lo, q_hi; /* clamp of q, within [-2^30, 2^30 - 1] (q_bytes 1: within [-128, 127]) */
    int q_bytes;      /* 1 (int8 q) or 4 (int32 q) */
    int planes;       /* w_m's bytes per value: 4 (or 0), or 3: w_m's and q's bounds are then 2^22, not 2^30 */
    uint64_t g_buf;   /* device buffer for g_raw of at least rows * acc_bytes shared with other tensors (their steps
                         run one after another; the caller frees it), or 0: one of its own */
    uint64_t q_buf;   /* the same for q: at least q_bytes * rows * BATCH * BLOCK_OUT bytes, or 0 */
    int64_t chans;    /* 0 or 1: one gradient multiplier; C > 1 (dividing n): channel c = values c*K .. c*K+K-1
                         (K = n / C) has its own (tsr_sgd_step_ch). The device holds value (c, k) at row
                         (c / lanes) * K + k, lane c % lanes: a row's lanes are lanes channels, so a tile of a
                         channel group's rows takes their multipliers as one constant row */
    int transient;    /* 1: only the state (w_m's and v's planes) stays in device DRAM between steps; the uops,
                         constants, multiplier rows and own g and q buffers are allocated by each step and freed
                         after it (a trainer's peak then holds them only while an update runs; the stream is
                         built again when they land elsewhere) */
} tsr_sgd_params_t;

typedef struct tsr_sgd {
    tsr_device_t *dev;
    tsr_sgd_params_t p;
    int64_t rows;             /* accumulator rows of the tensor (n / lanes rounded up; chans > 1: groups * K) */
    int64_t grows, groups;    /* rows of a channel group (K; chans <= 1: rows) and the groups (1) */
    int tile;                 /* rows per tile */
    uint64_t ua, ca, ga, wa, va, qa; /* device buffers: uops, constants, g_raw, w planes, v planes, q planes */
    uint64_t ma;              /* chans > 1: the groups' multiplier rows (lane l of row j: mg of channel j*lanes+l) */
    uint64_t built[5];        /* ua, ca, ga, qa, ma as the stream was built with */
    uint8_t *hu;              /* the encoded uops (MAXUOPS rows; transient: written each step) */
    int np;                   /* planes of the state (3 or 4) */
    int own_g, own_q;         /* ga, qa are its own (not params' g_buf, q_buf) */
    tsr_insn_t *insns;        /* one step's stream */
    size_t ninsns;
    uint64_t alu_ops;         /* ALU tensor ops of one step */
} tsr_sgd_t;

/* Check that config c can run the update (32-bit accumulators, 8-bit inputs, the uop and accumulator
 * buffers' sizes): a one-line error naming the buffer and the size it needs. tsr_sgd_init checks it too;
 * a caller checks it before it starts work the update would follow. */
int tsr_sgd_config_check(const tsr_config_t *c);
/* Check p (one-line error naming the parameter). */
int tsr_sgd_check(const tsr_sgd_params_t *p);
/* Allocate the state on dev, write w_m0 (n values within [w_lo, w_hi]) and v = 0, build the step's stream. */
int tsr_sgd_init(tsr_sgd_t *s, tsr_device_t *dev, const tsr_sgd_params_t *p, const int32_t *w_m0);
/* One step with gradient sums g_raw [n] and this step's gradient multiplier mg (mulhr, 0 .. 2^31 - 1) and its
 * rounding right shift sg (-30 .. 31, negative: left; both constant rows, so the stream stays); q [n] gets the
 * new q (int8_t or int32_t by q_bytes). cycles += the run's (may be NULL). */
int tsr_sgd_step(tsr_sgd_t *s, const int32_t *g_raw, int32_t mg, int sg, void *q, uint64_t *cycles);
/* The same with per-channel multipliers mg [chans] (chans <= 1: mg [1]), one shift sg for the tensor. */
int tsr_sgd_step_ch(tsr_sgd_t *s, const int32_t *g_raw, const int32_t *mg, int sg, void *q, uint64_t *cycles);
/* Accumulator rows of the state of p on config c (a g_buf's rows; q_buf's values are rows * lanes). */
int64_t tsr_sgd_rows(const tsr_config_t *c, const tsr_sgd_params_t *p);
/* The state as the device holds it: w_m and v [n] (either may be NULL). */
int tsr_sgd_read_state(const tsr_sgd_t *s, int32_t *w_m, int32_t *v);
/* Release the device buffers and the stream. */
void tsr_sgd_free(tsr_sgd_t *s);

/* A real multiplier r >= 0 as (m, s) with r ~ m / 2^31 / 2^s, m in [2^30, 2^31) (0 for r == 0), s within
 * [smin, 31]; TSR_EINVAL when r needs a shift below smin (too large) or is not finite. */
int tsr_sgd_multiplier(double r, int smin, int32_t *m, int *s);

#endif
