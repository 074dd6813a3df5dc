/* The gradient strategies' round (grad.h has the lanes; grad_obj.c the objectives).
 *
 * One call:
 *   1. refill the empty lanes with picks from the queue (fifo by default: DLFuzz's list);
 *   2. one forward pass of every lane's current image (per model, for deepxplore);
 *   3. for a lane that has stepped: oracles, the guide's coverage gain (row by row, so each
 *      step's own gain is known), acceptance into the queue, and whether the lane is done;
 *      for a lane just picked: its own class, its top-5, its neurons to raise;
 *   4. one backward pass per model, seeded with every lane's objective at once;
 *   5. each lane takes its step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/lrp.h"
#include "fuzz/grad.h"
#include "fuzz/round.h" /* fz_argmax */

static const int default_iters[FL_FUZZ_STRATEGY_COUNT_] = {[FL_FUZZ_DLFUZZ] = 5, [FL_FUZZ_DEEPXPLORE] = 50,
                                    [FL_FUZZ_DEEPSA] = 5, [FL_FUZZ_FGSM] = 1, [FL_FUZZ_PGD] = 40};
static const double default_step[FL_FUZZ_STRATEGY_COUNT_] = {[FL_FUZZ_DLFUZZ] = 0.02, [FL_FUZZ_DEEPXPLORE] = 10.0 / 255,
                                      [FL_FUZZ_DEEPSA] = 0.1, [FL_FUZZ_FGSM] = 0.3,
                                      [FL_FUZZ_PGD] = 0.01};
static const double default_lambda[FL_FUZZ_STRATEGY_COUNT_] = {[FL_FUZZ_DLFUZZ] = 0.5, [FL_FUZZ_DEEPXPLORE] = 0.1,
                                        [FL_FUZZ_DEEPSA] = 1.0};

/* The first node on a path from the input that has no gradient, for the error message. */
static const fl_node *no_grad_node(const fl_model *m) {
    uint8_t *dep = calloc((size_t)m->n_values, 1);
    if (!dep) return NULL;
    for (int i = 0; i < m->n_inputs; i++) dep[m->inputs[i]] = 1;
    const fl_node *bad = NULL;
    for (int k = 0; k < m->n_nodes && !bad; k++) {
        const fl_node *n = &m->nodes[k];
        int d = 0;
        for (int i = 0; i < n->n_in; i++) d |= n->in[i] >= 0 && dep[n->in[i]];
        if (!d) continue;
        if (!n->op->backward) bad = n;
        for (int o = 0; o < n->n_out; o++) dep[n->out[o]] = 1;
    }
    free(dep);
    return bad;
}

/* A forward and a backward pass of one seed: the objective must reach the input. */
static fl_status check_gradient(fz_grad *g, fz_campaign *cp, int mi, const char *path,
                                fl_err *e) {
    fz_ntab *t = &g->tab[mi];
    fl_model *m = t->m;
    int64_t shape[4] = {1, cp->c, cp->h, cp->w};
    fl_tensor x = {0};
    fl_status st = fl_tensor_alloc(&x, 4, shape);
    if (st) return fl_fail(e, st, "out of memory");
    fz_to_input(cp, cp->q.e[0].px, 1, x.data);
    m->skip_input_grad = 0;
    if (!(st = fl_model_forward(m, &x, e))) {
        fz_seeds_begin(&t->seeds);
        fl_tensor *s = fz_seed_get(&t->seeds, m, t->logits);
        if (!s) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; !st && k < s->size; k++) s->data[k] = 1;
        if (!st) st = fz_seeds_backward(&t->seeds, m, e);
    }
    fl_tensor_free(&x);
    if (st) return st;
    const fl_tensor *dx = fl_model_grad(m, fl_model_input_name(m, 0));
    int any = 0;
    for (int64_t k = 0; dx && k < dx->size && !any; k++) any = dx->data[k] != 0;
    if (any) return FL_OK;
    const fl_node *bad = no_grad_node(m);
    if (bad)
        return fl_fail(e, FL_ERR_UNSUPPORTED,
                       "%s: --strategy %s needs the gradient of the output with respect to the "
                       "input, and node '%s' (%s) has none",
                       path, fl_fuzz_strategy_name(cp->o->strategy), bad->name, bad->op->name);
    return fl_fail(e, FL_ERR_UNSUPPORTED,
                   "%s: --strategy %s: no gradient of the output reaches the input", path,
                   fl_fuzz_strategy_name(cp->o->strategy));
}

typedef struct trace_ctx {
    fz_grad *g;
    float *tr;
    int32_t *pred;
} trace_ctx;

static fl_status collect(void *user, fl_model *m, const float *neurons, const float *logits,
                         int n_logits, int64_t start, int n, fl_err *e) {
    trace_ctx *c = user;
    const int64_t T = c->g->sa_ls->total, d = c->g->sa_n;
    for (int i = 0; i < n; i++) {
        for (int64_t j = 0; j < d; j++)
            c->tr[(start + i) * d + j] = neurons[(int64_t)i * T + c->g->sa_idx[j]];
        c->pred[start + i] = fz_argmax(logits + (int64_t)i * n_logits, n_logits, NULL);
    }
    (void)m, (void)e;
    return FL_OK;
}

/* deepsa: the important neurons' layers, their training traces, the SA object. */
static fl_status sa_init(fz_grad *g, fz_campaign *cp, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    if (!o->important)
        return fl_fail(e, FL_ERR_ARG, "--strategy deepsa needs --important (`flare nn lrp` output)");
    if (!o->train)
        return fl_fail(e, FL_ERR_ARG,
                       "--strategy deepsa needs --train (the training set its surprise is "
                       "measured against)");
    fl_important *imp = NULL;
    fl_status st = fl_important_load(o->important, &imp, e);
    if (st) return st;
    size_t len = 1;
    for (int l = 0; l < imp->n_layers; l++) len += strlen(imp->layers[l].name) + 1;
    char *spec = malloc(len);
    if (!spec) return fl_important_free(imp), fl_fail(e, FL_ERR_NOMEM, "out of memory");
    spec[0] = 0;
    for (int l = 0; l < imp->n_layers; l++) {
        if (l) strcat(spec, ",");
        strcat(spec, imp->layers[l].name);
    }
    st = fl_layerset_make(o->model, spec, &g->sa_ls, e);
    free(spec);
    if (!st) st = fl_important_subset(imp, g->sa_ls, &g->sa_idx, &g->sa_n, e);
    fl_important_free(imp);
    if (st) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        return fl_fail(e, st, "--important %s: %s", o->important, msg);
    }
    trace_ctx c = {g, malloc(sizeof(float) * (size_t)(o->train->n * g->sa_n)),
                   malloc(sizeof(int32_t) * (size_t)o->train->n)};
    if (!c.tr || !c.pred) st = fl_fail(e, FL_ERR_NOMEM, "out of memory (training traces)");
    if (!st) st = fl_layerset_stream(o->model, g->sa_ls, o->train, 256, collect, &c, e);
    fl_sa_opts so;
    fl_sa_opts_init(&so, o->sa_kind == FL_SA_LSA ? FL_SA_LSA : FL_SA_DSA);
    so.n_classes = cp->n_classes;
    if (!st) st = fl_sa_new(c.tr, c.pred, o->train->n, g->sa_n, &so, &g->sa, e);
    free(c.tr);
    free(c.pred);
    if (st) return st;
    const size_t B = (size_t)g->B;
    g->sa_all = malloc(sizeof(float) * B * (size_t)g->sa_ls->total);
    g->sa_trace = malloc(sizeof(float) * B * (size_t)g->sa_n);
    g->sa_grad = malloc(sizeof(float) * B * (size_t)g->sa_n);
    g->sa_val = malloc(sizeof(double) * B);
    if (!g->sa_all || !g->sa_trace || !g->sa_grad || !g->sa_val)
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return FL_OK;
}

/* deepxplore starts from seeds all its models agree on: there must be one. */
static fl_status check_agreement(fz_grad *g, fz_campaign *cp, fl_err *e) {
    const int64_t n = cp->n, N = cp->q.n_seeds;
    int64_t agree = 0;
    fl_status st = FL_OK;
    for (int64_t s0 = 0; !st && s0 < N; s0 += g->B) {
        int B = (int)(N - s0 < g->B ? N - s0 : g->B);
        for (int i = 0; i < B; i++) fz_to_input(cp, cp->q.e[s0 + i].px, 1, g->x.data + i * n);
        int64_t shape[4] = {B, cp->c, cp->h, cp->w};
        fl_tensor_set_shape(&g->x, 4, shape);
        int32_t first[FZ_MAX_LANES];
        uint8_t same[FZ_MAX_LANES];
        memset(same, 1, sizeof same);
        for (int mi = 0; !st && mi < g->n_models; mi++) {
            if ((st = fl_model_forward(g->tab[mi].m, &g->x, e))) break;
            const fl_tensor *y = fl_model_output(g->tab[mi].m, 0);
            for (int i = 0; i < B; i++) {
                int32_t p = fz_argmax(y->data + (int64_t)i * y->shape[1], (int)y->shape[1], NULL);
                if (mi == 0) first[i] = p;
                else same[i] &= p == first[i];
            }
        }
        for (int i = 0; i < B; i++) agree += same[i];
    }
    if (!st && !agree)
        st = fl_fail(e, FL_ERR_ARG,
                     "--strategy deepxplore: the models disagree on all %lld seeds already; it "
                     "starts from seeds they agree on (those disagreements are findings of "
                     "`--strategy random --model2`)",
                     (long long)N);
    return st;
}

fl_status fz_grad_init(fz_grad *g, fz_campaign *cp, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    const fl_fuzz_strategy s = o->strategy;
    memset(g, 0, sizeof *g);
    g->B = cp->k;
    g->iters = o->iters > 0 ? o->iters : default_iters[s];
    g->step = o->step > 0 ? o->step : default_step[s];
    g->eps = o->eps > 0 ? o->eps : 0.3;
    if (s == FL_FUZZ_FGSM) g->step = g->eps, g->iters = 1;
    g->lambda = o->lambda >= 0 ? o->lambda : default_lambda[s];
    g->w_diff = o->w_diff >= 0 ? o->w_diff : 1.0;
    g->thr = o->nc_threshold >= 0 ? o->nc_threshold : s == FL_FUZZ_DEEPXPLORE ? 0.0 : 0.5;
    g->max_l2 = o->max_l2 > 0 ? o->max_l2 : s == FL_FUZZ_DEEPSA ? 0.5 : 0.02;
    g->max_kept = o->max_kept > 0 ? o->max_kept : 25;
    g->n_neurons = o->n_neurons > 0 ? o->n_neurons : 10;
    if (g->n_neurons > FZ_MAX_NEURONS) g->n_neurons = FZ_MAX_NEURONS;
    if (cp->n_classes > 4096)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "%d classes: the gradient strategies take at most 4096",
                       cp->n_classes);
    fl_status st = FL_OK;
    if (o->neuron_select && (st = fz_nsel_parse(o->neuron_select, &g->nsel, e))) return st;
    fl_model *models[3] = {o->model, o->model2, o->model3};
    const char *paths[3] = {o->model_path ? o->model_path : "the model",
                            o->model2_path ? o->model2_path : "--model2",
                            o->model3_path ? o->model3_path : "--model3"};
    g->n_models = s == FL_FUZZ_DEEPXPLORE ? 1 + !!o->model2 + !!o->model3 : 1;
    for (int i = 0; i < g->n_models; i++) {
        if ((st = fz_ntab_init(&g->tab[i], models[i], e)) || (st = check_gradient(g, cp, i, paths[i], e)))
            return st;
    }
    for (int ch = 0; ch < 3; ch++) g->dscale[ch] = cp->lut[ch][255] - cp->lut[ch][0];
    const size_t B = (size_t)g->B, n = (size_t)cp->n;
    g->lane = calloc(B, sizeof *g->lane);
    g->rows = calloc(B, sizeof *g->rows);
    g->g = malloc(sizeof(float) * B * n);
    g->v = calloc(B, sizeof *g->v);
    g->finite = calloc(B, 1);
    for (int i = 0; i < 3; i++) g->pred[i] = calloc(B, sizeof(int32_t));
    g->kept_root = calloc((size_t)cp->q.n_seeds + 1, sizeof(int));
    int64_t shape[4] = {g->B, cp->c, cp->h, cp->w};
    if (!g->lane || !g->rows || !g->g || !g->v || !g->finite || !g->pred[0] || !g->pred[1] ||
        !g->pred[2] || !g->kept_root || fl_tensor_alloc(&g->x, 4, shape))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (%d lanes)", g->B);
    for (size_t i = 0; i < B; i++) {
        g->lane[i].entry = -1;
        g->lane[i].x = malloc(sizeof(float) * n);
        g->lane[i].px = malloc(n);
        if (!g->lane[i].x || !g->lane[i].px) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    if (g->B > FZ_MAX_LANES)
        return fl_fail(e, FL_ERR_ARG, "-k %d: the gradient strategies step at most %d lanes", g->B,
                       FZ_MAX_LANES);
    if (s == FL_FUZZ_DEEPXPLORE) return check_agreement(g, cp, e);
    if (s == FL_FUZZ_DEEPSA) return sa_init(g, cp, e);
    return FL_OK;
}

void fz_grad_free(fz_grad *g) {
    for (int i = 0; i < 3; i++) fz_ntab_free(&g->tab[i]), free(g->pred[i]);
    for (int i = 0; g->lane && i < g->B; i++) free(g->lane[i].x), free(g->lane[i].px);
    free(g->lane);
    free(g->rows);
    free(g->g);
    free(g->v);
    free(g->finite);
    fl_tensor_free(&g->x);
    fl_sa_free(g->sa);
    fl_layerset_free(g->sa_ls);
    free(g->sa_idx);
    free(g->sa_all);
    free(g->sa_trace);
    free(g->sa_grad);
    free(g->sa_val);
    free(g->kept_root);
    memset(g, 0, sizeof *g);
}

static void pick(fz_grad *g, fz_campaign *cp, fz_lane *l) {
    const int64_t n = cp->n;
    l->entry = fz_queue_pick(&cp->q, &cp->rng, 0);
    l->it = 0;
    l->n_neur = 0;
    l->best_sa = -INFINITY;
    const uint8_t *px = cp->q.e[l->entry].px;
    for (int64_t i = 0; i < n; i++) l->x[i] = px[i] / 255.0f;
    if (cp->o->strategy == FL_FUZZ_PGD) /* Madry et al.'s random start in the eps-ball */
        for (int64_t i = 0; i < n; i++) {
            float v = l->x[i] + (float)g->eps * (2 * fl_rng_uniform(&cp->rng) - 1);
            l->x[i] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    for (int64_t i = 0; i < n; i++) l->px[i] = (uint8_t)lrintf(l->x[i] * 255.0f);
}

/* Forward the B rows through every model: predictions, finiteness. */
static fl_status forward(fz_grad *g, fz_campaign *cp, int B, fl_err *e) {
    const int64_t n = cp->n;
    for (int i = 0; i < B; i++) fz_to_input(cp, g->lane[g->rows[i]].px, 1, g->x.data + i * n);
    int64_t shape[4] = {B, cp->c, cp->h, cp->w};
    fl_tensor_set_shape(&g->x, 4, shape);
    int nm = g->n_models > 1 ? g->n_models : cp->o->model2 ? 2 : 1;
    for (int mi = 0; mi < nm; mi++) {
        fl_model *m = mi == 0 ? cp->o->model : mi == 1 ? cp->o->model2 : cp->o->model3;
        m->skip_input_grad = 0;
        fl_status st = fl_model_forward(m, &g->x, e);
        if (st) return st;
        const fl_tensor *y = fl_model_output(m, 0);
        const int K = (int)y->shape[1];
        for (int i = 0; i < B; i++) {
            const float *z = y->data + (int64_t)i * K;
            int fin = 1;
            for (int k = 0; k < K; k++) fin &= isfinite(z[k]) != 0;
            if (mi == 0) g->finite[i] = (uint8_t)fin;
            float conf;
            g->pred[mi][i] = fin ? fz_argmax(z, K, &conf) : -1;
            if (mi == 0) g->v[i].confidence = fin ? conf : 0;
        }
    }
    return FL_OK;
}

/* The guide's coverage gain of each evaluated row, in batch order (row i is counted after
 * rows 0..i-1, as everywhere in the campaign). Criteria that read the model itself (lsc,
 * dsc) are updated with the whole batch: their gain is 1 for a row that added anything. */
static fl_status gains(fz_grad *g, fz_campaign *cp, int B, int64_t *gain, fl_err *e) {
    fl_coverset *cv = cp->cov;
    fl_status st;
    if (cv->needs & FL_COVER_NEED_MODEL) {
        uint8_t added[FZ_MAX_LANES];
        if ((st = fl_coverset_update_model(cv, cp->o->model, added, e))) return st;
        for (int i = 0; i < B; i++) gain[i] = g->lane[g->rows[i]].it > 0 && added[i];
        return FL_OK;
    }
    if ((st = fl_cover_view_fill(&cv->view, cp->ls, cp->o->model, cv->needs, e))) return st;
    const fl_cover_batch all = cv->view.b;
    const int64_t T = cp->ls->total, L = cp->ls->n;
    for (int i = 0; i < B; i++) {
        gain[i] = 0;
        if (g->lane[g->rows[i]].it == 0) continue; /* a queue entry: counted already */
        fl_cover_batch one = {.n = 1, .mean = all.mean + i * T, .m = NULL};
        if (all.absmean) one.absmean = all.absmean + i * T;
        if (all.lmin) one.lmin = all.lmin + i * L, one.lmax = all.lmax + i * L;
        int64_t before = cv->c[0]->covered;
        uint8_t added;
        if ((st = fl_coverset_update(cv, &one, &added, e))) return st;
        gain[i] = cv->c[0]->covered - before;
    }
    return FL_OK;
}

static double rel_l2(const uint8_t *x, const uint8_t *x0, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = (double)x[i] - x0[i];
        d += a * a;
        s += (double)x0[i] * x0[i];
    }
    return s > 0 ? sqrt(d / s) : (d > 0 ? INFINITY : 0);
}

/* deepsa: SAv of every row (and, exact mode, its gradient with respect to the trace). */
static fl_status surprise(fz_grad *g, fz_campaign *cp, int B, fl_err *e) {
    fl_layerset_neurons(g->sa_ls, cp->o->model, g->sa_all);
    const int64_t T = g->sa_ls->total, d = g->sa_n;
    for (int i = 0; i < B; i++)
        for (int64_t j = 0; j < d; j++) g->sa_trace[i * d + j] = g->sa_all[i * T + g->sa_idx[j]];
    if (cp->o->sa_exact)
        return fl_sa_grad(g->sa, g->sa_trace, g->pred[0], B, g->sa_val, g->sa_grad, e);
    return fl_sa_score(g->sa, g->sa_trace, g->pred[0], B, g->sa_val, e);
}

/* Lane row i was just picked: its class ranking and its neurons. */
static void init_lane(fz_grad *g, fz_campaign *cp, fz_lane *l, int i) {
    const fl_tensor *z = &cp->o->model->values[g->tab[0].logits].t;
    const int K = (int)z->shape[1];
    const float *zi = z->data + (int64_t)i * K;
    l->orig = g->pred[0][i];
    for (int r = 0; r < 4; r++) { /* classes ranked 2..5, by logit */
        int32_t best = -1;
        for (int k = 0; k < K; k++) {
            int used = k == l->orig;
            for (int q = 0; q < r; q++) used |= l->top[q] == k;
            if (!used && (best < 0 || zi[k] > zi[best])) best = k;
        }
        l->top[r] = best;
    }
    if (cp->o->strategy == FL_FUZZ_DLFUZZ)
        fz_ntab_select(&g->tab[0], g->nsel, g->n_neurons, g->thr, i, &cp->rng, l, 0);
    if (cp->o->strategy == FL_FUZZ_DEEPXPLORE)
        for (int mi = 0; mi < g->n_models; mi++)
            fz_ntab_select(&g->tab[mi], 0, 1, g->thr, i, &cp->rng, l, mi);
    if (cp->o->strategy == FL_FUZZ_DEEPSA) l->best_sa = g->sa_val[i];
}

/* Lane row i has stepped: judge it. Returns whether the lane goes on. */
static fl_status judge(fz_grad *g, fz_campaign *cp, fz_lane *l, int i, int64_t gain, int *go_on,
                       fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    const fl_fuzz_strategy s = o->strategy;
    const fz_entry *p = &cp->q.e[l->entry], *root = &cp->q.e[p->root];
    fz_verdict *v = &g->v[i];
    v->label = p->label;
    v->pred = g->pred[0][i];
    v->pred2 = -1;
    int nm = g->n_models > 1 ? g->n_models : o->model2 ? 2 : 1;
    for (int mi = 1; mi < nm && v->pred2 < 0; mi++)
        if (g->pred[mi][i] != v->pred) v->pred2 = g->pred[mi][i];
    if (nm > 1 && v->pred2 < 0) v->pred2 = g->pred[1][i];
    int failed = 1;
    const int differ = nm > 1 && v->pred2 != v->pred;
    if (v->pred < 0) v->oracle = FZ_OR_NONFINITE;
    else if (s == FL_FUZZ_DEEPXPLORE && differ) v->oracle = FZ_OR_DISAGREE; /* what it looks for */
    else if (v->pred != v->label) v->oracle = FZ_OR_MISCLASS;
    else if (differ) v->oracle = FZ_OR_DISAGREE;
    else failed = 0;
    char op[48];
    snprintf(op, sizeof op, "%s:%d", fl_fuzz_strategy_name(s), l->it);
    fl_status st = FL_OK;
    if (failed) {
        fz_failure f = {v, p, root, l->px, g->x.data + (int64_t)i * cp->n, op, cp->execs + 1,
                        cp->time_before + fl_now() - cp->t0};
        int is_new;
        if ((st = fz_findings_add(cp, &f, &is_new, e))) return st;
        if (s == FL_FUZZ_DEEPXPLORE && v->oracle == FZ_OR_DISAGREE) /* its tables grow here */
            for (int mi = 0; mi < g->n_models; mi++) fz_ntab_count(&g->tab[mi], i, g->thr);
    }
    cp->execs++;
    *go_on = l->it < g->iters && v->pred >= 0 &&
             !(failed && (s == FL_FUZZ_DEEPXPLORE || s == FL_FUZZ_PGD));
    if (failed) return FL_OK; /* failures are recorded, not queued (as in DeepHunter) */
    int64_t covered, total;
    fl_cover_stats(cp->cov->c[0], &covered, &total);
    if (s == FL_FUZZ_DLFUZZ) {
        double dnc = total ? (double)gain / (double)total : (double)(gain > 0);
        if (dnc > 0.01 / (double)(p->root + 1) && rel_l2(l->px, root->px, cp->n) < g->max_l2)
            st = fz_keep(cp, l->entry, l->px, op, NULL, NULL, e);
    } else if (s == FL_FUZZ_DEEPSA) {
        double sa = g->sa_val[i];
        if (!isnan(sa) && sa > l->best_sa && g->kept_root[p->root] < g->max_kept &&
            rel_l2(l->px, root->px, cp->n) < g->max_l2) {
            l->best_sa = sa;
            g->kept_root[p->root]++;
            st = fz_keep(cp, l->entry, l->px, op, NULL, NULL, e);
        }
    }
    return st;
}

/* Seeds and one backward pass per model; g->g[row] = d objective / d pixel. */
static fl_status backward(fz_grad *g, fz_campaign *cp, int B, const uint8_t *active, fl_err *e) {
    const int64_t n = cp->n, hw = (int64_t)cp->h * cp->w;
    memset(g->g, 0, sizeof(float) * (size_t)(B * n));
    for (int mi = 0; mi < g->n_models; mi++) {
        fz_ntab *t = &g->tab[mi];
        fl_model *m = t->m;
        fz_seeds_begin(&t->seeds);
        fl_tensor *sz = fz_seed_get(&t->seeds, m, t->logits);
        if (!sz) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        const int K = (int)sz->shape[1];
        const float *z = m->values[t->logits].t.data;
        fl_status st = FL_OK;
        for (int i = 0; i < B && !st; i++) {
            if (!active[i]) continue;
            fz_lane *l = &g->lane[g->rows[i]];
            fz_obj_logits(g, cp, l, mi, z + (int64_t)i * K, K, sz->data + (int64_t)i * K);
            for (int k = 0; k < l->n_neur && !st; k++)
                if (l->nmodel[k] == mi)
                    st = fz_obj_neuron(t, t->ls, i, l->neur[k], (float)g->lambda * l->nsign[k], e);
            if (cp->o->strategy == FL_FUZZ_DEEPSA && cp->o->sa_exact && !isnan(g->sa_val[i]))
                for (int64_t j = 0; j < g->sa_n && !st; j++)
                    st = fz_obj_neuron(t, g->sa_ls, i, g->sa_idx[j],
                                       (float)g->lambda * g->sa_grad[(int64_t)i * g->sa_n + j], e);
        }
        if (st || (st = fz_seeds_backward(&t->seeds, m, e))) return st;
        const fl_tensor *dx = fl_model_grad(m, fl_model_input_name(m, 0));
        for (int i = 0; i < B; i++)
            for (int ch = 0; ch < cp->c; ch++) {
                const float k = g->dscale[ch];
                const float *src = dx->data + (int64_t)i * n + ch * hw;
                float *dst = g->g + (int64_t)i * n + ch * hw;
                for (int64_t q = 0; q < hw; q++) dst[q] += k * src[q];
            }
    }
    return FL_OK;
}

fl_status fz_grad_round(fz_grad *g, fz_campaign *cp, int *ran, fl_err *e) {
    int B = 0;
    for (int k = 0; k < g->B; k++) {
        if (g->lane[k].entry < 0) pick(g, cp, &g->lane[k]);
        g->rows[B++] = k;
    }
    fl_status st = forward(g, cp, B, e);
    /* a non-finite output ends its lane (a finding); the others run again without it, since
     * coverage and gradients need finite values */
    int bad = 0;
    for (int i = 0; !st && i < B; i++) {
        if (g->finite[i]) continue;
        fz_lane *l = &g->lane[g->rows[i]];
        int go_on;
        if (l->it > 0) st = judge(g, cp, l, i, 0, &go_on, e);
        l->entry = -1;
        bad = 1;
    }
    if (!st && bad) {
        int nb = 0;
        for (int i = 0; i < B; i++)
            if (g->lane[g->rows[i]].entry >= 0) g->rows[nb++] = g->rows[i];
        B = nb;
        *ran = 1;
        if (!B) return FL_OK;
        st = forward(g, cp, B, e);
    }
    if (st) return st;
    int64_t gain[FZ_MAX_LANES];
    uint8_t active[FZ_MAX_LANES];
    if ((st = gains(g, cp, B, gain, e))) return st;
    if (cp->o->strategy == FL_FUZZ_DLFUZZ) { /* DLFuzz's table counts every image it ran */
        if ((st = fz_ntab_scaled(&g->tab[0], B, e))) return st;
        for (int i = 0; i < B; i++) fz_ntab_count(&g->tab[0], i, g->thr);
    }
    if (cp->o->strategy == FL_FUZZ_DEEPXPLORE)
        for (int mi = 0; mi < g->n_models && !st; mi++) st = fz_ntab_scaled(&g->tab[mi], B, e);
    if (!st && cp->o->strategy == FL_FUZZ_DEEPSA) st = surprise(g, cp, B, e);
    int evaluated = 0, started = 0;
    for (int i = 0; !st && i < B; i++) {
        fz_lane *l = &g->lane[g->rows[i]];
        active[i] = 1;
        if (l->it == 0) {
            int nm = g->n_models;
            int agree = 1;
            for (int mi = 1; mi < nm; mi++) agree &= g->pred[mi][i] == g->pred[0][i];
            if (!agree) { /* deepxplore: the models disagree on the pick already; skip it */
                active[i] = 0;
                l->entry = -1;
                continue;
            }
            init_lane(g, cp, l, i);
            started++;
            continue;
        }
        int go_on;
        evaluated++;
        st = judge(g, cp, l, i, gain[i], &go_on, e);
        if (!go_on) {
            active[i] = 0;
            l->entry = -1;
        }
    }
    *ran = evaluated + started > 0;
    if (st) return st;
    int any = 0;
    for (int i = 0; i < B; i++) any |= active[i];
    if (!any) return FL_OK;
    if ((st = backward(g, cp, B, active, e))) return st;
    for (int i = 0; i < B; i++) {
        if (!active[i]) continue;
        fz_lane *l = &g->lane[g->rows[i]];
        fz_obj_step(g, cp, l, g->g + (int64_t)i * cp->n, &cp->rng);
        l->it++;
    }
    return FL_OK;
}
