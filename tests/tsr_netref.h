/*
 * tsr_netref: the plain-C int8 reference of a whole network: every node of
 * a tsr_netdesc_t computed with tests/tsr_opref.c (written independently of
 * the JIT). Used by the network tests to check every byte of every tensor
 * the device produces and to name the first node that diverges.
 *
 * CONTRACT shared by two branches (h/netref owns it; h/graph uses it after
 * it lands on main): change only additively.
 */
#ifndef TSR_NETREF_H
#define TSR_NETREF_H

#include "tsr_netdesc.h"

/* Run nd on input (tensor 0's bytes). outs[t] (t < nd->ntensors) receives a
 * malloc'd buffer with tensor t's NCHW bytes (outs[0] a copy of input).
 * 0 or a negative error code (outs all NULL on error). */
int tsr_netref_run(const tsr_netdesc_t *nd, const void *input, void **outs);
void tsr_netref_free(const tsr_netdesc_t *nd, void **outs);

#endif
