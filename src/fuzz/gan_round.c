/* fuzzgan's round: FuzzGAN's Algorithm 1, k cases at a time.
 *
 *   1. the neuron-coverage tracker (the campaign's guide, an NC criterion over the layer set
 *      the generator was trained on) gives the uncovered neurons; each case targets one of
 *      them at random, with a random class c (once every neuron is covered: any neuron);
 *   2. the generator makes the k images in one pass; they are rounded to 8-bit pixels, as
 *      every campaign's inputs are (fuzz.h);
 *   3. one batched forward pass of the model, the coverage update, the oracles (the expected
 *      class is c);
 *   4. a case is kept (queued) when it added coverage or when the model got c wrong; a
 *      failing case is also a finding, its own lineage root (no seed was mutated).
 * The campaign stops at the target coverage or the suite size (campaign.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/gan.h"
#include "fuzz/round.h"

fl_status fz_gan_check(fz_campaign *cp, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    fl_gan *gen = o->gen;
    if (!gen) return fl_fail(e, FL_ERR_ARG, "--strategy fuzzgan needs a generator (--gen)");
    if (strncmp(o->criterion, "nc", 2) || (o->criterion[2] && o->criterion[2] != ':'))
        return fl_fail(e, FL_ERR_ARG, "fuzzgan's tracker picks uncovered neurons: its criterion "
                       "must be nc[:T[:MODE]] (FuzzGAN uses nc:0.6:meanabs), not %s",
                       o->criterion);
    return fl_gan_check_model(gen, o->model, cp->ls, o->model_path, e);
}

/* A generated case as a queue entry of its own lineage: no parent, no seed. */
static fl_status queue_case(fz_campaign *cp, const uint8_t *px, int32_t label, int64_t neuron,
                            fl_err *e) {
    fz_entry x = {.src = -1, .root = cp->q.n, .seed_index = -1, .label = label};
    char ops[64];
    snprintf(ops, sizeof ops, "gen:c%d,n%lld", label, (long long)neuron);
    x.px = malloc((size_t)cp->n);
    x.ops = strdup(ops);
    if (!x.px || !x.ops) {
        free(x.px);
        free(x.ops);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (queue of %lld)", (long long)cp->q.n);
    }
    memcpy(x.px, px, (size_t)cp->n);
    x.i0 = x.px;
    fl_status st = fz_queue_add(&cp->q, &x, e);
    if (st) {
        free(x.px);
        free(x.ops);
        return st;
    }
    cp->last_new = fl_now();
    return fz_out_entry(cp, cp->q.n - 1, NULL, e);
}

fl_status fz_gan_round(fz_round *rd, fz_campaign *cp, int *ran, fl_err *e) {
    fl_gan *gen = cp->o->gen;
    int k = cp->k < rd->cap ? cp->k : rd->cap;
    /* never more cases than the suite has room for: every case generated is judged, and the
     * coverage reported is that of the suite's cases and the rejected ones before them */
    if (cp->o->max_suite > 0 && cp->o->max_suite - cp->q.n < k) k = (int)(cp->o->max_suite - cp->q.n);
    const fl_cover *guide = cp->cov->c[0];
    int64_t T = cp->ls->total, n_open = 0;
    int64_t *open = malloc(sizeof(int64_t) * (size_t)T);
    int32_t *cls = malloc(sizeof(int32_t) * (size_t)k);
    int64_t *neu = malloc(sizeof(int64_t) * (size_t)k);
    fl_status st = open && cls && neu ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; !st && j < T; j++)
        if (!fl_cover_is_hit(guide, j)) open[n_open++] = j;
    for (int i = 0; !st && i < k; i++) {
        cls[i] = (int32_t)fl_rng_below(&cp->rng, (uint32_t)gen->n_classes);
        neu[i] = n_open ? open[fl_rng_below(&cp->rng, (uint32_t)n_open)]
                        : (int64_t)fl_rng_below(&cp->rng, (uint32_t)T);
    }
    if (!st && cp->gan_img.data && cp->gan_img.shape[0] != k) fl_tensor_free(&cp->gan_img);
    if (!st) st = fl_gan_generate(gen, k, cls, neu, &cp->rng, &cp->gan_img, e);
    for (int64_t i = 0; !st && i < (int64_t)k * cp->n; i++) {
        float v = roundf(cp->gan_img.data[i] * 255.0f);
        rd->px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    for (int i = 0; i < k; i++) rd->rows[i] = i;
    int nf = 0;
    if (!st) st = fz_round_evaluate(cp, rd, k, &nf, e);
    int fi = 0;
    double now = fl_now();
    for (int i = 0; !st && i < k; i++) {
        fz_verdict *v = &rd->v[i];
        const int is_fin = fi < nf && rd->finite[fi] == i;
        const int row = is_fin ? fi++ : -1;
        v->label = cls[i];
        int failed = 1;
        if (v->pred < 0) v->oracle = FZ_OR_NONFINITE;
        else if (v->pred != v->label) v->oracle = FZ_OR_MISCLASS;
        else if (cp->o->model2 && v->pred2 != v->pred) v->oracle = FZ_OR_DISAGREE;
        else failed = 0;
        const uint8_t *px = rd->px + (int64_t)i * cp->n;
        if (!failed && !(row >= 0 && rd->added[row])) continue;
        if ((st = queue_case(cp, px, cls[i], neu[i], e)) || !failed) continue;
        const fz_entry *self = &cp->q.e[cp->q.n - 1];
        fz_failure f = {v, self, self, px, rd->x.data + (int64_t)i * cp->n, "fuzzgan",
                        cp->execs + i + 1, cp->time_before + now - cp->t0};
        int is_new;
        st = fz_findings_add(cp, &f, &is_new, e);
    }
    cp->execs += k;
    *ran = 1;
    free(open);
    free(cls);
    free(neu);
    return st;
}
