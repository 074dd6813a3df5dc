/* The campaign's queue and how the next entry to fuzz is chosen.
 *
 * Selection policies (fuzz.h): uniform; tensorfuzz (TensorFuzz's sampler: one of the five
 * newest entries or, one time in six, any entry); deeptest (DeepTest: the newest entry not yet
 * fuzzed, then uniform); prob (DeepHunter's batch prioritisation with NeuraL-Coverage's
 * gamma 5, p_min 0.01: a batch fuzzed B_c times has priority 1 - B_c/gamma while
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
 * prob walks the batches in queue order, as DeepHunter's released prob_next does: a cursor
 * goes round the queue and takes the batch under it with its priority, else moves on. This
 * is AFL's queue cycle (each cycle visits every entry once, in order; AFL skips the ones it
 * does not favour with a fixed probability): a batch never fuzzed has priority 1, so every
 * seed is fuzzed once before any is fuzzed again, and a batch a round adds waits for the
 * cursor instead of competing at once. Drawing a batch by weight from the whole queue
 * (NeuraL-Coverage's SelectNext, flare until 2026-12-06) lets each round's fresh batch of
 * priority 1 be drawn next, ahead of the seeds not fuzzed yet: lineages went deep while seeds
 * waited (kmnc, 20 000 mutants: 9 of 82 seeds never fuzzed, docs/nn-fuzz.md).
 */
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
    if (!(gamma > 0) || !(p_min >= 0 && p_min <= 1))
        return fl_fail(e, FL_ERR_ARG, "prob selection: gamma %g, p_min %g give no usable priorities",
                       gamma, p_min);
    return FL_OK;
}

void fz_queue_free(fz_queue *q) {
    for (int64_t i = 0; i < q->n; i++) {
        if (q->e[i].own_i0) free(q->e[i].i0);
        free(q->e[i].px);
        free(q->e[i].ops);
    }
    free(q->e);
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
        *b = (struct fz_batch){.first = q->n};
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

/* A batch as DeepHunter's prob_next takes it: the cursor's, with its priority, else the
 * next one, round the queue; then one of its entries uniformly. A batch never fuzzed is
 * always taken (priority 1), so a cycle fuzzes every batch it reaches fresh. With p_min 0
 * every batch can reach priority 0: after a whole turn of those the cursor's is taken. */
static int64_t pick_prob(fz_queue *q, fl_rng *r) {
    int64_t k = 0;
    int positive = 0;
    if (!q->n_b) return 0; /* no seed: the campaign refuses to start (campaign.c) */
    for (int64_t step = 1;; step++) {
        if (q->cursor >= q->n_b) q->cursor = 0;
        k = q->cursor++;
        double p = priority(q, q->b[k].fuzzed);
        positive |= p > 0;
        if (p >= 1 || fl_rng_uniform(r) < p || (step >= q->n_b && !positive)) break;
    }
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
    q->b[q->e[id].batch].fuzzed++;
    return id;
}
