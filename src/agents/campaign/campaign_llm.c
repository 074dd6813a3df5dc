/* The LLM in the loop of the campaign (docs/agents-llm.md): the generator's cases enter the
 * queue like mutants (op:llm) and the judge's verdicts become findings of kind llm_judge.
 * Called under cp->mu; the HTTP requests themselves run without it (a request can take
 * seconds, a slow server minutes), so the other -j workers keep executing while one waits on
 * the server. One generator request is out at a time (busy): a worker that would use a
 * generated case meanwhile mutates as usual. What a request needs from the campaign (the
 * coverage gap, corpus examples, the last finding) is read into the prompt under the lock.
 *
 * When the generator is asked: after gen_plateau executions without a new coverage feature
 * (then its next n_want inputs are used in a row), and, independently, for a gen_share
 * fraction of the executions (a batch is asked for when none is pending). A failed request
 * pauses the generator for gen_plateau (or 100) executions, and a failed judge request the
 * judge for 100; a spent budget stops both.
 *
 * What the judge sees: only cases that passed every rule oracle and added coverage (kept or
 * seeds). Judging every execution would cost one call per run, and a case that did nothing
 * new has a behaviour already judged. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/llm.h"

struct camp_llm {
    fl_llm *llm;
    fl_case **pending;
    int n_pending, next;
    int64_t last_feat;
    uint64_t mark;       /* execs at the last new feature (or the last plateau request) */
    uint64_t paused_to;  /* no generator request before this exec count */
    int burst;           /* generated inputs still to use in a row (plateau) */
    uint64_t judge_paused_to; /* no judge request before this exec count */
    uint64_t rounds;
    int busy;            /* a generator request is out (its worker runs without cp->mu) */
};

/* --llm-embed: output clusters from the server's /v1/embeddings (fl_agcov_embedder). A failed
 * request (or an exhausted budget) falls back to the built-in embedding for that output. */
static int llm_embed_output(void *user, const char *text, float **v, int *n) {
    camp_llm *L = user;
    fl_err e = {0};
    return fl_llm_embed(L->llm, text, v, n, &e) == FL_OK ? 0 : -1;
}

fl_status camp_llm_start(camp *cp, fl_err *e) {
    const fl_campaign_opts *o = cp->o;
    if (!o->llm_url) {
        if (o->judge || o->gen_share > 0 || o->gen_plateau > 0)
            fl_log(2, "llm: no --llm URL: generator and judge are off\n");
        return FL_OK;
    }
    camp_llm *L = calloc(1, sizeof *L);
    if (!L) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_llm_opts lo;
    fl_llm_opts_default(&lo);
    lo.base_url = o->llm_url;
    lo.model = o->llm_model;
    lo.max_calls = o->llm_max_calls;
    lo.max_tokens = o->llm_max_tokens;
    lo.cache_dir = o->llm_cache;
    lo.temperature = o->llm_temperature;
    lo.seed = o->seed;
    if (o->llm_timeout_ms > 0) lo.timeout_ms = o->llm_timeout_ms;
    fl_status st = fl_llm_new(&lo, &L->llm, e);
    if (st) return free(L), st;
    cp->llm = L;
    cp->st.llm_on = 1;
    if (o->llm_embed) fl_agcov_set_embedder(cp->cov, llm_embed_output, L);
    return FL_OK;
}

void camp_llm_free(camp *cp) {
    camp_llm *L = cp->llm;
    if (!L) return;
    for (int i = L->next; i < L->n_pending; i++) fl_case_free(L->pending[i]);
    free(L->pending);
    fl_llm_free(L->llm);
    free(L);
    cp->llm = NULL;
}

void camp_llm_stats(camp *cp) {
    if (!cp->llm) return;
    fl_llm_stats s;
    fl_llm_stats_get(cp->llm->llm, &s);
    cp->st.llm_calls = s.calls;
    cp->st.llm_tokens = s.tokens;
    cp->st.llm_cache_hits = s.cache_hits;
    cp->st.llm_failures = s.failures;
    cp->st.llm_malformed = s.malformed;
    cp->st.llm_budget_exhausted = s.exhausted;
}

/* Under cp->mu, which it releases during the request: a new batch into L->pending. A failed
 * request or a reply without cases (both said by the client) pauses the generator. */
static void refill(camp *cp, camp_llm *L) {
    const fl_campaign_opts *o = cp->o;
    for (int i = L->next; i < L->n_pending; i++) fl_case_free(L->pending[i]);
    free(L->pending);
    L->pending = NULL, L->n_pending = L->next = 0;
    const fl_case *corpus[3];
    int nc = 0;
    if (cp->q.n > 0) corpus[nc++] = cp->q.e[cp->q.n - 1]->c;
    if (cp->q.n > 1) corpus[nc++] = cp->q.e[0]->c;
    if (cp->q.n > 2) corpus[nc++] = cp->q.e[cp->q.n / 2]->c;
    const char *finds[1] = {cp->st.last_find};
    fl_llm_gen_in g = {.spec = cp->spec, .cov = cp->cov, .findings = finds,
                       .n_findings = cp->st.last_find[0] != 0, .corpus = corpus, .n_corpus = nc,
                       .n_want = o->gen_batch > 0 ? o->gen_batch : 4, .round = L->rounds++};
    fl_err e = {0};
    char *sys = NULL, *usr = NULL;
    fl_case **v = NULL;
    int n = 0;
    fl_status st = fl_llm_gen_prompt(&g, &sys, &usr, &e); /* only out of memory: a round lost */
    if (st) fl_log(1, "%s\n", e.msg);
    if (!st) {
        L->busy = 1;
        pthread_mutex_unlock(&cp->mu);
        st = fl_llm_gen_ask(L->llm, sys, usr, &v, &n, &e);
        pthread_mutex_lock(&cp->mu);
        L->busy = 0;
    }
    free(sys), free(usr);
    L->pending = v, L->n_pending = n;
    if (st || n == 0)
        L->paused_to = cp->st.execs + (o->gen_plateau > 0 ? (uint64_t)o->gen_plateau : 100);
}

fl_case *camp_llm_next(camp *cp, fl_rng *r) {
    camp_llm *L = cp->llm;
    const fl_campaign_opts *o = cp->o;
    if (!L || (o->gen_plateau <= 0 && o->gen_share <= 0)) return NULL;
    uint64_t x = cp->st.execs;
    if (cp->st.features != L->last_feat) L->last_feat = cp->st.features, L->mark = x;
    int use = 0;
    if (o->gen_plateau > 0 && x - L->mark >= (uint64_t)o->gen_plateau) {
        L->mark = x;
        L->burst = o->gen_batch > 0 ? o->gen_batch : 4;
    }
    if (L->burst > 0) use = 1, L->burst--;
    else if (o->gen_share > 0 && fl_rng_uniform(r) < o->gen_share) use = 1;
    if (!use) return NULL;
    if (L->next >= L->n_pending) {
        if (L->busy || x < L->paused_to || fl_llm_exhausted(L->llm)) return NULL;
        refill(cp, L);
        if (L->next >= L->n_pending) return NULL;
    }
    fl_case *c = L->pending[L->next];
    L->pending[L->next++] = NULL;
    return c;
}

void camp_llm_judge(camp *cp, const fl_case *c, const fl_trace *t, int r, fl_findings *f) {
    camp_llm *L = cp->llm;
    const fl_campaign_opts *o = cp->o;
    if (!L || !o->judge || f->n > 0 || r <= 0 || cp->st.execs < L->judge_paused_to ||
        fl_llm_exhausted(L->llm))
        return;
    fl_llm_judge_opts jo = {.threshold = o->judge_threshold, .votes = o->judge_votes};
    fl_finding x;
    int found = 0;
    fl_err e = {0};
    pthread_mutex_unlock(&cp->mu); /* c and t are the worker's; the spec never changes */
    fl_status st = fl_llm_judge(L->llm, cp->spec, c, t, &jo, &x, &found, &e);
    pthread_mutex_lock(&cp->mu);
    if (st) { /* said by the client */
        L->judge_paused_to = cp->st.execs + 100; /* a server that is down costs retries each time */
        return;
    }
    if (!found) return;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 4;
        fl_finding *v = realloc(f->v, (size_t)cap * sizeof *v);
        if (!v) return;
        f->v = v, f->cap = cap;
    }
    f->v[f->n++] = x;
}
