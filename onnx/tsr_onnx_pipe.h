/*
 * tsr_onnx_pipe: an imported ONNX model as the pipelined executor's network
 * (issue 26: `tessera infer --devices K`). The model's device operators
 * become one network description (tsr_netdesc.h) for the planner
 * (tsr_pipenet_problem) and the executor (tsr_pipex_run); the host
 * operators before them and after them run on the host, per input, around
 * the pipeline. Device segments joined only by relabellings (a Flatten
 * between a pool and a Gemm) are merged into one description; the host
 * operators between two device segments become one host node of the
 * pipeline (tsr_pipenet_host_t: tsr_onnx_pipe_host): segment s's output in,
 * segment s + 1's input (a tensor of the description no node makes) out.
 * The planner puts it on a host stage (its own thread) or into a device's
 * stage, by its cost (its measured time, tsr_onnx_pipe_time_host). Such a
 * group must read only segment s's output (and constants) and be the only
 * reader of its values: else refused, naming the operator.
 */
#ifndef TSR_ONNX_PIPE_H
#define TSR_ONNX_PIPE_H

#include "tsr_config.h"
#include "tsr_netdesc.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"
#include "tsr_pipenet.h"

typedef struct tsr_onnx_pipe tsr_onnx_pipe_t;

/* The model's device operators for configs of cfg's kind (activation
 * tables set up as tsr_onnx_set_target does) as one network; no device is
 * opened. Refused (TSR_EINVAL, one line): no device operator, host
 * operators between device segments that read another value or whose
 * values are read elsewhere, a segment that runs alone (a conv with int8
 * parts), segments that do not merge. m must outlive the pipe. */
int tsr_onnx_pipe_open(tsr_onnx_t *m, const tsr_config_t *cfg, tsr_onnx_pipe_t **out);
void tsr_onnx_pipe_free(tsr_onnx_pipe_t *p);
/* The network: tensor 0 its input, nd->output its output (valid while p is). */
const tsr_netdesc_t *tsr_onnx_pipe_net(const tsr_onnx_pipe_t *p);
/* Host operators before the device operators, on one model input in:
 * the network's input bytes copied to net_in. */
int tsr_onnx_pipe_before(tsr_onnx_pipe_t *p, const tsr_tensor_t *in, void *net_in);
/* The network's output bytes net_out, then the host operators after the
 * device operators: the model's first output in *out (allocated). */
int tsr_onnx_pipe_after(tsr_onnx_pipe_t *p, const void *net_out, tsr_tensor_t *out);
/* Host and device operators (for the printout): host_between the host
 * operators between device segments (in the host nodes). */
void tsr_onnx_pipe_counts(const tsr_onnx_pipe_t *p, int *host_before, int *device, int *host_after, int *segments,
                          int *host_between);
/* The host nodes (NULL: none): valid while p is; their run uses the model's
 * run-time bytes, so one pipeline of the model at a time. */
const tsr_pipenet_host_t *tsr_onnx_pipe_host(const tsr_onnx_pipe_t *p);
/* Time every host node on a zero input (the median of reps runs, at most 64) and set
 * its cost: the host model, tsr_pipenet_host_cycles(ns, clock_mhz) x scale
 * (> 0; the host nodes' scale, which the executor's measure applies too). */
int tsr_onnx_pipe_time_host(tsr_onnx_pipe_t *p, double clock_mhz, int reps, double scale);

#endif
