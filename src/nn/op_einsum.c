/* Einsum: numpy's einsum for any equation ("bhqd,bhkd->bhqk", "ii->i", "...ij,...jk", "i,i").
 *
 * Every distinct label is one loop of an odometer; each operand and the output advance by
 * their stride for that label (the sum of the strides of the dims carrying it, so "ii" walks
 * the diagonal; 0 where the label is absent or the dim is broadcast), and
 *
 *     y[out labels] += prod_k x_k[its labels]       over every label combination.
 *
 * Backward is the same walk: dx_k += dy * prod_{j != k} x_j. The ellipsis stands for the
 * same leading dims in every operand, numpy-broadcast; without "->" the output is the
 * ellipsis then the labels used once, in alphabetical order. This generic loop costs the
 * product of all label sizes in scalar steps: right for the small contractions exported
 * models use Einsum for, slower than MatMul for large ones. */
#include <ctype.h>
#include <string.h>

#include "flare/model.h"
#include "nn/ops.h"

enum { MAX_OPS = 8, N_LETTERS = 52, MAX_LABELS = N_LETTERS + FL_MAX_DIMS, MAX_LOOP = 16,
       ELL = -1 };

typedef struct ein_state {
    int n_ops;
    int n_term[MAX_OPS + 1];               /* labels per operand (and the output, last) */
    int term[MAX_OPS + 1][FL_MAX_DIMS + 1]; /* label ids; ELL for the ellipsis */
    int ell[MAX_OPS + 1];                  /* the term has an ellipsis */
    int explicit_out;
    /* plan */
    int n_loop;
    int64_t size[MAX_LOOP];
    int64_t stride[MAX_OPS + 1][MAX_LOOP]; /* per operand and output, per loop */
} ein_state;

static int label_id(char c) {
    return c >= 'a' && c <= 'z' ? c - 'a' : c >= 'A' && c <= 'Z' ? 26 + c - 'A' : -1;
}

/* Parse one term ("bij", "...ij") into s->term[t]. */
static fl_status parse_term(const fl_node *n, ein_state *s, int t, const char *p, const char *end,
                            fl_err *e) {
    s->n_term[t] = 0;
    while (p < end) {
        int id;
        if (end - p >= 3 && p[0] == '.' && p[1] == '.' && p[2] == '.') {
            if (s->ell[t]) break;
            s->ell[t] = 1;
            id = ELL;
            p += 3;
        } else if ((id = label_id(*p)) >= 0) {
            p++;
        } else {
            break;
        }
        if (s->n_term[t] == FL_MAX_DIMS + 1) break;
        s->term[t][s->n_term[t]++] = id;
    }
    if (p < end)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Einsum): cannot read the equation at '%.*s'",
                       n->name, (int)(end - p), p);
    return FL_OK;
}

static fl_status ein_init(fl_model *m, fl_node *n, fl_err *e) {
    static const char *const known[] = {"equation", NULL};
    fl_status st = fl_node_check_arity(n, 1, MAX_OPS, 1, 1, e);
    if (st == FL_OK) st = fl_node_check_attrs(n, known, e);
    if (st != FL_OK) return st;
    const fl_attr *a = fl_node_attr(n, "equation");
    if (!a || a->type != FL_ATTR_STRING || !a->s)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Einsum): the string attribute equation is "
                       "missing", n->name);
    ein_state *s = fl_alloc(sizeof *s);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    n->state = s;
    char eq[256];
    size_t k = 0;
    for (const char *p = a->s; *p && k + 1 < sizeof eq; p++)
        if (!isspace((unsigned char)*p)) eq[k++] = *p;
    eq[k] = 0;
    const char *arrow = strstr(eq, "->"), *lhs_end = arrow ? arrow : eq + k, *p = eq;
    s->n_ops = 0;
    while (s->n_ops < MAX_OPS) {
        const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
        const char *end = comma ? comma : lhs_end;
        if ((st = parse_term(n, s, s->n_ops++, p, end, e)) != FL_OK) return st;
        if (!comma) break;
        p = comma + 1;
    }
    if (s->n_ops != n->n_in)
        return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Einsum): equation '%s' has %d operands, the "
                       "node %d inputs", n->name, a->s, s->n_ops, n->n_in);
    int out = s->n_ops, count[N_LETTERS] = {0}, any_ell = 0;
    for (int t = 0; t < s->n_ops; t++) {
        any_ell |= s->ell[t];
        for (int j = 0; j < s->n_term[t]; j++)
            if (s->term[t][j] >= 0) count[s->term[t][j]]++;
    }
    s->explicit_out = arrow != NULL;
    if (arrow) {
        if ((st = parse_term(n, s, out, arrow + 2, eq + k, e)) != FL_OK) return st;
        for (int j = 0; j < s->n_term[out]; j++) {
            int id = s->term[out][j];
            int twice = 0;
            for (int i = 0; i < j; i++) twice |= s->term[out][i] == id;
            if (twice || (id >= 0 && count[id] == 0) || (id == ELL && !any_ell))
                return fl_fail(e, FL_ERR_FORMAT, "node '%s' (Einsum): output label %d of '%s' is "
                               "repeated or not in any input", n->name, j, a->s);
        }
    } else { /* implicit: the ellipsis, then the labels used once, alphabetically */
        s->n_term[out] = 0;
        if (any_ell) s->term[out][s->n_term[out]++] = ELL, s->ell[out] = 1;
        for (int id = 0; id < N_LETTERS; id++)
            if (count[id] == 1 && s->n_term[out] < FL_MAX_DIMS) s->term[out][s->n_term[out]++] = id;
    }
    m->values[n->out[0]].onnx_dtype = m->values[n->in[0]].onnx_dtype;
    return FL_OK;
}

static fl_status ein_shape(fl_model *m, fl_node *n, fl_err *e) {
    ein_state *s = n->state;
    int64_t lsize[MAX_LABELS];
    int used[MAX_LABELS], n_ell = 0;
    for (int l = 0; l < MAX_LABELS; l++) lsize[l] = -1, used[l] = -1;
    char a[128];
    /* the ellipsis rank: the most dims any operand's ellipsis covers */
    for (int t = 0; t < s->n_ops; t++) {
        const fl_tensor *x = fl_in(m, n, t);
        int named = s->n_term[t] - s->ell[t], cover = x->ndim - named;
        if (cover < 0 || (!s->ell[t] && cover != 0))
            return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Einsum): input %d %s has %d dims for %d "
                           "labels", n->name, t, fl_shape_str(x, a, sizeof a), x->ndim, named);
        if (cover > n_ell) n_ell = cover;
    }
    /* dims of every operand: labels must agree, the ellipsis broadcasts (right-aligned) */
    for (int t = 0; t < s->n_ops; t++) {
        const fl_tensor *x = fl_in(m, n, t);
        int cover = x->ndim - (s->n_term[t] - s->ell[t]), d = 0;
        for (int j = 0; j < s->n_term[t]; j++) {
            int reps = s->term[t][j] == ELL ? cover : 1;
            for (int r = 0; r < reps; r++, d++) {
                int l = s->term[t][j] == ELL ? N_LETTERS + n_ell - cover + r : s->term[t][j];
                int64_t v = x->shape[d];
                int bcast = l >= N_LETTERS;
                if (lsize[l] < 0 || (bcast && lsize[l] == 1)) lsize[l] = v;
                else if (v != lsize[l] && !(bcast && v == 1))
                    return fl_fail(e, FL_ERR_SHAPE, "node '%s' (Einsum): label %d of input %d is "
                                   "%lld, elsewhere %lld", n->name, j, t, (long long)v,
                                   (long long)lsize[l]);
            }
        }
    }
    /* loops: every label in use */
    s->n_loop = 0;
    for (int l = 0; l < MAX_LABELS; l++) {
        if (lsize[l] < 0) continue;
        if (s->n_loop == MAX_LOOP)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Einsum): more than %d distinct "
                           "labels", n->name, MAX_LOOP);
        used[l] = s->n_loop;
        s->size[s->n_loop++] = lsize[l];
    }
    /* output shape */
    int out = s->n_ops, yn = 0;
    int64_t ys[FL_MAX_DIMS];
    for (int j = 0; j < s->n_term[out]; j++) {
        int reps = s->term[out][j] == ELL ? n_ell : 1;
        for (int r = 0; r < reps; r++) {
            int l = s->term[out][j] == ELL ? N_LETTERS + r : s->term[out][j];
            if (yn == FL_MAX_DIMS)
                return fl_fail(e, FL_ERR_UNSUPPORTED, "node '%s' (Einsum): output has more than "
                               "%d dims", n->name, FL_MAX_DIMS);
            ys[yn++] = lsize[l];
        }
    }
    fl_node_set_out_shape(m, n, 0, yn, ys);
    /* strides: operands (size-1 broadcast dims stride 0) and the output */
    memset(s->stride, 0, sizeof s->stride);
    for (int t = 0; t <= s->n_ops; t++) {
        int nd = t < s->n_ops ? fl_in(m, n, t)->ndim : yn;
        const int64_t *shape = t < s->n_ops ? fl_in(m, n, t)->shape : ys;
        int cover = t < s->n_ops ? nd - (s->n_term[t] - s->ell[t]) : n_ell;
        int d = nd - 1;
        int64_t st = 1;
        for (int j = s->n_term[t] - 1; j >= 0; j--) {
            int reps = s->term[t][j] == ELL ? cover : 1;
            for (int r = reps - 1; r >= 0; r--, d--) {
                int l = s->term[t][j] == ELL ? N_LETTERS + n_ell - cover + r : s->term[t][j];
                if (!(shape[d] == 1 && lsize[l] != 1)) s->stride[t][used[l]] += st;
                st *= shape[d];
            }
        }
    }
    return FL_OK;
}

/* The walk over every label combination. grad < 0: forward (y += prod); grad = k: dx_k. */
static void ein_walk(fl_model *m, fl_node *n, int grad, float *target) {
    const ein_state *s = n->state;
    const float *x[MAX_OPS];
    for (int t = 0; t < s->n_ops; t++) x[t] = fl_in(m, n, t)->data;
    const float *dy = grad >= 0 ? fl_gout(m, n, 0)->data : NULL;
    int L = s->n_loop, out = s->n_ops;
    for (int l = 0; l < L; l++)
        if (s->size[l] == 0) return;
    int64_t idx[MAX_LOOP] = {0}, off[MAX_OPS + 1] = {0};
    for (;;) {
        float v = dy ? dy[off[out]] : 1.0f;
        for (int t = 0; t < s->n_ops; t++)
            if (t != grad) v *= x[t][off[t]];
        target[grad >= 0 ? off[grad] : off[out]] += v;
        int l = L - 1;
        for (; l >= 0; l--) {
            for (int t = 0; t <= s->n_ops; t++) off[t] += s->stride[t][l];
            if (++idx[l] < s->size[l]) break;
            for (int t = 0; t <= s->n_ops; t++) off[t] -= s->stride[t][l] * s->size[l];
            idx[l] = 0;
        }
        if (l < 0) return;
    }
}

static void ein_forward(fl_model *m, fl_node *n) {
    fl_tensor *y = fl_out(m, n, 0);
    if (y->size == 0) return;
    memset(y->data, 0, sizeof(float) * (size_t)y->size);
    ein_walk(m, n, -1, y->data);
}

static void ein_backward(fl_model *m, fl_node *n) {
    const ein_state *s = n->state;
    for (int t = 0; t < s->n_ops; t++) {
        fl_tensor *dx = fl_gin(m, n, t);
        if (dx) ein_walk(m, n, t, dx->data);
    }
}

static const fl_op op_einsum = {"Einsum", ein_init, ein_shape, ein_forward, ein_backward, NULL};

const fl_op *const fl_ops_einsum[] = {&op_einsum, NULL};
