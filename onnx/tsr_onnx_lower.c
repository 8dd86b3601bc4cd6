/*
 * tsr_onnx_lower: the graph to lops. Nodes are put in topological order,
 * the QDQ groups selected (tsr_onnx_qdq.c), then each node goes through
 * the same checks (inputs defined, a domain the importer knows) to its
 * handler in the op registry (tsr_onnx_ops.c). Afterwards the graph
 * output must be a computed value, real floats if it is a float view.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tsr_error.h"
#include "tsr_onnx_ir.h"
#include "tsr_onnx_ops.h"
#include "tsr_strsafe.h"

/* Producers are resolved once (prod[k] for the k-th node input overall:
 * a node index, or -1 for a graph input / initializer / empty name), then
 * nodes are taken in passes as their producers are placed: O(nodes^2)
 * at worst, bounded by the node limit. */
static int topo_sort(tsr_onnx_t *m)
{
    const size_t nn = m->gp->n_node;
    size_t nin = 0;
    for (size_t i = 0; i < nn; i++)
        nin += m->gp->node[i]->n_input;
    int *done = calloc(nn + 1, sizeof(int)), *prod = malloc(sizeof(int) * (nin + 1));
    m->order = malloc(sizeof(int) * (nn + 1));
    /* Where each name comes from: -1 a graph input or initializer, else the
     * first node that outputs it (the producer of every node input by one
     * look-up, not a scan of the graph's names per input). */
    ox_names_t src = {0};
    size_t nsrc = m->gp->n_input + m->gp->n_initializer;
    for (size_t j = 0; j < nn; j++)
        nsrc += m->gp->node[j]->n_output;
    if (!done || !prod || !m->order || tsr_ox_names_init(&src, nsrc)) {
        free(done);
        free(prod);
        return tsr_err(TSR_ENOMEM, "out of memory");
    }
    int added;
    for (size_t g = 0; g < m->gp->n_input; g++)
        if (m->gp->input[g]->name)
            *tsr_ox_names_put(&src, m->gp->input[g]->name, &added) = -1;
    for (size_t g = 0; g < m->gp->n_initializer; g++)
        if (m->gp->initializer[g]->name)
            *tsr_ox_names_put(&src, m->gp->initializer[g]->name, &added) = -1;
    for (size_t j = 0; j < nn; j++)
        for (size_t o = 0; o < m->gp->node[j]->n_output; o++) {
            int *v = tsr_ox_names_put(&src, m->gp->node[j]->output[o], &added);
            if (added)
                *v = (int)j;
        }
    int rc = 0;
    for (size_t i = 0, k0 = 0; i < nn && !rc; k0 += m->gp->node[i]->n_input, i++) {
        const Onnx__NodeProto *n = m->gp->node[i];
        for (size_t k = 0; k < n->n_input && !rc; k++) {
            const char *nm = n->input[k];
            const int *v = nm[0] ? tsr_ox_names_get(&src, nm) : NULL;
            int found = !nm[0] || (v && *v < 0), p = v && *v >= 0 ? *v : -1;
            if (!found && p < 0)
                rc = NERR(m, (int)i, "input \"%s\" is neither a graph input, an initializer nor a node output "
                          "(a missing initializer?)", TSR_SAFE(nm));
            prod[k0 + k] = p;
        }
    }
    size_t placed = 0;
    int progress = 1;
    /* Constants first: a folded pattern reads the scales of nodes after it */
    for (size_t i = 0; i < nn && !rc; i++)
        if (m->gp->node[i]->n_input == 0) {
            done[i] = 1;
            m->order[placed++] = (int)i;
        }
    while (!rc && placed < nn && progress) {
        progress = 0;
        for (size_t i = 0, k0 = 0; i < nn; k0 += m->gp->node[i]->n_input, i++) {
            if (done[i])
                continue;
            int ready = 1;
            for (size_t k = 0; k < m->gp->node[i]->n_input && ready; k++)
                ready = prod[k0 + k] < 0 || done[prod[k0 + k]];
            if (ready) {
                done[i] = 1;
                m->order[placed++] = (int)i;
                progress = 1;
            }
        }
    }
    if (!rc && placed < nn) {
        for (size_t i = 0; i < nn; i++)
            if (!done[i]) {
                rc = NERR(m, (int)i, "the graph has a cycle through this node");
                break;
            }
    }
    free(done);
    free(prod);
    tsr_ox_names_free(&src);
    return rc;
}

static int lower_node(tsr_onnx_t *m, int ni)
{
    const Onnx__NodeProto *n = m->gp->node[ni];
    const char *dom = n->domain && n->domain[0] ? n->domain : "";
    if (m->placed[ni])
        return 0; /* folded into an earlier operator */
    for (size_t k = 0; k < n->n_input; k++)
        if (n->input[k][0] && tsr_ox_find_val(m, n->input[k]) < 0)
            return NERR(m, ni, "input \"%s\" is neither a graph input, an initializer nor a node output",
                        TSR_SAFE(n->input[k]));
    if (strcmp(dom, "") && strcmp(dom, "ai.onnx") && strcmp(dom, "com.microsoft"))
        return NERR(m, ni, "domain \"%s\" is not supported", TSR_SAFE(dom));
    const ox_op_t *other;
    const ox_op_t *op = tsr_ox_op_find(m, ni, &other);
    if (op)
        return op->fn(m, ni, op->arg);
    const char *dname = dom[0] && strcmp(dom, "ai.onnx") ? dom : "ai.onnx";
    const long long v = (long long)tsr_ox_node_opset(m, ni);
    if (!other)
        return NERR(m, ni, "op type not supported on the device or the host (domain %s, opset %lld)", dname, v);
    if (other->until)
        return NERR(m, ni, "domain %s opset %lld: the importer implements this op for opsets %d to %d only", dname, v,
                    other->since, other->until);
    return NERR(m, ni, "domain %s opset %lld: the importer implements this op from opset %d on", dname, v,
                other->since);
}

int tsr_ox_lower_graph(tsr_onnx_t *m)
{
    const Onnx__GraphProto *g = m->gp;
    m->placed = calloc(g->n_node + 1, sizeof(int));
    m->node_lop = malloc(sizeof(int) * (g->n_node + 1));
    if (!m->placed || !m->node_lop)
        return tsr_err(TSR_ENOMEM, "out of memory");
    for (size_t i = 0; i < g->n_node; i++)
        m->node_lop[i] = -1;
    int rc;
    if ((rc = topo_sort(m)) || (rc = tsr_ox_qdq_select(m)))
        return rc;
    for (size_t i = 0; i < g->n_node; i++)
        if ((rc = lower_node(m, m->order[i])))
            return rc < 0 ? rc : TSR_EINVAL;
    m->out_val = tsr_ox_find_val(m, g->output[0]->name);
    if (m->out_val < 0)
        return tsr_err(TSR_EINVAL, "%s: graph output \"%s\" is produced by no node", m->path,
                       TSR_SAFE(g->output[0]->name));
    if ((rc = tsr_ox_need_real(m, m->order[g->n_node ? g->n_node - 1 : 0], m->out_val)))
        return rc;
    if (m->vals[m->out_val].cdata)
        return tsr_err(TSR_EINVAL, "%s: the graph output is a constant", m->path);
    return 0;
}
