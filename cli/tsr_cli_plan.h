/* tsr_cli_plan: `tessera plan`: the pipeline placement planner
 * (jit/tsr_pipeplan.h) on a network with the JIT's per-layer costs
 * (jit/tsr_pipenet.h): the optimal plan over K devices, the baselines, and
 * with --bench the planner's own run time. */
#ifndef TSR_CLI_PLAN_H
#define TSR_CLI_PLAN_H

/* argv[0] is "plan". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_plan(int argc, char **argv);

#endif
