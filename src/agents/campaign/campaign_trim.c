/* The campaign's trim (AFL's trim_case): a kept child is made as short as its coverage allows
 * before it is fuzzed, so that lineages do not snowball (havoc grows cases: a duplicated
 * sentence, pasted text, a long run of one word), and the queue keeps cheap representatives
 * whose mutants cost little to run. When an entry is first picked, parts of its turns are
 * removed (shrink.c: turns, sentences, words, halving the chunk size) and each candidate is
 * run; a removal is kept when the trace gives the same coverage signature the entry was kept
 * for (q_cov_sig: the same map entries and hit-count buckets, ending the same way). At most
 * trim_execs runs per entry (FL_CAMPAIGN_TRIM_EXECS), counted in execs_done and in -E, and
 * in fuzzer_stats as execs_trim (AFL++ counts its trim runs in its stage statistics).
 *
 * AFL trims every entry, and there the trim is a small part of what an entry costs: thousands
 * of havoc runs follow it. Here an entry's batch is 2 to 64 children and each run is a whole
 * conversation with the system, so trimming every kept child took about a fifth of a 3 000-run
 * campaign. Trimming therefore takes at most FL_CAMPAIGN_TRIM_SHARE percent of the executions
 * done so far (camp_trim_budget); an entry picked while that share is spent is fuzzed as it
 * is and trimmed at a later pick. Often-picked entries (the favoured ones) are thus trimmed
 * first.
 *
 * Trim runs are not judged by the oracles and do not touch the coverage map: they only compare.
 * Everything depends on the target's behaviour alone, so a campaign stays a function of -s.
 *
 * Threads: the trim runs on the picking worker's target without the lock; the entry's case is
 * replaced under the lock at the end, and the old one lives on until the queue is freed, in
 * case another worker is mutating it. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"

typedef struct tctx {
    camp *cp;
    q_entry *x;
    fl_target *t;
    fl_trace *tr;
    fl_rng *trace_rng;
    int runs, max;
} tctx;

/* camp_shrink's test: the candidate gives the entry's coverage signature. */
static int same_cov(void *ctx, const fl_case *c) {
    tctx *m = ctx;
    camp *cp = m->cp;
    fl_err e = {0};
    if (m->runs >= m->max) return -1;
    pthread_mutex_lock(&cp->mu);
    int stop = camp_stopping(cp);
    if (!stop) cp->reserved++, m->runs++;
    pthread_mutex_unlock(&cp->mu);
    if (stop) return -1;
    fl_status st = fl_otlp_src_run(cp->otlp, m->t, c, m->trace_rng, m->tr, &e);
    pthread_mutex_lock(&cp->mu);
    int r = -1;
    if (st) {
        camp_fail(cp, &e);
    } else {
        cp->st.execs_trim++;
        camp_count_unjudged(cp, m->t, m->tr);
        fl_agfeature *fv = NULL;
        int nf = fl_agcov_features(cp->cov, m->tr, &fv);
        r = nf >= 0 && q_cov_sig(fv, nf, m->tr->exit) == m->x->cov_sig;
        free(fv);
        camp_periodic(cp, 0);
    }
    pthread_mutex_unlock(&cp->mu);
    return r;
}

int camp_trim_budget(const camp *cp) {
    double allowed = (double)cp->st.execs * FL_CAMPAIGN_TRIM_SHARE / 100 - (double)cp->st.execs_trim;
    int per_entry = cp->o->trim_execs > 0 ? cp->o->trim_execs : FL_CAMPAIGN_TRIM_EXECS;
    return allowed < 1 ? 0 : allowed < per_entry ? (int)allowed : per_entry;
}

void camp_trim(camp *cp, q_entry *x, fl_target *t, fl_trace *tr, fl_rng *trace_rng) {
    x->trim = 1; /* before the lock is dropped: no other worker trims it too */
    fl_case *c = fl_case_copy(x->c);
    fl_err e = {0};
    if (!c) {
        fl_fail(&e, FL_ERR_NOMEM, "trim: out of memory");
        camp_fail(cp, &e);
        return;
    }
    tctx m = {.cp = cp, .x = x, .t = t, .tr = tr, .trace_rng = trace_rng,
              .max = camp_trim_budget(cp)};
    camp_shrink_opts so = {.rounds = 1, .skip_json = 1};
    size_t before = fl_case_bytes(x->c);
    pthread_mutex_unlock(&cp->mu);
    fl_status st = camp_shrink(c, &so, same_cov, &m, &e);
    pthread_mutex_lock(&cp->mu);
    if (st) camp_fail(cp, &e);
    size_t after = fl_case_bytes(c);
    if (st || after >= before) {
        fl_case_free(c);
        return;
    }
    char rel[300];
    snprintf(rel, sizeof rel, "queue/%s", x->name);
    q_retrim(&cp->q, x, c);
    cp->st.trimmed++;
    cp->st.trim_bytes += before - after;
    if (od_write_case(cp->o->out_dir, rel, c, &e)) camp_fail(cp, &e);
}
