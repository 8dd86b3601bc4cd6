/* tsr_link: the link replay's problem checked, then run by the SystemC
 * interconnect when it is linked (tsr_link.h). */
#include "tsr_link.h"

#include <math.h>
#include <stddef.h>

#include "tsr_error.h"

/* The systemc layer is optional (as the driver's systemc backend): a
 * program that does not link it has no replay, and says so. */
#pragma weak tsr_sc_link_replay

int tsr_link_available(void) { return tsr_sc_link_replay != NULL; }

double tsr_link_xfer_cycles(const tsr_link_problem_t *p, uint64_t b)
{
    return b ? p->latency + (double)b / p->bytes_per_cycle : 0;
}

static int check_stage(const tsr_link_problem_t *p, int s)
{
    const tsr_link_stage_t *st = &p->st[s];
    if (st->nrx < 0 || st->nrx > TSR_LINK_MAX_XFERS || st->ntx < 0 || st->ntx > TSR_LINK_MAX_XFERS)
        return tsr_err(TSR_EINVAL, "link: stage %d has %d + %d transfers, at most %d each way", s, st->nrx, st->ntx,
                       TSR_LINK_MAX_XFERS);
    for (int k = 0; k < st->nrx + st->ntx; k++)
        if ((k < st->nrx ? st->rx[k] : st->tx[k - st->nrx]) >= (1ull << 32))
            return tsr_err(TSR_EINVAL, "link: stage %d: a transfer of 4 GiB or more", s);
    if (!st->compute)
        return tsr_err(TSR_EINVAL, "link: stage %d has no compute cycles", s);
    for (int i = 0; i < p->ninputs; i++)
        if (!(st->compute[i] >= 0) || !isfinite(st->compute[i]))
            return tsr_err(TSR_EINVAL, "link: stage %d, input %d: compute %g cycles, need >= 0", s, i, st->compute[i]);
    return TSR_OK;
}

static int check(const tsr_link_problem_t *p, const tsr_link_result_t *r)
{
    if (!p || !r || !p->st)
        return tsr_err(TSR_EINVAL, "link: NULL problem, stages or result");
    if (p->mode != TSR_LINK_P2P && p->mode != TSR_LINK_SHARED)
        return tsr_err(TSR_EINVAL, "link: mode %d, need p2p (0) or shared (1)", (int)p->mode);
    if (!(p->bytes_per_cycle > 0) || !isfinite(p->bytes_per_cycle) || !(p->latency >= 0) || !isfinite(p->latency))
        return tsr_err(TSR_EINVAL, "link: %g bytes/cycle and %g cycles latency: need > 0 and >= 0", p->bytes_per_cycle,
                       p->latency);
    if (p->nstages < 1 || p->nstages > TSR_LINK_MAX_PORTS)
        return tsr_err(TSR_EINVAL, "link: %d stages, need 1..%d", p->nstages, TSR_LINK_MAX_PORTS);
    if (p->ninputs < 1 || p->ninputs > TSR_LINK_MAX_INPUTS || p->depth < 1)
        return tsr_err(TSR_EINVAL, "link: %d inputs and queue depth %d, need 1..%d and >= 1", p->ninputs, p->depth,
                       TSR_LINK_MAX_INPUTS);
    if (p->win0 < 0 || p->win1 < 0 || p->win1 >= p->ninputs || (p->win1 && p->win0 >= p->win1))
        return tsr_err(TSR_EINVAL, "link: period window %d..%d of %d inputs", p->win0, p->win1, p->ninputs);
    for (int s = 0; s < p->nstages; s++) {
        int rc = check_stage(p, s);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr_link_replay(const tsr_link_problem_t *p, tsr_link_result_t *r)
{
    int rc = check(p, r);
    if (rc)
        return rc;
    if (!tsr_link_available())
        return tsr_err(TSR_EBACKEND, "link: the shared link is timed by the SystemC interconnect; this program "
                                     "was built without the systemc layer (tsr_systemc)");
    return tsr_sc_link_replay(p, r);
}
