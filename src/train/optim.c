/* Optimisers: SGD with momentum and Adam, with PyTorch's update rules (see train.h).
 *
 * The optimiser keeps the indices of the model's FL_VAL_PARAM values (not pointers: the
 * tensors' data pointers are read at every step, so a model that re-plans is fine) and one
 * contiguous block for its state: the momentum buffer for SGD, the first and second moments
 * for Adam, laid out parameter after parameter in value order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/train.h"

struct fl_optim {
    fl_model *m;
    fl_optim_opts o;
    int n_params;
    int *params;     /* value indices of the parameters */
    int64_t total;   /* floats over all parameters */
    float *buf1;     /* SGD momentum buffer / Adam m: [total] */
    float *buf2;     /* Adam v: [total]; NULL for SGD */
    int64_t t;       /* steps taken */
};

fl_status fl_optim_parse(const char *s, fl_optim_kind *out, fl_err *e) {
    if (!strcmp(s, "sgd")) *out = FL_OPTIM_SGD;
    else if (!strcmp(s, "adam")) *out = FL_OPTIM_ADAM;
    else return fl_fail(e, FL_ERR_ARG, "unknown optimiser '%s' (expected sgd or adam)", s);
    return FL_OK;
}

const char *fl_optim_name(fl_optim_kind k) { return k == FL_OPTIM_ADAM ? "adam" : "sgd"; }

void fl_optim_opts_default(fl_optim_opts *o, fl_optim_kind kind) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == FL_OPTIM_ADAM ? 1e-3f : 1e-2f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
}

static fl_status check_opts(const fl_optim_opts *o, fl_err *e) {
    if (o->kind != FL_OPTIM_SGD && o->kind != FL_OPTIM_ADAM)
        return fl_fail(e, FL_ERR_ARG, "optimiser: unknown kind %d", (int)o->kind);
    if (!(o->lr > 0) || !isfinite(o->lr))
        return fl_fail(e, FL_ERR_ARG, "optimiser: learning rate must be > 0 (got %g)", (double)o->lr);
    if (!(o->momentum >= 0 && o->momentum < 1))
        return fl_fail(e, FL_ERR_ARG, "optimiser: momentum must be in [0,1) (got %g)",
                       (double)o->momentum);
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return fl_fail(e, FL_ERR_ARG, "optimiser: weight decay must be >= 0 (got %g)",
                       (double)o->weight_decay);
    if (o->kind == FL_OPTIM_ADAM &&
        !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return fl_fail(e, FL_ERR_ARG, "optimiser: Adam needs betas in [0,1) and eps > 0 "
                       "(got %g, %g, %g)", (double)o->beta1, (double)o->beta2, (double)o->eps);
    return FL_OK;
}

fl_status fl_optim_new(fl_model *m, const fl_optim_opts *o, fl_optim **out, fl_err *e) {
    *out = NULL;
    fl_status st = check_opts(o, e);
    if (st != FL_OK) return st;
    st = fl_model_want_param_grads(m, 1, e);
    if (st != FL_OK) return st;
    fl_optim *opt = calloc(1, sizeof *opt);
    if (!opt) return fl_fail(e, FL_ERR_NOMEM, "out of memory for the optimiser");
    opt->m = m;
    opt->o = *o;
    opt->params = malloc(sizeof(int) * ((size_t)m->n_values + 1));
    if (!opt->params) goto nomem;
    for (int i = 0; i < m->n_values; i++) {
        if (m->values[i].kind != FL_VAL_PARAM) continue;
        opt->params[opt->n_params++] = i;
        opt->total += m->values[i].t.size;
    }
    size_t bytes = (size_t)(opt->total ? opt->total : 1) * sizeof(float);
    opt->buf1 = fl_alloc(bytes);
    if (!opt->buf1) goto nomem;
    if (o->kind == FL_OPTIM_ADAM && !(opt->buf2 = fl_alloc(bytes))) goto nomem;
    *out = opt;
    return FL_OK;
nomem:
    fl_optim_free(opt);
    return fl_fail(e, FL_ERR_NOMEM, "out of memory for the optimiser state");
}

/* p, g: [n]; buf: momentum buffer [n]. first: the buffer is still empty (PyTorch sets it to
 * the gradient on the first step instead of decaying zeros). */
static void sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float mom,
                       float wd, int first) {
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        if (mom > 0) {
            buf[i] = first ? gi : mom * buf[i] + gi;
            gi = buf[i];
        }
        p[i] -= lr * gi;
    }
}

/* p, g, mbuf, vbuf: [n]. bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (bias corrections); the step
 * is computed as PyTorch does: p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). */
static void adam_update(float *p, const float *g, float *mbuf, float *vbuf, int64_t n, float lr,
                        float b1, float b2, float eps, float wd, float bc1, float bc2) {
    float step = lr / bc1, sbc2 = sqrtf(bc2);
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] + wd * p[i];
        mbuf[i] = b1 * mbuf[i] + (1.0f - b1) * gi;
        vbuf[i] = b2 * vbuf[i] + (1.0f - b2) * gi * gi;
        p[i] -= step * mbuf[i] / (sqrtf(vbuf[i]) / sbc2 + eps);
    }
}

/* The update is elementwise, so the parameters' elements, one range over all of them in
 * blocks of STEP_BLOCK, are split over the thread pool (same result for any thread count). */
enum { STEP_BLOCK = 8192 };

typedef struct step_job {
    fl_optim *opt;
    float bc1, bc2;
} step_job;

static void step_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const step_job *J = ctx;
    fl_optim *opt = J->opt;
    const fl_optim_opts *o = &opt->o;
    int64_t a = lo * STEP_BLOCK, b = hi * STEP_BLOCK, off = 0;
    for (int k = 0; k < opt->n_params && off < b; k++) {
        fl_value *v = &opt->m->values[opt->params[k]];
        int64_t n = v->t.size, s = a > off ? a - off : 0, e = b - off < n ? b - off : n;
        if (v->g.data && s < e) {
            if (o->kind == FL_OPTIM_SGD)
                sgd_update(v->t.data + s, v->g.data + s, opt->buf1 + off + s, e - s, o->lr,
                           o->momentum, o->weight_decay, opt->t == 1);
            else
                adam_update(v->t.data + s, v->g.data + s, opt->buf1 + off + s,
                            opt->buf2 + off + s, e - s, o->lr, o->beta1, o->beta2, o->eps,
                            o->weight_decay, J->bc1, J->bc2);
        }
        off += n;
    }
}

void fl_optim_step(fl_optim *opt) {
    const fl_optim_opts *o = &opt->o;
    opt->t++;
    step_job J = {opt, 1.0f - (float)pow(o->beta1, (double)opt->t),
                  1.0f - (float)pow(o->beta2, (double)opt->t)};
    fl_parallel_for((opt->total + STEP_BLOCK - 1) / STEP_BLOCK, step_range, &J);
}

void fl_optim_set_lr(fl_optim *opt, float lr) { opt->o.lr = lr; }
int64_t fl_optim_steps(const fl_optim *opt) { return opt->t; }

void fl_optim_state(fl_optim *opt, float **m, float **v, int64_t *n, int64_t **steps) {
    *m = opt->buf1;
    *v = opt->buf2;
    *n = opt->total;
    *steps = &opt->t;
}

void fl_optim_free(fl_optim *opt) {
    if (!opt) return;
    free(opt->params);
    fl_free(opt->buf1);
    fl_free(opt->buf2);
    free(opt);
}
