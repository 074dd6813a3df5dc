/* The campaign's queue and how the next entry to fuzz is chosen.
 *
 * Selection policies (fuzz.h): uniform; tensorfuzz (TensorFuzz's sampler: one of the five
 * newest entries or, one time in six, any entry); deeptest (DeepTest: the newest entry not yet
 * fuzzed, then uniform); prob (DeepHunter's batch prioritisation with NeuraL-Coverage's
 * gamma 5, p_min 0.01: an entry fuzzed B_c times has priority 1 - B_c/gamma while
 * B_c < (1 - p_min) * gamma, else p_min); fifo (DLFuzz's list of images to process: the
 * oldest entry not fuzzed yet, then uniform).
 *
 * prob keeps the entries in buckets by fuzz count. Every entry of a bucket has the same
 * priority, so a pick costs O(buckets) instead of a pass over 10^5 entries.
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
    fz_entry *x = &q->e[q->n];
    *x = *ent;
    x->id = q->n;
    int b = bucket_of(q, x->fuzzed);
    x->bucket_pos = q->bucket_n[b];
    if (push(&q->bucket[b], &q->bucket_n[b], &q->bucket_cap[b], x->id) ||
        (x->fuzzed == 0 && push(&q->fresh, &q->n_fresh, &q->cap_fresh, x->id)))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    q->n++;
    return FL_OK;
}

/* Move entry id from its bucket to the next one after a pick. */
static void bump(fz_queue *q, int64_t id) {
    fz_entry *x = &q->e[id];
    int b = bucket_of(q, x->fuzzed), nb = bucket_of(q, x->fuzzed + 1);
    x->fuzzed++;
    if (b == nb) return;
    int64_t last = q->bucket[b][--q->bucket_n[b]];
    q->bucket[b][x->bucket_pos] = last;
    q->e[last].bucket_pos = x->bucket_pos;
    x->bucket_pos = q->bucket_n[nb];
    /* push cannot fail here in practice only if memory runs out; then the entry simply stays
     * counted in no bucket and is never picked by prob again. */
    (void)push(&q->bucket[nb], &q->bucket_n[nb], &q->bucket_cap[nb], id);
}

static int64_t pick_prob(fz_queue *q, fl_rng *r) {
    double total = 0;
    for (int b = 0; b < q->n_buckets; b++) total += (double)q->bucket_n[b] * priority(q, b);
    double u = fl_rng_uniform(r) * total;
    for (int b = 0; b < q->n_buckets; b++) {
        double w = (double)q->bucket_n[b] * priority(q, b);
        if (q->bucket_n[b] && (u < w || b == q->n_buckets - 1 || w == total)) {
            int64_t i = (int64_t)(u / priority(q, b));
            if (i >= q->bucket_n[b]) i = q->bucket_n[b] - 1;
            return q->bucket[b][i];
        }
        u -= w;
    }
    for (int b = q->n_buckets - 1; b >= 0; b--) /* rounding: the last non-empty bucket */
        if (q->bucket_n[b]) return q->bucket[b][q->bucket_n[b] - 1];
    return 0;
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
    bump(q, id);
    return id;
}
