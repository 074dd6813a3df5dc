/* The queue and its power schedules: which entry to fuzz next, and how many children to make
 * of it (its energy). docs/agents-campaign.md discusses the choices; in short:
 *
 *   explore  AFL++'s idea in its "explore"/"fast" schedules (Böhme et al., "Coverage-based
 *            Greybox Fuzzing as Markov Chain", CCS 2016): spend effort where the fuzzer has
 *            been least, i.e. on entries that were picked rarely and whose behaviour path
 *            few executions have followed, weighted by how much new coverage the entry
 *            brought when it was kept. score = (1 + log2(1 + n_new)) * (2 if it added a
 *            feature) / sqrt(1 + picks) / sqrt(hits of its path).
 *   exploit  the opposite bet: an entry whose children were often kept or failed is likely
 *            to keep producing. score = 1 + kept + 4 * finds (picks do not wear it out).
 *   none     no feedback at all: seeds only, uniformly, constant energy.
 *
 * Selection is roulette-wheel over the scores (O(n) per pick; a pick starts a batch of
 * `energy` executions, so this is noise next to running the target), and the energy is the
 * base energy scaled by score / mean score, clamped to [2, 64]: a favoured entry gets both
 * more picks and longer batches, as AFL's perf_score does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/campaign_int.h"
#include "flare/agcov.h"

enum { Q_BASE_ENERGY = 8, Q_MIN_ENERGY = 2, Q_MAX_ENERGY = 64 };

fl_status q_init(q_queue *q, fl_schedule s, fl_err *e) {
    memset(q, 0, sizeof *q);
    q->sched = s;
    q->path_hits = calloc((size_t)1 << Q_PATH_BITS, sizeof *q->path_hits);
    return q->path_hits ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "queue: out of memory");
}

void q_free(q_queue *q) {
    for (int i = 0; i < q->n; i++) {
        fl_case_free(q->e[i]->c);
        free(q->e[i]);
    }
    free(q->e);
    free(q->path_hits);
    memset(q, 0, sizeof *q);
}

q_entry *q_add(q_queue *q, fl_case *c, int src, int n_new, int new_features, uint64_t path) {
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        q_entry **v = realloc(q->e, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        q->e = v, q->cap = cap;
    }
    q_entry *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->id = q->n;
    x->c = c;
    x->src = src;
    x->depth = src >= 0 && src < q->n ? q->e[src]->depth + 1 : 0;
    x->n_new = n_new;
    x->new_features = new_features;
    x->path = path;
    q->e[q->n++] = x;
    if (src < 0) q->n_seeds++;
    return x;
}

void q_hit(q_queue *q, uint64_t path) {
    uint32_t *h = &q->path_hits[path & ((1u << Q_PATH_BITS) - 1)];
    if (*h < UINT32_MAX) (*h)++;
}

static double score(const q_queue *q, const q_entry *x) {
    switch (q->sched) {
    case FL_SCHED_EXPLORE: {
        double hits = q->path_hits[x->path & ((1u << Q_PATH_BITS) - 1)];
        double s = (1 + log2(1 + (double)x->n_new)) * (x->new_features ? 2 : 1);
        return s / sqrt(1 + (double)x->picks) / sqrt(hits > 1 ? hits : 1);
    }
    case FL_SCHED_EXPLOIT: return 1 + (double)x->kept + 4 * (double)x->finds;
    case FL_SCHED_NONE: break;
    }
    return 1;
}

q_entry *q_pick(q_queue *q, fl_rng *r, int *energy) {
    /* "none" fuzzes the seeds only, even when entries were added (a resumed folder). */
    int n = q->sched == FL_SCHED_NONE && q->n_seeds > 0 ? q->n_seeds : q->n;
    if (n == 0) return NULL;
    double total = 0;
    for (int i = 0; i < n; i++) total += score(q, q->e[i]);
    double u = fl_rng_uniform(r) * total, acc = 0;
    q_entry *x = q->e[n - 1];
    for (int i = 0; i < n; i++) {
        acc += score(q, q->e[i]);
        if (u < acc) {
            x = q->e[i];
            break;
        }
    }
    double en = Q_BASE_ENERGY;
    if (q->sched != FL_SCHED_NONE && total > 0) en *= score(q, x) / (total / n);
    *energy = en < Q_MIN_ENERGY ? Q_MIN_ENERGY : en > Q_MAX_ENERGY ? Q_MAX_ENERGY : (int)en;
    x->picks++;
    return x;
}

q_entry *q_other(const q_queue *q, fl_rng *r, const q_entry *not_this) {
    int n = q->sched == FL_SCHED_NONE && q->n_seeds > 0 ? q->n_seeds : q->n;
    if (n < 2) return NULL;
    int i = (int)fl_rng_below(r, (uint32_t)(n - 1));
    if (q->e[i] == not_this) i = n - 1;
    return q->e[i];
}

static uint64_t h_opt(uint64_t h, const char *s) { return fl_aghash_str(h, s ? s : ""); }

uint64_t q_path_hash(const fl_trace *t) {
    uint64_t h = fl_aghash_u64(FL_AGHASH_INIT, (uint64_t)t->exit);
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        h = fl_aghash_u64(h, (uint64_t)ev->kind);
        switch (ev->kind) {
        case FL_EV_MESSAGE: h = h_opt(h_opt(h, ev->agent), ev->to); break;
        case FL_EV_TOOL_CALL: h = h_opt(h_opt(h, ev->agent), ev->tool); break;
        case FL_EV_TOOL_RESULT: h = fl_aghash_u64(h_opt(h_opt(h, ev->agent), ev->tool), (uint64_t)ev->ok); break;
        case FL_EV_BRANCH: h = h_opt(h_opt(h_opt(h, ev->agent), ev->point), ev->choice); break;
        case FL_EV_ERROR: h = h_opt(h, ev->agent); break;
        default: break;
        }
    }
    return fl_aghash_final(fl_aghash_u64(h, (uint64_t)(t->n_protocol > 0)));
}
