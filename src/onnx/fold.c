/* Load-time folding of shape computations.
 *
 * PyTorch exports x.view(x.size(0), -1) as
 *
 *     Shape(x) -> Gather(0) -> Unsqueeze -> Concat(.., [-1]) -> Reshape(x, shape)
 *
 * Such a chain computes from *shapes* and constants only, never from the data. We fold it
 * into a constant shape so that the graph flare runs (and exports) holds only real layers.
 *
 * The batch size is free, so the chain has no single value. The trick: run the model on zeros
 * for two batch sizes (3 and 5) and compare. An entry equal in both runs is a constant. An
 * entry that is 3 in one run and 5 in the other, at position 0 of a Reshape's shape whose
 * data input has the batch as its dim 0 in both runs, becomes 0 — ONNX Reshape's "copy this
 * dimension from the input". A value that depends on the batch otherwise, and is read only
 * as a shape the reading op takes when it is planned — Expand's, ConstantOfShape's and
 * Reshape's shape, Tile's repeats, Range's bounds, Slice's starts / ends / axes / steps,
 * Resize's sizes, Split's sizes, Pad's pads — stays computed: the static nodes it needs are
 * kept and run, and the op follows the batch (ViT's class token `token.expand(n, -1, -1)`,
 * attention's `q.view(L, n * heads, d)`). A batch-dependent value read as data cannot be a
 * constant, and the load fails saying so.
 *
 * "Static" values are constants and outputs of static nodes; a node is static when it is a
 * Shape (its output depends only on its input's shape) or all its inputs are static. The
 * frontier is the static values computed from some Shape and read by non-static nodes: those
 * become constants, in place (same index, same name), and the static nodes nothing needs any
 * more are deleted. Purely constant sub-graphs are left alone: they cost nothing at run time,
 * and folding them would need a run the model cannot always have (free non-batch dims).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"

#define FOLD_B1 3
#define FOLD_B2 5

typedef struct folder {
    fl_model *m;
    const char *file;
    fl_err *e;
    uint8_t *node_static; /* per node */
    uint8_t *val_static;  /* per value */
    uint8_t *val_shape;   /* per value: static and computed from some Shape */
    uint8_t *frontier;    /* per value */
    uint8_t *zero0;       /* per value: settled as a Reshape shape whose entry 0 becomes 0 */
    int kept;             /* frontier values settled as "stays computed" */
    uint8_t *live;        /* per node: still needed after folding */
    uint8_t *need;        /* per value: read by a live node or a graph output */
    int *dtype;           /* per value: ONNX element type of static values */
    int64_t *dim0[2];     /* per node: dim 0 of input 0 in each run (Reshape checks) */
    fl_tensor *first;     /* per value: frontier values of the first run */
} folder;

static int op_is(const fl_node *n, const char *op) { return strcmp(n->op->name, op) == 0; }

static int is_graph_output(const fl_model *m, int v) {
    for (int i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == v) return 1;
    return 0;
}

static void mark_static(folder *F) {
    fl_model *m = F->m;
    for (int v = 0; v < m->n_values; v++) {
        F->val_static[v] = m->values[v].kind == FL_VAL_CONST;
        F->dtype[v] = m->values[v].onnx_dtype;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        const fl_node *n = &m->nodes[i];
        int s = 1, from_shape = 0, dt = FL_ONNX_FLOAT, first = 1;
        for (int k = 0; k < n->n_in && s; k++) {
            if (n->in[k] < 0) continue;
            s = F->val_static[n->in[k]];
            from_shape |= F->val_shape[n->in[k]];
            if (first) dt = F->dtype[n->in[k]], first = 0;
        }
        if (op_is(n, "Shape")) s = 1, from_shape = 1, dt = FL_ONNX_INT64;
        if (op_is(n, "Cast")) dt = (int)fl_node_attr_int(n, "to", FL_ONNX_FLOAT);
        F->node_static[i] = (uint8_t)s;
        for (int k = 0; s && k < n->n_out; k++) {
            F->val_static[n->out[k]] = 1;
            F->val_shape[n->out[k]] = (uint8_t)from_shape;
            F->dtype[n->out[k]] = dt;
        }
    }
}

/* Frontier: single outputs of static nodes, computed from a Shape, read by a non-static node.
 * A static value that is also a graph output stays computed (it is then needed at run time
 * anyway), and so do purely constant sub-graphs: folding them would need a run of the model,
 * which a model with free non-batch dimensions cannot have, for no gain worth a failure. */
static int find_frontier(folder *F) {
    fl_model *m = F->m;
    int count = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        const fl_node *n = &m->nodes[i];
        if (F->node_static[i]) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || !F->val_shape[v] || m->values[v].kind != FL_VAL_ACT) continue;
            int p = m->values[v].producer;
            if (p < 0 || m->nodes[p].n_out != 1 || is_graph_output(m, v) || F->frontier[v]) continue;
            F->frontier[v] = 1;
            count++;
        }
    }
    return count;
}

/* Reverse pass: a static node stays when one of its outputs is still read; frontier values
 * are constants after folding, so they need nobody. */
static void mark_live(folder *F) {
    fl_model *m = F->m;
    uint8_t *need = F->need;
    for (int i = 0; i < m->n_outputs; i++) need[m->outputs[i]] = 1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const fl_node *n = &m->nodes[i];
        int live = !F->node_static[i];
        for (int k = 0; k < n->n_out && !live; k++) live = need[n->out[k]];
        F->live[i] = (uint8_t)live;
        for (int k = 0; live && k < n->n_in; k++)
            if (n->in[k] >= 0 && !F->frontier[n->in[k]]) need[n->in[k]] = 1;
    }
}

/* Run the model on zeros with batch b (free dim 0 of every input); other free dims cannot be
 * guessed. */
static fl_status run_batch(folder *F, int64_t b, int which) {
    fl_model *m = F->m;
    fl_tensor xs[8];
    memset(xs, 0, sizeof xs);
    fl_status st = FL_OK;
    for (int i = 0; i < m->n_inputs && st == FL_OK; i++) {
        const fl_value *v = &m->values[m->inputs[i]];
        int64_t shape[FL_MAX_DIMS], size = 1;
        if (v->decl_ndim == 0)
            st = fl_fail(F->e, FL_ERR_UNSUPPORTED,
                         "%s: cannot fold shape computation: input '%s' has no declared shape",
                         F->file, v->name);
        for (int d = 0; d < v->decl_ndim && st == FL_OK; d++) {
            shape[d] = v->decl_shape[d] > 0 ? v->decl_shape[d] : d == 0 ? b : -1;
            if (shape[d] < 0)
                st = fl_fail(F->e, FL_ERR_UNSUPPORTED,
                             "%s: cannot fold shape computation: input '%s' has a free dimension "
                             "%d (only the batch dimension 0 may be free)", F->file, v->name, d);
            else if ((size *= shape[d]) > ((int64_t)1 << 24))
                st = fl_fail(F->e, FL_ERR_UNSUPPORTED,
                             "%s: cannot fold shape computation: input '%s' is too large",
                             F->file, v->name);
        }
        if (st == FL_OK && fl_tensor_alloc(&xs[i], v->decl_ndim, shape) != FL_OK)
            st = fl_fail(F->e, FL_ERR_NOMEM, "%s: out of memory", F->file);
    }
    if (st == FL_OK) {
        st = fl_model_forward_multi(m, m->n_inputs, xs, F->e);
        if (st != FL_OK) {
            char msg[sizeof F->e->msg];
            memcpy(msg, F->e->msg, sizeof msg);
            fl_fail(F->e, st, "%s: cannot fold shape computation (running with batch %lld): %s",
                    F->file, (long long)b, msg);
        }
    }
    for (int i = 0; i < m->n_inputs; i++) fl_tensor_free(&xs[i]);
    for (int i = 0; st == FL_OK && i < m->n_nodes; i++) {
        const fl_tensor *x = fl_in(m, &m->nodes[i], 0);
        F->dim0[which][i] = x && x->ndim > 0 ? x->shape[0] : -1;
    }
    return st;
}

/* Does the non-static node n read v only as a shape-like input it reads when planned (so a
 * value computed per batch is fine)? */
static int reads_as_dynamic_shape(const fl_node *n, int v) {
    static const struct { const char *op; unsigned mask; } readers[] = {
        {"Expand", 2}, {"ConstantOfShape", 1}, {"Tile", 2}, {"Range", 7}, {"Reshape", 2},
        {"Slice", 30}, {"Resize", 8}, {"Split", 2}, {"Pad", 2},
    };
    for (size_t r = 0; r < sizeof readers / sizeof readers[0]; r++) {
        if (!op_is(n, readers[r].op)) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == v && !(k < 32 && (readers[r].mask >> k & 1))) return 0;
        return 1;
    }
    return 0;
}

/* Decide the constant for frontier value v from both runs (second run's tensor in place). */
static fl_status settle(folder *F, int v) {
    fl_model *m = F->m;
    const fl_tensor *a = &F->first[v];
    fl_tensor *b = &m->values[v].t;
    int same_shape = fl_tensor_same_shape(a, b), differ = !same_shape, only0 = same_shape;
    for (int64_t j = 0; same_shape && j < a->size; j++)
        if (a->data[j] != b->data[j]) differ = 1, only0 &= j == 0;
    if (!differ) return FL_OK;
    int ok = only0 && a->ndim == 1 && a->data[0] == FOLD_B1 && b->data[0] == FOLD_B2;
    int dynamic = 1; /* every non-static reader takes it as a shape it re-reads per plan */
    const fl_node *bad = NULL;
    for (int i = 0; i < m->n_nodes && (ok || dynamic); i++) {
        const fl_node *n = &m->nodes[i];
        int reads = 0;
        for (int k = 0; k < n->n_in; k++) reads |= n->in[k] == v;
        if (!reads || F->node_static[i]) continue;
        ok = ok && op_is(n, "Reshape") && n->n_in >= 2 && n->in[1] == v && n->in[0] != v &&
             fl_node_attr_int(n, "allowzero", 0) == 0 && F->dim0[0][i] == FOLD_B1 &&
             F->dim0[1][i] == FOLD_B2;
        dynamic = dynamic && reads_as_dynamic_shape(n, v);
        if (!dynamic && !bad) bad = n;
    }
    if (ok) { /* entry 0 becomes 0 (Reshape: copy dim 0) once no kept chain reads it */
        F->zero0[v] = 1;
        return FL_OK;
    }
    if (dynamic) {
        F->frontier[v] = 0;
        F->kept++;
        return FL_OK;
    }
    return fl_fail(F->e, FL_ERR_UNSUPPORTED,
                   "%s: cannot fold shape computation '%s'%s%s%s: it depends on the batch size "
                   "and is read as data, not as a shape", F->file, m->values[v].name,
                   bad ? " (read by node '" : "", bad ? bad->name : "", bad ? "')" : "");
}

/* ---- deleting nodes and values ------------------------------------------------------------------ */
static void release_node(fl_node *n) {
    if (n->op && n->op->free_state) n->op->free_state(n);
    else fl_free(n->state);
    for (int a = 0; a < n->n_attr; a++) {
        free(n->attr[a].name);
        free(n->attr[a].ints);
        free(n->attr[a].floats);
        free(n->attr[a].s);
        fl_tensor_free(&n->attr[a].t);
    }
    free(n->attr);
    free(n->in);
    free(n->out);
    free(n->name);
}

/* Drop the dead static nodes, then every value nobody reads or writes any more that came from
 * them (their outputs and the constants only they read), renumbering the rest. */
static fl_status prune(folder *F) {
    fl_model *m = F->m;
    int *remap = malloc(sizeof(int) * ((size_t)m->n_values + 1));
    uint8_t *used = calloc((size_t)m->n_values + 1, 1), *orphan = calloc((size_t)m->n_values + 1, 1);
    if (!remap || !used || !orphan) {
        free(remap), free(used), free(orphan);
        return fl_fail(F->e, FL_ERR_NOMEM, "%s: out of memory folding shapes", F->file);
    }
    int k = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        fl_node *n = &m->nodes[i];
        if (F->live[i]) {
            for (int j = 0; j < n->n_in; j++)
                if (n->in[j] >= 0) used[n->in[j]] = 1;
            for (int j = 0; j < n->n_out; j++) used[n->out[j]] = 1;
            m->nodes[k++] = *n;
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) orphan[n->in[j]] = 1;
        for (int j = 0; j < n->n_out; j++) orphan[n->out[j]] = 1;
        release_node(n);
    }
    m->n_nodes = k;
    for (int i = 0; i < m->n_inputs; i++) used[m->inputs[i]] = 1;
    for (int i = 0; i < m->n_outputs; i++) used[m->outputs[i]] = 1;
    k = 0;
    for (int v = 0; v < m->n_values; v++) {
        fl_value *x = &m->values[v];
        int drop = orphan[v] && !used[v] && x->kind != FL_VAL_PARAM && x->kind != FL_VAL_INPUT;
        if (drop) {
            free(x->name);
            fl_tensor_free(&x->t);
            fl_tensor_free(&x->g);
            remap[v] = -1;
        } else {
            remap[v] = k;
            m->values[k++] = *x;
        }
    }
    m->n_values = k;
    for (int i = 0; i < m->n_nodes; i++) {
        fl_node *n = &m->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0) n->in[j] = remap[n->in[j]];
        for (int j = 0; j < n->n_out; j++) n->out[j] = remap[n->out[j]];
    }
    for (int i = 0; i < m->n_inputs; i++) m->inputs[i] = remap[m->inputs[i]];
    for (int i = 0; i < m->n_outputs; i++) m->outputs[i] = remap[m->outputs[i]];
    free(remap), free(used), free(orphan);
    return fl_model_finish(m, F->e);
}

fl_status fl_onnx_fold_shapes(fl_model *m, const char *file, fl_err *e) {
    size_t nv = (size_t)m->n_values + 1, nn = (size_t)m->n_nodes + 1;
    folder F = {.m = m, .file = file, .e = e};
    F.node_static = calloc(nn, 1);
    F.live = calloc(nn, 1);
    F.val_static = calloc(nv, 1);
    F.val_shape = calloc(nv, 1);
    F.frontier = calloc(nv, 1);
    F.zero0 = calloc(nv, 1);
    F.need = calloc(nv, 1);
    F.dtype = calloc(nv, sizeof(int));
    F.dim0[0] = calloc(nn, sizeof(int64_t));
    F.dim0[1] = calloc(nn, sizeof(int64_t));
    F.first = calloc(nv, sizeof(fl_tensor));
    fl_status st = FL_OK;
    if (!F.node_static || !F.live || !F.val_static || !F.val_shape || !F.frontier || !F.zero0 || !F.need ||
        !F.dtype || !F.dim0[0] || !F.dim0[1] || !F.first)
        st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory folding shapes", file);
    if (st == FL_OK) mark_static(&F);
    if (st == FL_OK && find_frontier(&F) > 0) {
        mark_live(&F);
        st = run_batch(&F, FOLD_B1, 0);
        for (int v = 0; st == FL_OK && v < m->n_values; v++)
            if (F.frontier[v] && fl_tensor_copy(&F.first[v], &m->values[v].t) != FL_OK)
                st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory folding shapes", file);
        if (st == FL_OK) st = run_batch(&F, FOLD_B2, 1);
        for (int v = 0; st == FL_OK && v < m->n_values; v++)
            if (F.frontier[v]) st = settle(&F, v);
        /* the kept values' static producers are needed again; a Reshape shape that a live
         * static node reads must keep its batch entry, so it is kept too (Reshape re-reads it) */
        for (int changed = 1; st == FL_OK && changed;) {
            memset(F.need, 0, nv);
            mark_live(&F);
            changed = 0;
            for (int i = 0; i < m->n_nodes; i++)
                for (int k = 0; F.live[i] && F.node_static[i] && k < m->nodes[i].n_in; k++) {
                    int u = m->nodes[i].in[k];
                    if (u >= 0 && F.zero0[u]) F.zero0[u] = F.frontier[u] = 0, changed = 1;
                }
        }
        for (int v = 0; st == FL_OK && v < m->n_values; v++)
            if (F.zero0[v]) m->values[v].t.data[0] = 0;
        for (int v = 0; st == FL_OK && v < m->n_values; v++) {
            if (!F.frontier[v]) continue;
            fl_value *x = &m->values[v];
            x->kind = FL_VAL_CONST;
            x->producer = -1;
            x->onnx_dtype = F.dtype[v];
            fl_tensor_free(&x->g);
        }
        if (st == FL_OK) st = prune(&F);
    }
    for (size_t v = 0; F.first && v < nv; v++) fl_tensor_free(&F.first[v]);
    free(F.node_static), free(F.live), free(F.val_static), free(F.val_shape), free(F.frontier);
    free(F.need), free(F.dtype), free(F.zero0);
    free(F.dim0[0]), free(F.dim0[1]), free(F.first);
    return st;
}
