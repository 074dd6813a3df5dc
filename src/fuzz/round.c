/* One round of the campaign (DeepHunter's Algorithm 1, one seed at a time):
 *
 *   1. pick an entry (queue.c);
 *   2. power schedule: how many mutants it gets;
 *   3. make them, in parallel: each mutant has its own random stream, derived from the
 *      session's seed and its execution number, so the campaign does not depend on the
 *      thread count for its mutants;
 *   4. evaluate all of them as ONE forward pass, and the coverage as one incremental update
 *      ("added" is sequential: mutant i adds when it covers what neither the state before the
 *      round nor mutants 0..i-1 covered);
 *   5. oracles: a non-finite output, a prediction other than the seed's label, a disagreement
 *      with --model2. Failing mutants are recorded (findings.c) and not queued, as in
 *      DeepHunter; they still count for coverage (they ran);
 *   6. keep: deephunter — mutants that added coverage; tensorfuzz — mutants whose nearest
 *      neighbour in the corpus is farther than the threshold; random — none.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/round.h"

int32_t fz_argmax(const float *v, int k, float *conf) {
    int32_t best = 0;
    for (int i = 1; i < k; i++)
        if (v[i] > v[best]) best = i;
    if (conf) {
        double s = 0;
        for (int i = 0; i < k; i++) s += exp((double)v[i] - v[best]);
        *conf = (float)(1.0 / s);
    }
    return best;
}

fl_status fz_round_init(fz_round *rd, fz_campaign *cp, fl_err *e) {
    memset(rd, 0, sizeof *rd);
    int batch = cp->o->batch > 0 ? cp->o->batch : 256;
    rd->cap = cp->k > batch ? cp->k : batch;
    size_t cap = (size_t)rd->cap;
    rd->px = malloc(cap * (size_t)cp->n);
    rd->i0 = malloc(cap * (size_t)cp->n);
    rd->op = calloc(cap, sizeof *rd->op);
    rd->valid = calloc(cap, 1);
    rd->new_affine = calloc(cap, 1);
    rd->rows = calloc(cap, sizeof *rd->rows);
    rd->finite = calloc(cap, sizeof *rd->finite);
    rd->added = calloc(cap, 1);
    rd->v = calloc(cap, sizeof *rd->v);
    rd->dist = calloc(cap, sizeof *rd->dist);
    int64_t shape[4] = {rd->cap, cp->c, cp->h, cp->w};
    if (!rd->px || !rd->i0 || !rd->op || !rd->valid || !rd->new_affine || !rd->rows ||
        !rd->finite || !rd->added || !rd->v || !rd->dist || fl_tensor_alloc(&rd->x, 4, shape) ||
        fl_tensor_alloc(&rd->x2, 4, shape))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (buffers for %d mutants)", rd->cap);
    return FL_OK;
}

void fz_round_free(fz_round *rd) {
    free(rd->px);
    free(rd->i0);
    free(rd->op);
    free(rd->valid);
    free(rd->new_affine);
    free(rd->rows);
    free(rd->finite);
    free(rd->added);
    free(rd->v);
    free(rd->dist);
    fl_tensor_free(&rd->x);
    fl_tensor_free(&rd->x2);
    memset(rd, 0, sizeof *rd);
}

static void set_rows(fl_tensor *x, const fz_campaign *cp, int rows) {
    int64_t shape[4] = {rows, cp->c, cp->h, cp->w};
    fl_tensor_set_shape(x, 4, shape);
}

/* The novelty vectors of the last forward pass: rows x d floats of the chosen tensor. */
static const float *novelty_rows(const fz_campaign *cp, int rows, int *d) {
    const fl_tensor *t = &cp->o->model->values[cp->nv_layer].t;
    *d = (int)(t->size / rows);
    return t->data;
}

fl_status fz_replay_corpus(fz_round *rd, fz_campaign *cp, fl_err *e) {
    fl_model *m = cp->o->model;
    fl_status st = FL_OK;
    for (int64_t s = 0; !st && s < cp->q.n; s += rd->cap) {
        int nb = (int)(cp->q.n - s < rd->cap ? cp->q.n - s : rd->cap);
        for (int i = 0; i < nb; i++) fz_to_input(cp, cp->q.e[s + i].px, 1, rd->x.data + (int64_t)i * cp->n);
        set_rows(&rd->x, cp, nb);
        if ((st = fl_model_forward(m, &rd->x, e)) ||
            (st = fl_coverset_update_model(cp->cov, m, NULL, e)))
            break;
        if (cp->o->strategy != FL_FUZZ_TENSORFUZZ) continue;
        int d;
        const float *v = novelty_rows(cp, nb, &d);
        cp->nv.d = d;
        for (int i = 0; !st && i < nb; i++) st = fz_novelty_add(&cp->nv, v + (int64_t)i * d, e);
    }
    return st;
}

/* DeepHunter's power schedule: the more of its change budget (beta * 255 per value) an entry
 * has used against its reference, the fewer mutants it gets: ceil(K * left / budget), at
 * least 1. NeuraL-Coverage normalises over the batch instead, which for its batches of one
 * image is always K (docs/nn-fuzz.md). */
static int power(const fz_campaign *cp, const fz_entry *x) {
    if (cp->o->strategy != FL_FUZZ_DEEPHUNTER) return cp->k;
    int64_t size = 0, used = 0;
    for (int64_t i = 0; i < cp->n; i++) {
        size += cp->nonzero ? x->px[i] > 0 : 1;
        used += abs((int)x->px[i] - (int)x->i0[i]);
    }
    double budget = cp->beta * 255.0 * (double)(size ? size : 1);
    double p = (budget - (double)used) / budget;
    int k = (int)ceil((p < 0 ? 0 : p) * cp->k);
    return k < 1 ? 1 : k > cp->k ? cp->k : k;
}

typedef struct mut_ctx {
    fz_campaign *cp;
    fz_round *rd;
    const fz_entry *parent;
    const fz_entry *root;
    uint64_t base;
} mut_ctx;

static void mutate_range(void *vctx, int64_t lo, int64_t hi, int tid) {
    mut_ctx *c = vctx;
    fz_campaign *cp = c->cp;
    fz_round *rd = c->rd;
    const int64_t n = cp->n;
    fl_fuzz_memo memo; /* one parent for the whole range */
    fl_fuzz_memo_init(&memo, c->parent->px, c->parent->i0, n, cp->nonzero);
    for (int64_t k = lo; k < hi; k++) {
        fl_rng r;
        fl_rng_seed(&r, cp->session_seed ^ ((c->base + (uint64_t)k + 1) * 0xd1b54a32d192ed03ull));
        uint8_t *out = rd->px + k * n;
        if (cp->o->strategy == FL_FUZZ_TENSORFUZZ) {
            /* TensorFuzz: Gaussian noise, then the L-inf ball around the root seed */
            rd->op[k] = (fl_xform){FL_XF_GAUSS, (float)cp->o->tf_sigma, 0};
            fl_xform_apply(&rd->op[k], c->parent->px, out, cp->c, cp->h, cp->w, &r);
            const double b = cp->o->tf_bound;
            for (int64_t i = 0; i < n; i++) {
                double lo_ = c->root->px[i] - b, hi_ = c->root->px[i] + b, v = out[i];
                out[i] = (uint8_t)(v < lo_ ? ceil(lo_) : v > hi_ ? floor(hi_) : v);
            }
            rd->valid[k] = 1;
            rd->new_affine[k] = 0;
            continue;
        }
        int aff = c->parent->affine;
        rd->valid[k] = (uint8_t)fl_fuzz_mutate(&cp->menu, c->parent->px, c->parent->i0, cp->c,
                                               cp->h, cp->w, &aff, cp->alpha, cp->beta,
                                               cp->nonzero, cp->try_num, &r, out, rd->i0 + k * n,
                                               &rd->op[k], &memo);
        rd->new_affine[k] = (uint8_t)(aff && !c->parent->affine);
    }
    (void)tid;
}

fl_status fz_keep(fz_campaign *cp, int64_t pid, const uint8_t *px, const char *op,
                  const uint8_t *new_i0, const fl_xform *affine_t, fl_err *e) {
    const fz_entry *p = &cp->q.e[pid];
    fz_entry x = {.src = pid, .root = p->root, .seed_index = p->seed_index, .label = p->label,
                  .affine = p->affine, .affine_t = p->affine_t};
    size_t ol = strlen(p->ops);
    x.px = malloc((size_t)cp->n);
    x.ops = malloc(ol + strlen(op) + 2);
    if (new_i0) {
        x.affine = 1;
        x.affine_t = *affine_t;
        x.own_i0 = 1;
        x.i0 = malloc((size_t)cp->n);
        if (x.i0) memcpy(x.i0, new_i0, (size_t)cp->n);
    } else {
        x.i0 = p->i0;
    }
    if (!x.px || !x.ops || !x.i0) {
        free(x.px);
        free(x.ops);
        if (x.own_i0) free(x.i0);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (queue of %lld)", (long long)cp->q.n);
    }
    memcpy(x.px, px, (size_t)cp->n);
    snprintf(x.ops, ol + strlen(op) + 2, "%s%s%s", p->ops, ol ? " " : "", op);
    fl_status st = fz_queue_add(&cp->q, &x, e);
    if (st) {
        free(x.px);
        free(x.ops);
        if (x.own_i0) free(x.i0);
        return st;
    }
    cp->last_new = fl_now();
    return fz_out_entry(cp, cp->q.n - 1, op, e);
}

/* The child of slot `slot`: its pixels, reference (a new one after its affine step). */
static fl_status keep(fz_campaign *cp, fz_round *rd, int64_t pid, int slot, fl_err *e) {
    char op[64];
    fl_xform_str(&rd->op[slot], op, sizeof op);
    const int64_t off = (int64_t)slot * cp->n;
    return fz_keep(cp, pid, rd->px + off, op, rd->new_affine[slot] ? rd->i0 + off : NULL,
                   &rd->op[slot], e);
}

fl_status fz_round_evaluate(fz_campaign *cp, fz_round *rd, int B, int *nf, fl_err *e) {
    *nf = 0;
    if (B < 1) return FL_OK;
    fl_model *m = cp->o->model;
    const int64_t n = cp->n;
    for (int i = 0; i < B; i++) fz_to_input(cp, rd->px + (int64_t)rd->rows[i] * n, 1, rd->x.data + i * n);
    set_rows(&rd->x, cp, B);
    fl_status st = fl_model_forward(m, &rd->x, e);
    if (st) return st;
    const fl_tensor *y = fl_model_output(m, 0);
    const int K = (int)y->shape[1];
    int good = 0;
    for (int i = 0; i < B; i++) {
        const float *l = y->data + (int64_t)i * K;
        int fin = 1;
        for (int k = 0; k < K; k++) fin &= isfinite(l[k]) != 0;
        fz_verdict *v = &rd->v[i];
        v->pred2 = -1;
        if (!fin) {
            v->pred = -1;
            v->confidence = 0;
            continue;
        }
        v->pred = fz_argmax(l, K, &v->confidence);
        rd->finite[good++] = i;
    }
    if (cp->o->model2) {
        if ((st = fl_model_forward(cp->o->model2, &rd->x, e))) return st;
        const fl_tensor *y2 = fl_model_output(cp->o->model2, 0);
        for (int i = 0; i < B; i++) {
            const float *l = y2->data + (int64_t)i * K;
            int fin = 1;
            for (int k = 0; k < K; k++) fin &= isfinite(l[k]) != 0;
            rd->v[i].pred2 = fin ? fz_argmax(l, K, NULL) : rd->v[i].pred;
        }
    }
    *nf = good;
    memset(rd->added, 0, (size_t)B);
    if (good == 0) return FL_OK;
    if (good < B) { /* run the finite ones again, alone: coverage needs finite values */
        for (int i = 0; i < good; i++)
            memcpy(rd->x2.data + i * n, rd->x.data + (int64_t)rd->finite[i] * n, sizeof(float) * (size_t)n);
        set_rows(&rd->x2, cp, good);
        if ((st = fl_model_forward(m, &rd->x2, e))) return st;
    }
    return fl_coverset_update_model(cp->cov, m, rd->added, e);
}

fl_status fz_round_run(fz_round *rd, fz_campaign *cp, int *ran, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    int64_t pid = fz_queue_pick(&cp->q, &cp->rng, o->strategy == FL_FUZZ_RANDOM);
    const fz_entry *parent = &cp->q.e[pid];
    int P = power(cp, parent);
    /* streams are numbered by mutant slot made, not by execution: an invalid slot's stream
     * must not come back in the next round */
    mut_ctx mc = {cp, rd, parent, &cp->q.e[parent->root], (uint64_t)cp->slots};
    cp->slots += P;
    fl_parallel_for(P, mutate_range, &mc);
    int B = 0;
    for (int k = 0; k < P; k++)
        if (rd->valid[k]) rd->rows[B++] = k;
    *ran = B > 0;
    if (!B) return FL_OK;
    int nf;
    fl_status st = fz_round_evaluate(cp, rd, B, &nf, e);
    if (st) return st;
    /* novelty of the finite rows (tensorfuzz), sequential within the round */
    int d = 0;
    const float *nvv = NULL;
    if (o->strategy == FL_FUZZ_TENSORFUZZ && nf) {
        nvv = novelty_rows(cp, nf, &d);
        if ((st = fz_novelty_nearest(&cp->nv, nvv, nf, rd->dist, e))) return st;
    }
    int fi = 0, kept = 0;
    double now = fl_now();
    for (int i = 0; !st && i < B; i++) {
        fz_verdict *v = &rd->v[i];
        const int is_fin = fi < nf && rd->finite[fi] == i;
        const int row = is_fin ? fi++ : -1; /* its row among the finite ones */
        const fz_entry *p = &cp->q.e[pid];
        v->label = p->label;
        int failed = 1;
        if (v->pred < 0) v->oracle = FZ_OR_NONFINITE;
        else if (v->pred != v->label) v->oracle = FZ_OR_MISCLASS;
        else if (o->model2 && v->pred2 != v->pred) v->oracle = FZ_OR_DISAGREE;
        else failed = 0;
        const int slot = rd->rows[i];
        if (failed) {
            char op[64];
            fz_failure f = {v, p, &cp->q.e[p->root], rd->px + (int64_t)slot * cp->n,
                            rd->x.data + (int64_t)i * cp->n,
                            fl_xform_str(&rd->op[slot], op, sizeof op), cp->execs + i + 1,
                            cp->time_before + now - cp->t0};
            int is_new;
            st = fz_findings_add(cp, &f, &is_new, e);
            continue;
        }
        int take = 0;
        if (o->strategy == FL_FUZZ_DEEPHUNTER) {
            take = rd->added[row];
        } else if (o->strategy == FL_FUZZ_TENSORFUZZ) {
            const float *me = nvv + (int64_t)row * d;
            double best = rd->dist[row];
            /* against the round's earlier kept vectors, which joined the corpus already */
            for (int64_t j = cp->nv.n - kept; j < cp->nv.n; j++) {
                double s = 0;
                for (int t = 0; t < d; t++) {
                    double df = (double)me[t] - cp->nv.v[j * d + t];
                    s += df * df;
                }
                if (sqrt(s) < best) best = sqrt(s);
            }
            take = best > o->tf_threshold;
            if (take && !(st = fz_novelty_add(&cp->nv, me, e))) kept++;
        }
        if (take && !st) st = keep(cp, rd, pid, slot, e);
    }
    cp->execs += B;
    return st;
}
