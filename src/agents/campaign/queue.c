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
 * Favored entries (AFL's cull_queue): for every coverage-map entry the cheapest queue entry
 * touching it (fewest bytes; not time, which would make a campaign depend on the machine) is
 * its "top rated"; a greedy pass over the map entries in the order they were first seen picks
 * top-rated entries until every entry is covered. That small set holds all the coverage
 * reached so far; explore weighs non-favored entries 1/20 (AFL skips them 95-99% of the time),
 * so a queue grown to hundreds of near-duplicates still spends its effort on the entries that
 * alone reach some behaviour (a two-turn case, a rare tool).
 *
 * Selection is roulette-wheel over the scores (O(n) per pick; a pick starts a batch of
 * `energy` executions, so this is noise next to running the target), and the energy is the
 * base energy scaled by score / mean score, clamped to [2, 64]: a favoured entry gets both
 * more picks and longer batches, as AFL's perf_score does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/agcov.h"

enum { Q_BASE_ENERGY = 8, Q_MIN_ENERGY = 2, Q_MAX_ENERGY = 64 };
#define Q_BAD_MIN 8       /* children (real or inherited) before an entry's record counts */
#define Q_BAD_FLOOR 0.05

fl_status q_init(q_queue *q, fl_schedule s, fl_err *e) {
    memset(q, 0, sizeof *q);
    q->sched = s;
    q->path_hits = calloc((size_t)1 << Q_PATH_BITS, sizeof *q->path_hits);
    q->top = calloc(FL_AGCOV_MAP_SIZE, sizeof *q->top);
    if (q->path_hits && q->top) return FL_OK;
    q_free(q);
    return fl_fail(e, FL_ERR_NOMEM, "queue: out of memory");
}

void q_free(q_queue *q) {
    for (int i = 0; i < q->n; i++) {
        fl_case_free(q->e[i]->c);
        fl_case_free(q->e[i]->untrimmed);
        free(q->e[i]->feat);
        free(q->e[i]);
    }
    free(q->e);
    free(q->path_hits);
    free(q->top);
    free(q->seen);
    memset(q, 0, sizeof *q);
}

q_entry *q_add(q_queue *q, fl_case *c, int src, int n_new, int new_features, uint64_t path,
               const uint32_t *feat, int n_feat) {
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        q_entry **v = realloc(q->e, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        q->e = v, q->cap = cap;
    }
    if (q->n_seen + n_feat > q->cap_seen) {
        int cap = 2 * (q->n_seen + n_feat) + 64;
        uint32_t *v = realloc(q->seen, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        q->seen = v, q->cap_seen = cap;
    }
    q_entry *x = calloc(1, sizeof *x);
    if (!x || (n_feat && !(x->feat = malloc((size_t)n_feat * sizeof *x->feat)))) {
        free(x);
        return NULL;
    }
    x->id = q->n;
    x->c = c;
    x->src = src;
    x->depth = src >= 0 && src < q->n ? q->e[src]->depth + 1 : 0;
    if (src >= 0 && src < q->n) { /* its parent's record, as up to Q_BAD_MIN pseudo-children */
        const q_entry *p = q->e[src];
        double n = (double)p->children + p->prior_n;
        double k = n < Q_BAD_MIN ? n : Q_BAD_MIN;
        if (n > 0) {
            x->prior_n = k;
            x->prior_bad = ((double)p->bad + p->prior_bad) / n * k;
            x->prior_ms = (p->child_ms + p->prior_ms) / n * k;
        }
    }
    x->n_new = n_new;
    x->new_features = new_features;
    x->path = path;
    x->n_feat = n_feat;
    if (n_feat) memcpy(x->feat, feat, (size_t)n_feat * sizeof *feat);
    x->cost = fl_case_bytes(c);
    q->e[q->n++] = x;
    if (src < 0) q->n_seeds++;
    for (int i = 0; i < n_feat; i++) { /* become the top-rated entry where cheaper */
        uint32_t k = feat[i] & (FL_AGCOV_MAP_SIZE - 1);
        if (!q->top[k]) q->seen[q->n_seen++] = k;
        if (!q->top[k] || x->cost < q->top[k]->cost) q->top[k] = x, q->dirty = 1;
    }
    return x;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t q_cov_sig(const fl_agfeature *fv, int nf, int exit) {
    uint64_t *k = nf > 0 ? malloc((size_t)nf * sizeof *k) : NULL;
    uint64_t h = fl_aghash_u64(FL_AGHASH_INIT, (uint64_t)exit);
    if (nf > 0 && !k) return 0; /* out of memory: no trim will match */
    for (int i = 0; i < nf; i++) k[i] = (uint64_t)fv[i].index << 8 | fv[i].bucket;
    if (nf > 0) qsort(k, (size_t)nf, sizeof *k, cmp_u64);
    for (int i = 0; i < nf; i++) h = fl_aghash_u64(h, k[i]);
    free(k);
    return fl_aghash_final(h) | 1; /* never 0 */
}

void q_retrim(q_queue *q, q_entry *x, fl_case *c) {
    x->untrimmed = x->c;
    x->c = c;
    x->cost = fl_case_bytes(c);
    for (int i = 0; i < x->n_feat; i++) {
        uint32_t k = x->feat[i] & (FL_AGCOV_MAP_SIZE - 1);
        if (q->top[k] != x && x->cost < q->top[k]->cost) q->top[k] = x, q->dirty = 1;
    }
}

/* The greedy minimal cover: AFL's cull_queue over the map entries in first-seen order. */
static void cull(q_queue *q) {
    uint8_t *covered = calloc(FL_AGCOV_MAP_SIZE, 1);
    if (!covered) return; /* out of memory: keep the old favored set */
    for (int i = 0; i < q->n; i++) q->e[i]->favored = 0;
    q->n_favored = 0;
    for (int i = 0; i < q->n_seen; i++) {
        q_entry *t = q->top[q->seen[i]];
        if (covered[q->seen[i]] || !t || t->favored) continue;
        t->favored = 1;
        q->n_favored++;
        for (int k = 0; k < t->n_feat; k++) covered[t->feat[k] & (FL_AGCOV_MAP_SIZE - 1)] = 1;
    }
    free(covered);
    q->dirty = 0;
}

void q_hit(q_queue *q, uint64_t path) {
    uint32_t *h = &q->path_hits[path & ((1u << Q_PATH_BITS) - 1)];
    if (*h < UINT32_MAX) (*h)++;
}

void q_child(q_queue *q, q_entry *parent, int bad, double cost) {
    parent->children++, q->children++;
    parent->child_ms += cost, q->child_ms += cost;
    if (bad) parent->bad++, q->bad++;
}

/* Hang-prone entries lose energy. Once an entry has Q_BAD_MIN children, its score is scaled
 * by the smaller of two ratios (at least Q_BAD_FLOOR, at most 1):
 *   - the campaign's crash/timeout rate over the entry's (+0.01 each: an average of 0 does
 *     not punish one unlucky child);
 *   - the cost of a child that ends normally (1) over the entry's mean cost per child (AFL's
 *     perf_score does the same with execution time; a timeout counts Q_HANG_COST cases, a
 *     constant so that the campaign stays deterministic). The reference is a normal case, not
 *     the campaign's mean: where most entries' mutants hang, the mean is itself mostly hangs
 *     and a relative rule punishes nobody, while each timeout still costs Q_HANG_COST cases of
 *     wall time. The score sets both how often an entry is picked and its energy, so the time
 *     an entry gets falls about as 1 / its cost.
 * A kept child starts with its parent's record as up to Q_BAD_MIN pseudo-children (a
 * Bayesian prior): the mutants of a hang-prone entry's children hang as often as its own, and
 * without the prior every new entry of such a lineage got full energy for its first
 * Q_BAD_MIN children. The finding such children lead to was saved the first time (its
 * signature); the time share this saves is in docs/agents-campaign.md ("Timeouts"). */
static double bad_factor(const q_queue *q, const q_entry *x) {
    double n = (double)x->children + x->prior_n;
    if (n < Q_BAD_MIN || !q->children) return 1;
    double rate = ((double)x->bad + x->prior_bad) / n;
    double avg = (double)q->bad / (double)q->children;
    double f = rate > avg ? (avg + 0.01) / (rate + 0.01) : 1;
    double cost = (x->child_ms + x->prior_ms) / n;
    if (cost > 1) f = fmin(f, 1 / cost);
    return f < Q_BAD_FLOOR ? Q_BAD_FLOOR : f > 1 ? 1 : f;
}

static double score(const q_queue *q, const q_entry *x) {
    switch (q->sched) {
    case FL_SCHED_EXPLORE: {
        double hits = q->path_hits[x->path & ((1u << Q_PATH_BITS) - 1)];
        double s = (1 + log2(1 + (double)x->n_new)) * (x->new_features ? 2 : 1) *
                   (x->favored || !q->n_favored ? 1 : 0.05) * bad_factor(q, x);
        return s / sqrt(1 + (double)x->picks) / sqrt(hits > 1 ? hits : 1);
    }
    case FL_SCHED_EXPLOIT: return (1 + (double)x->kept + 4 * (double)x->finds) * bad_factor(q, x);
    case FL_SCHED_NONE: break;
    }
    return 1;
}

q_entry *q_pick(q_queue *q, fl_rng *r, int *energy) {
    /* "none" fuzzes the seeds only, even when entries were added (a resumed folder). */
    int n = q->sched == FL_SCHED_NONE && q->n_seeds > 0 ? q->n_seeds : q->n;
    if (n == 0) return NULL;
    if (q->dirty) cull(q);
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
