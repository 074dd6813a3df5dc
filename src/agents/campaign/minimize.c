/* flare agents min: shrink a failing case while the same finding (signature) reproduces.
 *
 * The units go from coarse to fine — whole turns, then each turn's sentences, words, and
 * finally characters — and at each level chunks of units are removed, halving the chunk size
 * down to one unit (the complement-removal half of Zeller's ddmin, as afl-tmin does it: a
 * removal that keeps the failure is kept and the scan continues at the same place). After a
 * level shrinks anything the coarser levels are retried, until a whole round changes nothing
 * or the run budget is spent (shrink.c, shared with the campaign's trim). Every candidate is
 * run on the target, so the search is O(units * log units) runs per round; the budget
 * (-max-runs) bounds it. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/http_target.h"

typedef struct mctx {
    const fl_min_opts *o;
    fl_target *t;
    fl_trace *tr;
    fl_spec *spec;
    fl_findings f;
    char sig[64];
    int runs;
    fl_status st;
    fl_err *e;
    fl_otlp_src *otlp;  /* --otlp-listen / --otlp-file, NULL: none */
    fl_rng trace_rng;   /* a new trace id per run when otlp is set */
} mctx;

/* 1 when c still gives the signature, 0 when not, -1 when the budget is spent or flare
 * failed (m->st): camp_shrink's test. */
static int still_fails(void *ctx, const fl_case *c) {
    mctx *m = ctx;
    if (m->st || m->runs >= m->o->max_runs) return -1;
    m->runs++;
    fl_findings_clear(&m->f);
    if ((m->st = fl_otlp_src_run(m->otlp, m->t, c, &m->trace_rng, m->tr, m->e)) ||
        (m->st = fl_oracle_check(m->spec, c, m->tr, NULL, &m->f, m->e)))
        return -1;
    for (int i = 0; i < m->f.n; i++)
        if (!strcmp(m->f.v[i].signature, m->sig)) return 1;
    return 0;
}

static void default_out(const char *in, char *buf, size_t n) {
    size_t len = strlen(in);
    if (len > 5 && !strcmp(in + len - 5, ".json")) len -= 5;
    snprintf(buf, n, "%.*s.min.json", (int)len, in);
}

fl_status fl_minimize(const char *path, const fl_min_opts *o, fl_min_result *r, fl_err *e) {
    memset(r, 0, sizeof *r);
    saved_case sc;
    fl_status st = saved_case_load(path, &sc, e);
    if (st) return st;
    fl_min_opts oo = *o;
    if (oo.max_runs <= 0) oo.max_runs = 2000;
    mctx m = {.o = &oo, .e = e};
    char *loaded = NULL, desc[1024];
    fl_case *c = sc.c;
    r->turns_before = c->n_turns;
    r->bytes_before = fl_case_bytes(c);
    if (!(m.tr = fl_trace_new())) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (!st) st = saved_spec(o->spec_path, sc.spec, &m.spec, &loaded, e);
    fl_rng_seed(&m.trace_rng, (uint64_t)(fl_now() * 1e9));
    if (!st) st = fl_otlp_src_new(&o->target.otlp, &m.otlp, e);
    if (!st) st = saved_target(&o->target, &m.t, e);
    if (!st) { /* the starting point must fail, with the chosen signature */
        const char *want = o->signature ? o->signature : sc.signature;
        snprintf(m.sig, sizeof m.sig, "%s", want ? want : "");
        int rr = still_fails(&m, c);
        if (rr < 0) st = m.st ? m.st : fl_fail(e, FL_ERR_ARG, "--max-runs too small");
        else if (!want && m.f.n) snprintf(m.sig, sizeof m.sig, "%s", m.f.v[0].signature), rr = 1;
        if (!st && rr != 1)
            st = fl_fail(e, FL_ERR_ARG, "%s: %s does not reproduce (%d finding%s now)", path,
                         want ? want : "the case", m.f.n, m.f.n == 1 ? "" : "s");
    }
    camp_shrink_opts so = {.rounds = 100, .char_max = 256};
    if (!st) st = camp_shrink(c, &so, still_fails, &m, e);
    if (!st) st = m.st;
    int rr = -1;
    if (!st) { /* the final case's own run, for the trace written with it */
        oo.max_runs = m.runs + 1;
        rr = still_fails(&m, c);
        st = m.st;
    }
    if (!st) {
        const fl_finding *f = NULL;
        for (int i = 0; i < m.f.n; i++)
            if (!strcmp(m.f.v[i].signature, m.sig)) f = &m.f.v[i];
        if (o->out_path) snprintf(r->out_path, sizeof r->out_path, "%s", o->out_path);
        else default_out(path, r->out_path, sizeof r->out_path);
        saved_argv_line(o->target.argv, desc, sizeof desc);
        if (o->target.http) snprintf(desc, sizeof desc, "%s", o->target.http->url); /* an HTTP target */
        char *txt = saved_case_json(c, m.tr, f, loaded, desc, NULL);
        if (!txt) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        else st = fl_file_write_atomic(r->out_path, txt, strlen(txt), e);
        free(txt);
        if (!st && rr != 1 && o->log)
            fprintf(o->log, "note: the shrunk case did not reproduce on its last run (flaky "
                            "target?)\n");
    }
    snprintf(r->signature, sizeof r->signature, "%s", m.sig);
    r->runs = m.runs;
    r->turns_after = c->n_turns;
    r->bytes_after = fl_case_bytes(c);
    fl_findings_free(&m.f);
    fl_target_free(m.t);
    fl_otlp_src_free(m.otlp);
    fl_trace_free(m.tr);
    fl_spec_free(m.spec);
    free(loaded);
    saved_case_free(&sc);
    return st;
}
