/* Shrinking a case by removing parts of it while a test still holds: `flare agents min`
 * (minimize.c: the same finding) and the campaign's trim (campaign_trim.c: the same
 * coverage). The units go from coarse to fine — whole turns, then each turn's sentences,
 * words, and (for short turns) characters — and at each level chunks of units are removed,
 * halving the chunk size down to one unit: the complement-removal half of Zeller's ddmin, as
 * afl-tmin and AFL's trim do it. A removal that passes the test is kept and the scan goes on
 * at the same place. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/campaign_int.h"

enum { LV_SENTENCE, LV_WORD, LV_CHAR, LV_COUNT };

typedef struct sctx {
    camp_keep_fn keep;
    void *ctx;
    int stopped;   /* keep returned -1: no more candidates */
    fl_status st;
    fl_err *e;
} sctx;

static int test(sctx *s, const fl_case *c) {
    if (s->stopped || s->st) return -1;
    int r = s->keep(s->ctx, c);
    if (r < 0) s->stopped = 1;
    return r;
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
static int pass_turns(sctx *m, fl_case *c) {
    int changed = 0;
    for (int chunk = c->n_turns / 2; chunk >= 1; chunk /= 2) {
        for (int i = 0; i < c->n_turns && c->n_turns - chunk >= 1;) {
            int len = i + chunk <= c->n_turns ? chunk : c->n_turns - i;
            char *saved[64];
            if (len > 64) len = 64;
            memcpy(saved, c->turns + i, (size_t)len * sizeof *saved);
            memmove(c->turns + i, c->turns + i + len, (size_t)(c->n_turns - i - len) * sizeof *c->turns);
            c->n_turns -= len;
            int r = test(m, c);
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
static int pass_units(sctx *m, fl_case *c, int t, int level) {
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
            int r = test(m, c);
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

/* A JSON object or array turn: removing words from it breaks its syntax rather than
 * trimming it. */
static int json_like(const char *s) {
    while (is_space(*s)) s++;
    return *s == '{' || *s == '[';
}

fl_status camp_shrink(fl_case *c, const camp_shrink_opts *o, camp_keep_fn keep, void *ctx,
                      fl_err *e) {
    sctx m = {.keep = keep, .ctx = ctx, .e = e};
    for (int round = 0; round < o->rounds; round++) {
        int changed = pass_turns(&m, c);
        for (int t = 0; t < c->n_turns; t++) {
            if (o->skip_json && json_like(c->turns[t])) continue;
            for (int lv = 0; lv < LV_COUNT; lv++) {
                /* characters only for short turns: a long one is words apart already */
                if (lv == LV_CHAR && strlen(c->turns[t]) > o->char_max) continue;
                if (pass_units(&m, c, t, lv)) changed = 1;
            }
        }
        if (m.st || !changed || m.stopped) break;
    }
    return m.st;
}
