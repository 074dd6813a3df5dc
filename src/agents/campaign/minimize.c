/* flare agents min: shrink a failing case while the same finding (signature) reproduces.
 *
 * The units go from coarse to fine — whole turns, then each turn's sentences, words, and
 * finally characters — and at each level chunks of units are removed, halving the chunk size
 * down to one unit (the complement-removal half of Zeller's ddmin, as afl-tmin does it: a
 * removal that keeps the failure is kept and the scan continues at the same place). After a
 * level shrinks anything the coarser levels are retried, until a whole round changes nothing
 * or the run budget is spent. Every candidate is run on the target, so the search is
 * O(units * log units) runs per round; the budget (-max-runs) bounds it. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/http_target.h"

enum { LV_SENTENCE, LV_WORD, LV_CHAR, LV_COUNT };

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
 * failed (m->st). */
static int still_fails(mctx *m, const fl_case *c) {
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

/* ---- units ----------------------------------------------------------------------------------- */
static size_t cp_len(const unsigned char *s) { /* one code point, or one stray byte */
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return n;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A sentence ends after . ! ? (followed by white space or the end) or a CJK full stop,
 * exclamation or question mark (U+3002, U+FF01, U+FF1F). */
static size_t sentence_end(const char *s, size_t i, size_t n) {
    if ((s[i] == '.' || s[i] == '!' || s[i] == '?') && (i + 1 == n || is_space(s[i + 1])))
        return 1;
    if (i + 3 <= n && (!memcmp(s + i, "\xE3\x80\x82", 3) || !memcmp(s + i, "\xEF\xBC\x81", 3) ||
                       !memcmp(s + i, "\xEF\xBC\x9F", 3)))
        return 3;
    return 0;
}

/* Unit boundaries of s at a level: off[0] = 0 < off[1] < ... < off[k] = n (malloc'd). A unit
 * keeps the white space after it, so removing units leaves the text well spaced. */
static int split(const char *s, int level, size_t **off) {
    size_t n = strlen(s), k = 0;
    *off = malloc((n + 2) * sizeof **off);
    if (!*off) return -1;
    (*off)[k++] = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n;) {
        size_t step = cp_len((const unsigned char *)s + i), end = 0;
        if (level == LV_CHAR) end = i + step;
        else if (level == LV_WORD && !is_space(s[i]) && (i + step == n || is_space(s[i + step])))
            end = i + step;
        else if (level == LV_SENTENCE && sentence_end(s, i, n)) end = i + sentence_end(s, i, n);
        i += end ? end - i : step;
        if (end) {
            while (i < n && is_space(s[i])) i++;
            if (i < n) (*off)[k++] = i;
        }
    }
    (*off)[k] = n;
    return (int)k;
}

/* ---- passes ---------------------------------------------------------------------------------- */
/* Remove chunks of turns (at least one turn stays). Returns 1 when it shrank anything. */
static int pass_turns(mctx *m, fl_case *c) {
    int changed = 0;
    for (int chunk = c->n_turns / 2; chunk >= 1; chunk /= 2) {
        for (int i = 0; i < c->n_turns && c->n_turns - chunk >= 1;) {
            int len = i + chunk <= c->n_turns ? chunk : c->n_turns - i;
            char *saved[64];
            if (len > 64) len = 64;
            memcpy(saved, c->turns + i, (size_t)len * sizeof *saved);
            memmove(c->turns + i, c->turns + i + len, (size_t)(c->n_turns - i - len) * sizeof *c->turns);
            c->n_turns -= len;
            int r = still_fails(m, c);
            if (r == 1) {
                for (int k = 0; k < len; k++) free(saved[k]);
                changed = 1;
                continue;
            }
            memmove(c->turns + i + len, c->turns + i, (size_t)(c->n_turns - i) * sizeof *c->turns);
            memcpy(c->turns + i, saved, (size_t)len * sizeof *saved);
            c->n_turns += len;
            if (r < 0) return changed;
            i += len;
        }
    }
    return changed;
}

/* Remove chunks of units of turn t at one level. */
static int pass_units(mctx *m, fl_case *c, int t, int level) {
    size_t *off;
    int n = split(c->turns[t], level, &off), changed = 0;
    if (n < 0) {
        m->st = fl_fail(m->e, FL_ERR_NOMEM, "out of memory");
        return 0;
    }
    char *cur = c->turns[t];
    for (int chunk = n / 2 > 0 ? n / 2 : 1; chunk >= 1 && n > 0; chunk /= 2) {
        for (int i = 0; i < n;) {
            int len = i + chunk <= n ? chunk : n - i;
            size_t a = off[i], b = off[i + len], total = off[n];
            char *cand = malloc(total - (b - a) + 1);
            if (!cand) {
                m->st = fl_fail(m->e, FL_ERR_NOMEM, "out of memory");
                goto out;
            }
            memcpy(cand, cur, a);
            memcpy(cand + a, cur + b, total - b);
            cand[total - (b - a)] = 0;
            c->turns[t] = cand;
            int r = still_fails(m, c);
            if (r == 1) { /* keep: shift the boundaries after the removed units */
                free(cur);
                cur = cand;
                for (int k = i + len; k <= n; k++) off[k - len] = off[k] - (b - a);
                n -= len;
                changed = 1;
                continue;
            }
            c->turns[t] = cur;
            free(cand);
            if (r < 0) goto out;
            i += len;
        }
    }
out:
    free(off);
    return changed;
}

static size_t case_bytes(const fl_case *c) {
    size_t n = 0;
    for (int i = 0; i < c->n_turns; i++) n += strlen(c->turns[i]);
    return n;
}

static fl_status shrink(mctx *m, fl_case *c) {
    for (int round = 0; round < 100; round++) {
        int changed = pass_turns(m, c);
        for (int t = 0; t < c->n_turns; t++)
            for (int lv = 0; lv < LV_COUNT; lv++) {
                /* characters only for short turns: a long one is words apart already */
                if (lv == LV_CHAR && strlen(c->turns[t]) > 256) continue;
                if (pass_units(m, c, t, lv)) changed = 1;
            }
        if (m->st || !changed || m->runs >= m->o->max_runs) break;
    }
    return m->st;
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
    r->bytes_before = case_bytes(c);
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
    if (!st) st = shrink(&m, c);
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
    r->bytes_after = case_bytes(c);
    fl_findings_free(&m.f);
    fl_target_free(m.t);
    fl_otlp_src_free(m.otlp);
    fl_trace_free(m.tr);
    fl_spec_free(m.spec);
    free(loaded);
    saved_case_free(&sc);
    return st;
}
