/* The campaign's queue and how the next entry to fuzz is chosen.
 *
 * Selection policies (fuzz.h): uniform; tensorfuzz (TensorFuzz's sampler: one of the five
 * newest entries or, one time in six, any entry); deeptest (DeepTest: the newest entry not yet
 * fuzzed, then uniform); prob (DeepHunter's batch prioritisation with NeuraL-Coverage's
 * gamma 5, p_min 0.01: an entry fuzzed B_c times has priority 1 - B_c/gamma while
 * B_c < (1 - p_min) * gamma, else p_min); fifo (DLFuzz's list of images to process: the
 * oldest entry not fuzzed yet, then uniform).
 *
 * prob works on batches (fuzz_int.h): a seed is a batch, and so are the mutants one round
 * kept. DeepHunter's Algorithm 1 adds a round's survivors to the queue as one batch and
 * prioritises batches; NeuraL-Coverage's fuzz.py does the same (`Bs += [B_new]`, one B_c per
 * batch). Counting every kept mutant as its own element instead lets each round add as
 * many fresh, top-priority elements as it kept: with kmnc, which keeps most mutants, the
 * seeds were drowned (measured: 19 of 82 seeds ever fuzzed in 20 000 mutants).
 *
 * prob keeps the batches in buckets by fuzz count. Every batch of a bucket has the same
 * priority, so a pick costs O(buckets) instead of a pass over 10^5 batches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_int.h"

static double priority(const fz_queue *q, int64_t fuzzed) {
    if ((double)fuzzed < (1 - q->p_min) * q->gamma) return 1 - (double)fuzzed / q->gamma;
    return q->p_min;
}

fl_status fz_queue_init(fz_queue *q, fl_fuzz_select sel, double gamma, double p_min, fl_err *e) {
    memset(q, 0, sizeof *q);
    q->sel = sel;
    q->gamma = gamma;
    q->p_min = p_min;
    /* bucket b < last holds entries fuzzed exactly b times; the last one all the others,
     * which share p_min. */
    q->n_buckets = (int)ceil((1 - p_min) * gamma) + 1;
    if (q->n_buckets < 1 || q->n_buckets > 100000)
        return fl_fail(e, FL_ERR_ARG, "prob selection: gamma %g, p_min %g give no usable priorities",
                       gamma, p_min);
    q->bucket = calloc((size_t)q->n_buckets, sizeof *q->bucket);
    q->bucket_n = calloc((size_t)q->n_buckets, sizeof *q->bucket_n);
    q->bucket_cap = calloc((size_t)q->n_buckets, sizeof *q->bucket_cap);
    if (!q->bucket || !q->bucket_n || !q->bucket_cap) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return FL_OK;
}

void fz_queue_free(fz_queue *q) {
    for (int64_t i = 0; i < q->n; i++) {
        if (q->e[i].own_i0) free(q->e[i].i0);
        free(q->e[i].px);
        free(q->e[i].ops);
    }
    free(q->e);
    for (int b = 0; q->bucket && b < q->n_buckets; b++) free(q->bucket[b]);
    free(q->bucket);
    free(q->bucket_n);
    free(q->bucket_cap);
    free(q->b);
    free(q->fresh);
    memset(q, 0, sizeof *q);
}

static int push(int64_t **v, int64_t *n, int64_t *cap, int64_t x) {
    if (*n == *cap) {
        int64_t c = *cap ? *cap * 2 : 64;
        int64_t *p = realloc(*v, sizeof **v * (size_t)c);
        if (!p) return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int bucket_of(const fz_queue *q, int64_t fuzzed) {
    return fuzzed < q->n_buckets - 1 ? (int)fuzzed : q->n_buckets - 1;
}

fl_status fz_queue_add(fz_queue *q, const fz_entry *ent, fl_err *e) {
    if (q->n == q->cap) {
        int64_t c = q->cap ? q->cap * 2 : 256;
        fz_entry *p = realloc(q->e, sizeof *p * (size_t)c);
        if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory (queue of %lld)", (long long)q->n);
        q->e = p;
        q->cap = c;
    }
    if (!q->open) {
        if (q->n_b == q->cap_b) {
            int64_t c = q->cap_b ? q->cap_b * 2 : 256;
            struct fz_batch *p = realloc(q->b, sizeof *p * (size_t)c);
            if (!p) return fl_fail(e, FL_ERR_NOMEM, "out of memory (queue of %lld)", (long long)q->n);
            q->b = p;
            q->cap_b = c;
        }
        struct fz_batch *b = &q->b[q->n_b];
        *b = (struct fz_batch){.first = q->n, .bucket_pos = q->bucket_n[0]};
        if (push(&q->bucket[0], &q->bucket_n[0], &q->bucket_cap[0], q->n_b))
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        q->n_b++;
        q->open = 1;
    }
    fz_entry *x = &q->e[q->n];
    *x = *ent;
    x->id = q->n;
    x->batch = q->n_b - 1;
    if (x->fuzzed == 0 && push(&q->fresh, &q->n_fresh, &q->cap_fresh, x->id))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    q->b[x->batch].n++;
    q->n++;
    return FL_OK;
}

void fz_queue_seal(fz_queue *q) { q->open = 0; }

/* Move batch k from its bucket to the next one after a pick of one of its entries. */
static void bump(fz_queue *q, int64_t k) {
    struct fz_batch *x = &q->b[k];
    int b = bucket_of(q, x->fuzzed), nb = bucket_of(q, x->fuzzed + 1);
    x->fuzzed++;
    if (b == nb) return;
    int64_t last = q->bucket[b][--q->bucket_n[b]];
    q->bucket[b][x->bucket_pos] = last;
    q->b[last].bucket_pos = x->bucket_pos;
    x->bucket_pos = q->bucket_n[nb];
    /* push cannot fail here in practice only if memory runs out; then the batch simply stays
     * counted in no bucket and is never picked by prob again. */
    (void)push(&q->bucket[nb], &q->bucket_n[nb], &q->bucket_cap[nb], k);
}

/* A batch by priority, then one of its entries uniformly. */
static int64_t pick_prob(fz_queue *q, fl_rng *r) {
    double total = 0;
    for (int b = 0; b < q->n_buckets; b++) total += (double)q->bucket_n[b] * priority(q, b);
    double u = fl_rng_uniform(r) * total;
    int64_t k = -1;
    for (int b = 0; k < 0 && b < q->n_buckets; b++) {
        double w = (double)q->bucket_n[b] * priority(q, b);
        if (q->bucket_n[b] && (u < w || b == q->n_buckets - 1 || w == total)) {
            int64_t i = (int64_t)(u / priority(q, b));
            k = q->bucket[b][i < q->bucket_n[b] ? i : q->bucket_n[b] - 1];
        }
        u -= w;
    }
    for (int b = q->n_buckets - 1; k < 0 && b >= 0; b--) /* rounding: the last non-empty bucket */
        if (q->bucket_n[b]) k = q->bucket[b][q->bucket_n[b] - 1];
    if (k < 0) return 0;
    const struct fz_batch *x = &q->b[k];
    return x->first + (x->n > 1 ? (int64_t)fl_rng_below(r, (uint32_t)x->n) : 0);
}

int64_t fz_queue_pick(fz_queue *q, fl_rng *r, int only_seeds) {
    int64_t id;
    if (only_seeds) {
        id = fl_rng_below(r, (uint32_t)q->n_seeds);
    } else {
        switch (q->sel) {
        case FL_QSEL_TENSORFUZZ: {
            uint32_t k = fl_rng_below(r, 6);
            id = k < 5 && (int64_t)k < q->n ? q->n - 1 - k : (int64_t)fl_rng_below(r, (uint32_t)q->n);
            break;
        }
        case FL_QSEL_DEEPTEST:
            while (q->n_fresh && q->e[q->fresh[q->n_fresh - 1]].fuzzed) q->n_fresh--;
            id = q->n_fresh ? q->fresh[--q->n_fresh] : (int64_t)fl_rng_below(r, (uint32_t)q->n);
            break;
        case FL_QSEL_PROB: id = pick_prob(q, r); break;
        case FL_QSEL_FIFO:
            while (q->fifo < q->n && q->e[q->fifo].fuzzed) q->fifo++;
            id = q->fifo < q->n ? q->fifo : (int64_t)fl_rng_below(r, (uint32_t)q->n);
            break;
        default: id = fl_rng_below(r, (uint32_t)q->n); break;
        }
    }
    q->e[id].fuzzed++;
    bump(q, q->e[id].batch);
    return id;
}
