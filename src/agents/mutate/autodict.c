/* The automatic dictionary from the traces (issue 15 §2; AFL++'s auto-dictionary and
 * input-to-state tokens are the model): the words and values the agents wrote — messages,
 * tool arguments, tool results, outputs — of the cases a campaign kept for new coverage. What
 * the system talks about is what it reacts to, and a mutation that writes a tool's own result
 * back into a request reaches branches no word list names.
 *
 * Bounded: a ring of at most `cap` tokens; a new token replaces the oldest, so the dictionary
 * holds the most recent coverage-adding sources (only kept cases are learnt from). A word of
 * the case's own turns is not learnt (it is the fuzzer's input coming back, not the system's
 * word), nor one the mutator's dictionary holds already (spec words, -x).
 *
 * Threads: learning changes the ring; a mutation reads an immutable snapshot (fl_mutate_extra)
 * taken by reference, so workers mutate without the campaign's lock while the ring moves on.
 * The caller serialises fl_autodict_learn / _snapshot / _release (the campaign's lock). */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

enum { AD_MIN = 4, AD_MIN_DIGITS = 2, AD_MAX = 32 };

typedef struct ad_snap {
    fl_mutate_extra x;
    char **own;
    int refs;
} ad_snap;

struct fl_autodict {
    char **ring;
    int cap, n, head; /* head: the oldest once full */
    uint64_t added;
    ad_snap *cur;     /* the latest snapshot (one reference held here), NULL: none yet */
    int dirty;
};

fl_autodict *fl_autodict_new(int cap) {
    fl_autodict *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->cap = cap > 0 ? cap : FL_AUTODICT_CAP;
    if (!(a->ring = calloc((size_t)a->cap, sizeof *a->ring))) {
        free(a);
        return NULL;
    }
    return a;
}

static void snap_unref(ad_snap *s) {
    if (!s || --s->refs > 0) return;
    for (int i = 0; i < s->x.n; i++) free(s->own[i]);
    free(s->own);
    free(s);
}

void fl_autodict_free(fl_autodict *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free(a->ring[i]);
    free(a->ring);
    snap_unref(a->cur);
    free(a);
}

int fl_autodict_size(const fl_autodict *a) { return a ? a->n : 0; }

static int is_tok(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.' || c == '@' || c == '/' || c == ':' || c >= 0x80;
}

/* 1 when w[0..n) occurs in s, ignoring ASCII case */
static int occurs(const char *s, const char *w, size_t n) {
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && mt_lower((unsigned char)s[i]) == mt_lower((unsigned char)w[i])) i++;
        if (i == n) return 1;
    }
    return 0;
}

static int known(const fl_autodict *a, const fl_mutator_ctx *m, const char *w, size_t n) {
    for (int i = 0; i < a->n; i++)
        if (strlen(a->ring[i]) == n && !memcmp(a->ring[i], w, n)) return 1;
    for (int i = 0; i < m->dict.n; i++)
        if (strlen(m->dict.tok[i]) == n && !memcmp(m->dict.tok[i], w, n)) return 1;
    return 0;
}

/* The tokens of s: runs of letters, digits, "_-.@/:" and non-ASCII, without trailing
 * punctuation; AD_MIN..AD_MAX bytes, or from AD_MIN_DIGITS with a digit (a value). */
static int learn_text(fl_autodict *a, const fl_mutator_ctx *m, const char *s, const fl_case *c) {
    int added = 0;
    for (size_t i = 0; s && s[i];) {
        if (!is_tok((unsigned char)s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        int digit = 0;
        while (s[j] && is_tok((unsigned char)s[j])) digit |= s[j] >= '0' && s[j] <= '9', j++;
        size_t n = j - i;
        while (n && strchr("-.:/", s[i + n - 1])) n--;
        const char *w = s + i;
        i = j;
        if (n > AD_MAX || n < (digit ? AD_MIN_DIGITS : AD_MIN) || !fl_utf8_valid(w, n)) continue;
        int mine = 0; /* the fuzzer's own input, coming back */
        for (int t = 0; t < c->n_turns && !mine; t++) mine = occurs(c->turns[t], w, n);
        if (mine || known(a, m, w, n)) continue;
        char *tok = malloc(n + 1);
        if (!tok) return -1;
        memcpy(tok, w, n), tok[n] = 0;
        if (a->n < a->cap) a->ring[a->n++] = tok;
        else free(a->ring[a->head]), a->ring[a->head] = tok, a->head = (a->head + 1) % a->cap;
        added++;
    }
    return added;
}

int fl_autodict_learn(fl_autodict *a, const fl_mutator_ctx *m, const fl_trace *t, const fl_case *c) {
    int added = 0;
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        int r = learn_text(a, m, ev->content, c);
        if (r >= 0 && ev->arguments) {
            int r2 = learn_text(a, m, ev->arguments, c);
            r = r2 < 0 ? r2 : r + r2;
        }
        if (r < 0) return -1;
        added += r;
    }
    if (added) a->dirty = 1, a->added += (uint64_t)added;
    return added;
}

uint64_t fl_autodict_added(const fl_autodict *a) { return a ? a->added : 0; }

const fl_mutate_extra *fl_autodict_snapshot(fl_autodict *a) {
    if (!a || !a->n) return NULL;
    if (a->dirty || !a->cur) {
        ad_snap *s = calloc(1, sizeof *s);
        if (!s || !(s->own = calloc((size_t)a->n, sizeof *s->own))) {
            free(s);
            return NULL; /* out of memory: mutate without it */
        }
        for (int i = 0; i < a->n; i++)
            if (!(s->own[s->x.n] = strdup(a->ring[i]))) break;
            else s->x.n++;
        s->x.tok = (const char *const *)s->own;
        s->refs = 1;
        snap_unref(a->cur);
        a->cur = s;
        a->dirty = 0;
    }
    a->cur->refs++;
    return &a->cur->x;
}

void fl_autodict_release(fl_autodict *a, const fl_mutate_extra *x) {
    (void)a;
    snap_unref((ad_snap *)(void *)x); /* x is the snapshot's first member */
}
