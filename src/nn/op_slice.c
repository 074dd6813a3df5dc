/* Slice and Split: outputs that are boxes (with a stride, for Slice) of the input. Both are
 * index maps (imap.h): each output dim reads input positions start, start+step, ...; backward
 * scatters the gradient back into those positions.
 *
 * Slice: starts, ends and axes are attributes before opset 10; from 10 they are inputs, with
 * an optional steps input. Split: the sizes are the attribute `split` before opset 13 and
 * the optional input 1 from 13; opset 18 adds `num_outputs` (chunks of ceil(dim / n), the
 * last one smaller). Without sizes the dim is split into equal parts, one per output. Both
 * spellings of each are accepted whatever the opset, but not mixed. */
#include <string.h>

#include "flare/model.h"
#include "nn/imap.h"
#include "nn/ops.h"

enum { MAX_SPLIT = 64 };

typedef struct slice_state {
    int attr_form;                  /* Slice: starts/ends/axes are attributes */
    int n_starts, n_ends, n_axes;   /* attribute form */
    int64_t starts[FL_MAX_DIMS], ends[FL_MAX_DIMS], axes[FL_MAX_DIMS];
    int64_t axis;                   /* Split */
    int n_split;                    /* Split: attribute `split` entries; 0 = none */
    int64_t split[MAX_SPLIT];
    int64_t num_outputs;            /* Split (opset 18); 0 = not given */
    fl_imap im[MAX_SPLIT];          /* one per output */
} slice_state;

static void slice_free(fl_node *n) {
    slice_state *s = n->state;
    for (int i = 0; s && i < n->n_out && i < MAX_SPLIT; i++) fl_imap_free(&s->im[i]);
    fl_free(s);
}

/* Copy INTS attribute `name` (at most max entries) into out; *count = -1 when absent. */
static fl_status ints_attr(const fl_node *n, const char *name, int max, int64_t *out, int *count,
                           fl_err *e) {
    const fl_attr *a = fl_node_attr(n, name);
    *count = -1;
    if (!a) return FL_OK;
    if (a->type != FL_ATTR_INTS || a->n > max)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (%s): attribute '%s' must be at most %d ints",
                       n->name, n->op->name, name, max);
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)a->n);
    *count = a->n;
    return FL_OK;
}

/* Plan output k of node n as the box that starts at start[d] with step step[d] and len[d]
 * elements in each dim of x. */
static fl_status plan_box(fl_model *m, fl_node *n, int k, const int64_t *start,
                          const int64_t *step, const int64_t *len, fl_err *e) {
    slice_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0);
    fl_status st = fl_imap_plan(&s->im[k], x->ndim, len, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < x->ndim; d++)
        for (int64_t o = 0; o < len[d]; o++) s->im[k].map[d][o] = start[d] + o * step[d];
    fl_imap_finish(&s->im[k], x->shape);
    fl_node_set_out_shape(m, n, k, x->ndim, len);
    return FL_OK;
}

static void box_forward(fl_model *m, fl_node *n) {
    slice_state *s = n->state;
    const float *x = fl_in(m, n, 0)->data;
    for (int k = 0; k < n->n_out; k++) fl_imap_forward(&s->im[k], x, fl_out(m, n, k)->data, 0);
}

static void box_backward(fl_model *m, fl_node *n) {
    slice_state *s = n->state;
    fl_tensor *dx = fl_gin(m, n, 0);
    if (!dx) return;
    for (int k = 0; k < n->n_out; k++) fl_imap_backward(&s->im[k], fl_gout(m, n, k)->data, dx->data);
}

static fl_status alloc_state(fl_model *m, fl_node *n, fl_err *e) {
    if (!(n->state = fl_alloc(sizeof(slice_state))))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n->n_out; k++)
        m->values[n->out[k]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

/* ---- Slice ------------------------------------------------------------------------------------ */
static fl_status slice_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"starts", "ends", "axes", NULL};
    fl_status st = fl_node_check_arity(n, 1, 5, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st == FL_OK) st = alloc_state(m, n, e);
    if (st != FL_OK) return st;
    slice_state *s = n->state;
    st = ints_attr(n, "starts", FL_MAX_DIMS, s->starts, &s->n_starts, e);
    if (st == FL_OK) st = ints_attr(n, "ends", FL_MAX_DIMS, s->ends, &s->n_ends, e);
    if (st == FL_OK) st = ints_attr(n, "axes", FL_MAX_DIMS, s->axes, &s->n_axes, e);
    if (st != FL_OK) return st;
    s->attr_form = s->n_starts >= 0 || s->n_ends >= 0 || s->n_axes >= 0;
    if (s->attr_form && n->n_in > 1)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Slice): starts/ends given both as attributes "
                       "and inputs", n->name);
    if (s->attr_form && (s->n_starts < 0 || s->n_ends < 0))
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Slice): attribute '%s' is missing", n->name,
                       s->n_starts < 0 ? "starts" : "ends");
    if (!s->attr_form && (n->n_in < 3 || n->in[1] < 0 || n->in[2] < 0))
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Slice): no starts and ends (%s)", n->name,
                       m->opset >= 10 ? "inputs 1 and 2 are required" : "attributes are missing");
    return FL_OK;
}

/* starts, ends, axes, steps of this node; axes default to 0..n-1, steps to 1. */
static fl_status slice_params(fl_model *m, fl_node *n, int r, int64_t *starts, int64_t *ends,
                              int64_t *axes, int64_t *steps, int *count, fl_err *e) {
    slice_state *s = n->state;
    int ns = s->n_starts, ne = s->n_ends, na = s->n_axes, nst = -1;
    fl_status st = FL_OK;
    if (s->attr_form) {
        memcpy(starts, s->starts, sizeof s->starts);
        memcpy(ends, s->ends, sizeof s->ends);
        memcpy(axes, s->axes, sizeof s->axes);
    } else {
        const fl_tensor *ta = fl_in(m, n, 3), *tst = fl_in(m, n, 4);
        na = -1;
        st = fl_node_read_index_ints(n, fl_in(m, n, 1), "starts", FL_MAX_DIMS, starts, &ns, e);
        if (st == FL_OK) st = fl_node_read_index_ints(n, fl_in(m, n, 2), "ends", FL_MAX_DIMS, ends, &ne, e);
        if (st == FL_OK && ta) st = fl_node_read_ints(n, ta, "axes", FL_MAX_DIMS, axes, &na, e);
        if (st == FL_OK && tst) st = fl_node_read_index_ints(n, tst, "steps", FL_MAX_DIMS, steps, &nst, e);
        if (st != FL_OK) return st;
    }
    if (na < 0)
        for (na = 0; na < ns && na < FL_MAX_DIMS; na++) axes[na] = na;
    if (nst < 0)
        for (nst = 0; nst < ns; nst++) steps[nst] = 1;
    if (ne != ns || na != ns || nst != ns)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Slice): %d starts, %d ends, %d axes, %d steps "
                       "(all must be equal)", n->name, ns, ne, na, nst);
    uint8_t seen[FL_MAX_DIMS];
    *count = ns;
    return fl_node_mark_axes(n, axes, ns, r, seen, e);
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static fl_status slice_shape(fl_model *m, fl_node *n, fl_err *e) {
    const fl_tensor *x = fl_in(m, n, 0);
    int64_t starts[FL_MAX_DIMS], ends[FL_MAX_DIMS], axes[FL_MAX_DIMS], steps[FL_MAX_DIMS];
    int64_t start[FL_MAX_DIMS], step[FL_MAX_DIMS], len[FL_MAX_DIMS];
    int count;
    fl_status st = slice_params(m, n, x->ndim, starts, ends, axes, steps, &count, e);
    if (st != FL_OK) return st;
    for (int d = 0; d < x->ndim; d++) start[d] = 0, step[d] = 1, len[d] = x->shape[d];
    for (int k = 0; k < count; k++) {
        int d = fl_norm_axis(axes[k], x->ndim);
        int64_t dim = x->shape[d], a = starts[k], b = ends[k], t = steps[k];
        if (t == 0)
            return fl_fail(e, FL_ERR_ARG, "node '%s' (Slice): step 0 on axis %lld", n->name,
                           (long long)axes[k]);
        if (a < 0) a += dim;
        if (b < 0) b += dim;
        /* ONNX: clamp to [0, dim] going forward, to [-1, dim - 1] going backward */
        a = t > 0 ? clamp(a, 0, dim) : clamp(a, 0, dim - 1);
        b = t > 0 ? clamp(b, 0, dim) : clamp(b, -1, dim - 1);
        int64_t span = t > 0 ? b - a : a - b, at = t > 0 ? t : -t;
        start[d] = a;
        step[d] = t;
        len[d] = span > 0 ? (span + at - 1) / at : 0;
    }
    return plan_box(m, n, 0, start, step, len, e);
}

static const fl_op op_slice = {"Slice", slice_init, slice_shape, box_forward, box_backward,
                               slice_free};

/* ---- Split ------------------------------------------------------------------------------------- */
static fl_status split_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"axis", "split", "num_outputs", NULL};
    fl_status st = fl_node_check_arity(n, 1, 2, 1, MAX_SPLIT, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st == FL_OK) st = alloc_state(m, n, e);
    if (st != FL_OK) return st;
    slice_state *s = n->state;
    s->axis = fl_node_attr_int(n, "axis", 0);
    s->num_outputs = fl_node_attr_int(n, "num_outputs", 0);
    st = ints_attr(n, "split", MAX_SPLIT, s->split, &s->n_split, e);
    if (st != FL_OK) return st;
    int has_input = n->n_in > 1 && n->in[1] >= 0;
    if (s->n_split >= 0 && has_input)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Split): split given both as attribute and "
                       "input", n->name);
    if (s->num_outputs && (s->n_split >= 0 || has_input))
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Split): both split and num_outputs given",
                       n->name);
    if (s->num_outputs && s->num_outputs != n->n_out)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Split): num_outputs is %lld but the node has "
                       "%d outputs", n->name, (long long)s->num_outputs, n->n_out);
    return FL_OK;
}

static fl_status split_shape(fl_model *m, fl_node *n, fl_err *e) {
    slice_state *s = n->state;
    const fl_tensor *x = fl_in(m, n, 0), *ts = fl_in(m, n, 1);
    int a = fl_norm_axis(s->axis, x->ndim), ns = s->n_split;
    int64_t sizes[MAX_SPLIT], total = 0, dim;
    char b[128];
    if (a < 0)
        return fl_fail(e, FL_ERR_ARG, "node '%s' (Split): axis %lld out of range for rank %d",
                       n->name, (long long)s->axis, x->ndim);
    dim = x->shape[a];
    fl_status st = FL_OK;
    if (ns >= 0) memcpy(sizes, s->split, sizeof sizes);
    else if (ts) st = fl_node_read_ints(n, ts, "split", MAX_SPLIT, sizes, &ns, e);
    if (st != FL_OK) return st;
    if (ns < 0) { /* no sizes: equal parts (num_outputs: the last may be smaller) */
        int64_t chunk = (dim + n->n_out - 1) / n->n_out;
        if (!s->num_outputs && dim % n->n_out != 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Split): dim %d of %s does not split into "
                           "%d equal parts", n->name, a, fl_shape_str(x, b, sizeof b), n->n_out);
        for (int k = 0; k < n->n_out; k++) {
            sizes[k] = dim - k * chunk < chunk ? dim - k * chunk : chunk;
            if (sizes[k] < 0) sizes[k] = 0;
        }
        ns = n->n_out;
    }
    if (ns != n->n_out)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Split): %d sizes for %d outputs", n->name, ns,
                       n->n_out);
    for (int k = 0; k < ns; k++) {
        if (sizes[k] < 0)
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Split): negative size %lld", n->name,
                           (long long)sizes[k]);
        total += sizes[k];
    }
    if (total != dim)
        return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Split): sizes add up to %lld, dim %d of %s is "
                       "%lld", n->name, (long long)total, a, fl_shape_str(x, b, sizeof b),
                       (long long)dim);
    int64_t start[FL_MAX_DIMS] = {0}, step[FL_MAX_DIMS], len[FL_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) step[d] = 1, len[d] = x->shape[d];
    for (int k = 0; k < ns; k++) {
        len[a] = sizes[k];
        if ((st = plan_box(m, n, k, start, step, len, e)) != FL_OK) return st;
        start[a] += sizes[k];
    }
    return FL_OK;
}

static const fl_op op_split = {"Split", split_init, split_shape, box_forward, box_backward,
                               slice_free};

const fl_op *const fl_ops_slice[] = {&op_slice, &op_split, NULL};
