/*
 * tsr_onnx_pipe: an imported ONNX model as the pipelined executor's network
 * (issue 26: `tessera infer --devices K`). The model's device operators
 * become one network description (tsr_netdesc.h) for the planner
 * (tsr_pipenet_problem) and the executor (tsr_pipex_run); the host
 * operators before them and after them run on the host, per input, around
 * the pipeline. Device segments joined only by relabellings (a Flatten
 * between a pool and a Gemm) are merged into one description; a host
 * operator between two device segments is refused (the pipeline runs one
 * chain of device stages), naming it.
 */
#ifndef TSR_ONNX_PIPE_H
#define TSR_ONNX_PIPE_H

#include "tsr_config.h"
#include "tsr_netdesc.h"
#include "tsr_npy.h"
#include "tsr_onnx.h"

typedef struct tsr_onnx_pipe tsr_onnx_pipe_t;

/* The model's device operators for configs of cfg's kind (activation
 * tables set up as tsr_onnx_set_target does) as one network; no device is
 * opened. Refused (TSR_EINVAL, one line): no device operator, a host
 * operator between device segments, a segment that runs alone (a conv with
 * int8 parts), segments that do not merge. m must outlive the pipe. */
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
/* Host and device operators (for the printout). */
void tsr_onnx_pipe_counts(const tsr_onnx_pipe_t *p, int *host_before, int *device, int *host_after, int *segments);

#endif
