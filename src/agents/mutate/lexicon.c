/* The synonym lexicon: groups of interchangeable words or phrases, English and Chinese.
 *
 * File format (the built-in groups in lexicon_en.c / lexicon_zh.c use it too):
 *     # comment
 *     big, large, huge
 *     as soon as possible, right away, immediately
 *     快速, 迅速, 很快
 * One group per line, entries separated by ',' (or the full-width '，'), surrounding spaces
 * ignored, at least two different entries. Entries start with a letter, digit or non-ASCII
 * character and are at most 127 bytes of UTF-8.
 *
 * Matching: an ASCII entry matches whole words only, ignoring ASCII case ("Big" matches
 * "big", "bigger" does not); an entry that begins with a non-ASCII character matches
 * anywhere (Chinese has no spaces between words). To find candidates fast, entries are
 * sorted by a key — the lower-cased first ASCII word, or the first code point — and the text
 * is scanned once, looking each token's key up by binary search.
 */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"
#include "core/text.h"

#define KEY_MAX 63
#define ENTRY_MAX 127

static size_t key_at(const char *s, size_t n, size_t i, char key[KEY_MAX + 1]) {
    size_t k = 0;
    if (mt_is_alnum((unsigned char)s[i])) {
        while (i + k < n && mt_is_alnum((unsigned char)s[i + k]) && k < KEY_MAX) {
            key[k] = (char)mt_lower((unsigned char)s[i + k]);
            k++;
        }
    } else {
        k = mt_u8_unit(s, n, i);
        memcpy(key, s + i, k);
    }
    key[k] = 0;
    return k;
}

static int cmp_entry(const void *a, const void *b) {
    const mt_lex_entry *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (!c) c = strcmp(x->text, y->text);
    if (!c) c = (x->group > y->group) - (x->group < y->group);
    return c;
}

static int same_ci(const char *a, size_t na, const char *b, size_t nb) {
    if (na != nb) return 0;
    for (size_t i = 0; i < na; i++)
        if (mt_lower((unsigned char)a[i]) != mt_lower((unsigned char)b[i])) return 0;
    return 1;
}

static void drop_from(mt_lexicon *lx, int n, int groups) {
    for (int i = n; i < lx->n; i++) free(lx->e[i].text), free(lx->e[i].key);
    lx->n = n;
    lx->n_groups = groups;
}

/* Sort the entries and rebuild the group tables. */
static fl_status reindex(mt_lexicon *lx, fl_err *e) {
    qsort(lx->e, (size_t)lx->n, sizeof *lx->e, cmp_entry);
    free(lx->gstart), free(lx->gmem);
    lx->gstart = calloc((size_t)lx->n_groups + 1, sizeof *lx->gstart);
    lx->gmem = malloc(((size_t)lx->n + 1) * sizeof *lx->gmem);
    if (!lx->gstart || !lx->gmem) return fl_fail(e, FL_ERR_NOMEM, "lexicon: out of memory");
    for (int i = 0; i < lx->n; i++) lx->gstart[lx->e[i].group + 1]++;
    for (int g = 0; g < lx->n_groups; g++) lx->gstart[g + 1] += lx->gstart[g];
    int *fill = calloc((size_t)lx->n_groups + 1, sizeof *fill);
    if (!fill) return fl_fail(e, FL_ERR_NOMEM, "lexicon: out of memory");
    for (int i = 0; i < lx->n; i++) {
        int g = lx->e[i].group;
        lx->gmem[lx->gstart[g] + fill[g]++] = i;
    }
    free(fill);
    return FL_OK;
}

static int is_sep(const char *s, size_t n, size_t i, size_t *len) {
    if (s[i] == ',') return *len = 1, 1;
    if (i + 3 <= n && !memcmp(s + i, "\xef\xbc\x8c", 3)) return *len = 3, 1; /* '，' */
    return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* One line of a lexicon file (an fl_line_fn over an mt_lexicon). */
static fl_status add_line(void *ctx, const char *s, size_t n, const char *name, int line,
                          fl_err *e) {
    mt_lexicon *lx = ctx;
    size_t a = 0;
    while (a < n && is_ws(s[a])) a++;
    if (a == n || s[a] == '#') return FL_OK;
    if (!fl_utf8_valid(s, n)) return fl_fail(e, FL_ERR_FORMAT, "%s:%d: not valid UTF-8", name, line);
    int first = lx->n, members = 0;
    for (size_t i = a; i <= n;) {
        size_t j = i, sl = 0;
        while (j < n && !is_sep(s, n, j, &sl)) j++;
        size_t b = i, c = j;
        while (b < c && is_ws(s[b])) b++;
        while (c > b && is_ws(s[c - 1])) c--;
        i = j + (j < n ? sl : 1);
        if (b == c) continue; /* "a,,b" or a trailing comma */
        unsigned char c0 = (unsigned char)s[b];
        if (!mt_is_alnum(c0) && c0 < 0x80)
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: entry '%.*s' must start with a letter, digit "
                           "or non-ASCII character", name, line, (int)(c - b), s + b);
        if (c - b > ENTRY_MAX)
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: entry '%.20s...' is longer than %d bytes",
                           name, line, s + b, ENTRY_MAX);
        int dup = 0;
        for (int k = first; k < lx->n; k++) dup |= same_ci(lx->e[k].text, lx->e[k].len, s + b, c - b);
        if (dup) continue;
        if (lx->n == lx->cap) {
            int nc = lx->cap ? lx->cap * 2 : 256;
            mt_lex_entry *ne = realloc(lx->e, (size_t)nc * sizeof *ne);
            if (!ne) return fl_fail(e, FL_ERR_NOMEM, "lexicon: out of memory");
            lx->e = ne, lx->cap = nc;
        }
        mt_lex_entry *en = &lx->e[lx->n];
        char key[KEY_MAX + 1];
        key_at(s, c, b, key);
        en->text = malloc(c - b + 1);
        en->key = strdup(key);
        if (!en->text || !en->key) {
            free(en->text), free(en->key);
            return fl_fail(e, FL_ERR_NOMEM, "lexicon: out of memory");
        }
        memcpy(en->text, s + b, c - b);
        en->text[c - b] = 0;
        en->len = (uint32_t)(c - b);
        en->group = lx->n_groups;
        lx->n++;
        members++;
    }
    if (members < 2)
        return fl_fail(e, FL_ERR_FORMAT, "%s:%d: a synonym group needs at least two different "
                       "entries separated by commas", name, line);
    lx->n_groups++;
    return FL_OK;
}

fl_status mt_lex_add_text(mt_lexicon *lx, const char *text, size_t len, const char *name, fl_err *e) {
    int n0 = lx->n, g0 = lx->n_groups;
    fl_status st = fl_text_lines(text, len, name, add_line, lx, e);
    if (st != FL_OK) drop_from(lx, n0, g0); /* all or nothing */
    fl_status st2 = reindex(lx, st == FL_OK ? e : NULL);
    return st != FL_OK ? st : st2;
}

fl_status mt_lex_add_builtin(mt_lexicon *lx, fl_err *e) {
    const char *const *tables[2] = {mt_lexicon_en, mt_lexicon_zh};
    const char *names[2] = {"built-in English lexicon", "built-in Chinese lexicon"};
    for (int t = 0; t < 2; t++)
        for (int i = 0; tables[t][i]; i++) {
            fl_status st = add_line(lx, tables[t][i], strlen(tables[t][i]), names[t], i + 1, e);
            if (st != FL_OK) return st;
        }
    return reindex(lx, e);
}

void mt_lex_clear(mt_lexicon *lx) {
    drop_from(lx, 0, 0);
    free(lx->e), free(lx->gstart), free(lx->gmem);
    memset(lx, 0, sizeof *lx);
}

static int match_at(const mt_lex_entry *en, const char *s, size_t n, size_t i) {
    if (i + en->len > n) return 0;
    for (uint32_t k = 0; k < en->len; k++)
        if (mt_lower((unsigned char)s[i + k]) != mt_lower((unsigned char)en->text[k])) return 0;
    size_t end = i + en->len;
    return !(mt_is_alnum((unsigned char)en->text[en->len - 1]) && end < n &&
             mt_is_alnum((unsigned char)s[end]));
}

int mt_lex_pick(const mt_lexicon *lx, fl_rng *r, const char *s, size_t n, size_t *at,
                size_t *len, const char **repl, size_t *repl_len) {
    size_t cnt = 0;
    int chosen = -1;
    char key[KEY_MAX + 1];
    for (size_t i = 0; i < n; i += mt_u8_unit(s, n, i)) {
        unsigned char c = (unsigned char)s[i];
        int start = mt_is_alnum(c) ? i == 0 || !mt_is_alnum((unsigned char)s[i - 1])
                                   : c >= 0x80 && mt_u8_seq(s, n, i);
        if (!start) continue;
        key_at(s, n, i, key);
        int lo = 0, hi = lx->n; /* first entry with entry.key >= key */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (strcmp(lx->e[mid].key, key) < 0) lo = mid + 1;
            else hi = mid;
        }
        for (int k = lo; k < lx->n && !strcmp(lx->e[k].key, key); k++)
            if (match_at(&lx->e[k], s, n, i) && fl_rng_below(r, (uint32_t)++cnt) == 0) {
                chosen = k;
                *at = i;
            }
    }
    if (chosen < 0) return 0;
    const mt_lex_entry *en = &lx->e[chosen];
    int g = en->group, size = lx->gstart[g + 1] - lx->gstart[g];
    /* another member of the group (members are distinct, so there is one) */
    int k = (int)fl_rng_below(r, (uint32_t)size - 1);
    int idx = lx->gmem[lx->gstart[g] + k];
    if (idx == chosen) idx = lx->gmem[lx->gstart[g] + size - 1];
    *len = en->len;
    *repl = lx->e[idx].text;
    *repl_len = lx->e[idx].len;
    return 1;
}
