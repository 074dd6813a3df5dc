/* flare agents replay: the saved failures of a campaign as a regression corpus. Each case is
 * run again (one persistent target for all, restarted after crashes and hangs as in the
 * campaign) and judged by the same oracles. A saved failure (a file with a "kind") "still
 * fails" when it produces any finding (the saved signature or another one: both are
 * regressions for CI) and is "fixed" when it produces none; a case that never failed (a queue
 * entry, a hand-written case) is a "new failure" when it produces one, else it "passed" —
 * never "fixed". The JUnit file has one <testcase> per case, with the trace's summary in
 * <system-out>, so CI systems list them. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"

/* The spec for a case: the one given, else the one recorded in it (loaded once per path). */
fl_status saved_spec(const char *given, const char *recorded, fl_spec **spec, char **loaded,
                     fl_err *e) {
    const char *want = given ? given : recorded;
    if (!want) {
        fl_spec_free(*spec), *spec = NULL;
        free(*loaded), *loaded = NULL;
        return FL_OK;
    }
    if (*loaded && !strcmp(*loaded, want)) return FL_OK;
    fl_spec_free(*spec), *spec = NULL;
    free(*loaded), *loaded = NULL;
    fl_status st = fl_spec_load(want, spec, e);
    if (st && !given) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        return fl_fail(e, st, "%.400s (the spec recorded in the case; give another with --spec)",
                       msg);
    }
    if (!st && !(*loaded = strdup(want))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    return st;
}

fl_status saved_target(const fl_target_setup *ts, fl_target **t, fl_err *e) {
    fl_target_opts to;
    fl_target_opts_default(&to);
    to.timeout_ms = ts->timeout_ms > 0 ? ts->timeout_ms : to.timeout_ms;
    to.fresh = ts->fresh;
    to.mem_limit_mb = ts->mem_limit_mb;
    to.http = ts->http;
    to.keep_stderr = 1; /* each case's stderr goes with its verdict (JUnit <system-err>) */
    if (!ts->http && (!ts->argv || !ts->argv[0]))
        return fl_fail(e, FL_ERR_ARG, "no target command (-- CMD ARGS...)");
    return fl_target_new(ts->argv, &to, t, e);
}

static void xml(FILE *f, const char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '&') fputs("&amp;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c < 0x20 && c != '\n' && c != '\t') fputc(' ', f); /* not allowed in XML 1.0 */
        else fputc(c, f);
    }
}

typedef struct rcase {
    const char *path;
    char kind[32];
    int fails, same, failed_before;
    double ms;
    char msg[512];
    char summary[768]; /* how the case ended, its events, every finding */
    char *err;         /* the case's stderr (its last 4 KiB), or NULL */
} rcase;

/* The trace in a few lines for the JUnit report. */
static void summarise(rcase *x, const fl_trace *tr, const fl_findings *f) {
    char how[256];
    size_t k = (size_t)snprintf(x->summary, sizeof x->summary, "ended: %s; %d events, %d finding%s\n",
                                fl_trace_describe_exit(tr, how, sizeof how), tr->n_events, f->n, f->n == 1 ? "" : "s");
    for (int i = 0; i < f->n && k < sizeof x->summary; i++)
        k += (size_t)snprintf(x->summary + k, sizeof x->summary - k, "%s %s event %d: %s\n",
                              fl_finding_kind_name(f->v[i].kind), f->v[i].signature, f->v[i].event, f->v[i].message);
}

static fl_status write_junit(const char *path, const rcase *rc, int n, const fl_replay_result *r,
                             double secs, fl_err *e) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites tests=\"%d\" failures=\"%d\" time=\"%.3f\">\n"
               "  <testsuite name=\"flare agents replay\" tests=\"%d\" failures=\"%d\" "
               "errors=\"0\" skipped=\"0\" time=\"%.3f\">\n",
            n, r->n_failing, secs, n, r->n_failing, secs);
    for (int i = 0; i < n; i++) {
        fprintf(f, "    <testcase classname=\"flare.agents.");
        xml(f, rc[i].kind[0] ? rc[i].kind : "case");
        fprintf(f, "\" name=\"");
        xml(f, rc[i].path);
        fprintf(f, "\" time=\"%.3f\"", rc[i].ms / 1000);
        fprintf(f, ">\n");
        if (rc[i].fails) {
            fprintf(f, "      <failure type=\"%s\" message=\"",
                    !rc[i].failed_before ? "new" : rc[i].same ? "reproduced" : "changed");
            xml(f, rc[i].msg);
            fprintf(f, "\">");
            xml(f, rc[i].msg);
            fprintf(f, "</failure>\n");
        }
        fprintf(f, "      <system-out>");
        xml(f, rc[i].summary);
        fprintf(f, "</system-out>\n");
        if (rc[i].err) {
            fprintf(f, "      <system-err>");
            xml(f, rc[i].err);
            fprintf(f, "</system-err>\n");
        }
        fprintf(f, "    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    }
    fl_status st = fl_file_write_atomic(path, buf, len, e);
    free(buf);
    return st;
}

/* The cases under every path given, in order, with the skipped files counted by reason. */
static fl_status select_all(const char *const *given, int n_given, camp_paths *l,
                            int skipped[SAVED_SKIP_COUNT_], fl_err *e) {
    memset(skipped, 0, SAVED_SKIP_COUNT_ * sizeof *skipped);
    fl_status st = FL_OK;
    for (int g = 0; !st && g < n_given; g++) {
        char **v = NULL;
        int n = 0, sk[SAVED_SKIP_COUNT_];
        if ((st = saved_case_select(given[g], &v, &n, sk, e))) break;
        for (int k = 0; k < SAVED_SKIP_COUNT_; k++) skipped[k] += sk[k];
        for (int i = 0; !st && i < n; i++) {
            int twice = 0; /* "out/failures out/failures/crash/x.json": run x once */
            for (int j = 0; j < l->n && !twice; j++) twice = !strcmp(l->v[j], v[i]);
            if (twice) skipped[SAVED_SKIP_TWICE]++;
            else if (camp_paths_add(l, v[i]) < 0) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        saved_case_list_free(v, n);
    }
    return st;
}

fl_status fl_replay_run(const char *const *given, int n_given, const fl_replay_opts *o,
                        fl_replay_result *r, fl_err *e) {
    memset(r, 0, sizeof *r);
    camp_paths sel = {0};
    char *loaded = NULL;
    fl_spec *spec = NULL;
    fl_target *t = NULL;
    fl_trace *tr = fl_trace_new();
    rcase *rc = NULL;
    fl_findings f = {0};
    double t0 = fl_now();
    fl_otlp_src *os = NULL; /* --otlp-listen / --otlp-file */
    fl_rng trace_rng; /* new trace ids: a saved case's own was collected when it was found */
    fl_rng_seed(&trace_rng, (uint64_t)(t0 * 1e9));
    int skipped[SAVED_SKIP_COUNT_];
    fl_status st = tr ? select_all(given, n_given, &sel, skipped, e) : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    char **paths = sel.v;
    int n = sel.n;
    for (int k = 0; !st && k < SAVED_SKIP_COUNT_; k++) {
        if (!skipped[k]) continue;
        size_t l = strlen(r->skipped_why);
        snprintf(r->skipped_why + l, sizeof r->skipped_why - l, "%s%d %s", l ? ", " : "", skipped[k],
                 saved_skip_name(k));
        r->n_skipped += skipped[k];
    }
    if (!st) st = fl_otlp_src_new(&o->target.otlp, &os, e);
    if (!st && n && !(rc = calloc((size_t)n, sizeof *rc))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (!st && n) st = saved_target(&o->target, &t, e);
    for (int i = 0; !st && i < n; i++) {
        saved_case sc;
        if ((st = saved_case_load(paths[i], &sc, e))) break;
        if ((st = saved_spec(o->spec_path, sc.spec, &spec, &loaded, e)) ||
            (st = fl_otlp_src_run(os, t, sc.c, &trace_rng, tr, e))) {
            saved_case_free(&sc);
            break;
        }
        fl_findings_clear(&f);
        if ((st = fl_oracle_check(spec, sc.c, tr, NULL, &f, e))) {
            saved_case_free(&sc);
            break;
        }
        rcase *x = &rc[i];
        x->path = paths[i];
        x->ms = tr->ms;
        snprintf(x->kind, sizeof x->kind, "%s", sc.kind ? sc.kind : "");
        x->failed_before = sc.kind || sc.signature;
        for (int k = 0; k < f.n; k++)
            if (sc.signature && !strcmp(f.v[k].signature, sc.signature)) x->same = 1;
        x->fails = f.n > 0;
        if (f.n) {
            const fl_finding *g = &f.v[0];
            for (int k = 0; k < f.n; k++)
                if (sc.signature && !strcmp(f.v[k].signature, sc.signature)) g = &f.v[k];
            snprintf(x->msg, sizeof x->msg, "%s %s: %s%s", fl_finding_kind_name(g->kind), g->signature, g->message,
                     !x->failed_before ? " (a new failure)" : x->same ? "" : " (a different finding)");
        }
        summarise(x, tr, &f);
        if (tr->err_len) { /* the tail: a traceback ends there */
            size_t keep = tr->err_len > 4096 ? 4096 : tr->err_len;
            x->err = fl_utf8_dup(tr->err + tr->err_len - keep, keep);
        }
        r->n_cases++;
        r->n_failing += x->fails;
        r->n_still += x->fails && x->failed_before;
        r->n_new += x->fails && !x->failed_before;
        r->n_same += x->same;
        r->n_fixed += !x->fails && x->failed_before;
        r->n_passed += !x->fails && !x->failed_before;
        if (o->log)
            fprintf(o->log, "%-5s %s%s%s\n", !x->fails ? (x->failed_before ? "fixed" : "ok") : x->failed_before ? "FAIL" : "NEW",
                    paths[i], x->fails ? "  " : "", x->msg);
        saved_case_free(&sc);
    }
    if (!st && o->junit_path) st = write_junit(o->junit_path, rc, r->n_cases, r, fl_now() - t0, e);
    fl_findings_free(&f);
    fl_target_free(t);
    fl_otlp_src_free(os);
    fl_trace_free(tr);
    fl_spec_free(spec);
    free(loaded);
    for (int i = 0; rc && i < n; i++) free(rc[i].err);
    free(rc);
    camp_paths_free(&sel);
    return st;
}
