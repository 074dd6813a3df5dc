/* AFL dictionaries (`-x dict`), the format AFL++ and libFuzzer share:
 *
 *     # comment
 *     kw_select="SELECT"
 *     header@2="\x89PNG"        # a level suffix (AFL's -x file@N); accepted, all levels kept
 *     "bare value"
 *
 * Values are double-quoted; inside them \\ \" and \xNN are the only escapes, other bytes
 * below 0x20 must be escaped. Unlike AFL (which rejects bytes above 0x7E) raw UTF-8 is
 * accepted, because flare's tokens are text: 帮我="请帮我". For the same reason a value must
 * decode to non-empty, valid UTF-8 without NUL bytes — a turn is a C string of text — so
 * binary dictionaries written for file formats are refused with the line that is wrong.
 * Whitespace may surround the name, '=' and the value; nothing may follow the closing quote.
 */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"
#include "core/text.h"

#define TOKEN_MAX 1024

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static fl_status push(mt_dict *d, const char *v, size_t n, fl_err *e) {
    if (d->n == d->cap) {
        int nc = d->cap ? d->cap * 2 : 64;
        char **nt = realloc(d->tok, (size_t)nc * sizeof *nt);
        if (!nt) return fl_fail(e, FL_ERR_NOMEM, "dictionary: out of memory");
        d->tok = nt, d->cap = nc;
    }
    char *t = malloc(n + 1);
    if (!t) return fl_fail(e, FL_ERR_NOMEM, "dictionary: out of memory");
    memcpy(t, v, n);
    t[n] = 0;
    d->tok[d->n++] = t;
    return FL_OK;
}

/* One line of a dictionary file (an fl_line_fn over an mt_dict). */
static fl_status parse_line(void *ctx, const char *s, size_t n, const char *name, int line,
                            fl_err *e) {
    mt_dict *d = ctx;
    size_t i = 0;
    while (i < n && is_ws(s[i])) i++;
    while (n > i && is_ws(s[n - 1])) n--;
    if (i == n || s[i] == '#') return FL_OK;
    if (s[i] != '"') { /* name or name@level, then '=' */
        size_t a = i;
        while (i < n && (mt_is_alnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-')) i++;
        if (i == a)
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: expected a name or a quoted value", name, line);
        if (i < n && s[i] == '@') {
            size_t l = ++i;
            while (i < n && s[i] >= '0' && s[i] <= '9') i++;
            if (i == l) return fl_fail(e, FL_ERR_FORMAT, "%s:%d: '@' must be followed by a level number", name, line);
        }
        while (i < n && is_ws(s[i])) i++;
        if (i == n || s[i] != '=')
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: expected '=' after the name '%.*s'", name,
                           line, (int)(i - a), s + a);
        i++;
        while (i < n && is_ws(s[i])) i++;
        if (i == n || s[i] != '"')
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: expected a double-quoted value after '='", name, line);
    }
    if (n - i < 2 || s[n - 1] != '"')
        return fl_fail(e, FL_ERR_FORMAT, "%s:%d: the value must end with '\"' (and nothing after it)",
                       name, line);
    char v[TOKEN_MAX];
    size_t k = 0;
    for (i++; i < n - 1; i++) {
        unsigned char c = (unsigned char)s[i];
        if (k == TOKEN_MAX)
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: value longer than %d bytes", name, line, TOKEN_MAX);
        if (c == '\\') {
            if (i + 1 >= n - 1)
                return fl_fail(e, FL_ERR_FORMAT, "%s:%d: '\\' at the end of the value", name, line);
            char x = s[++i];
            if (x == '\\' || x == '"') {
                v[k++] = x;
            } else if (x == 'x') {
                int h = i + 2 < n - 1 ? hexval(s[i + 1]) : -1, l = h >= 0 ? hexval(s[i + 2]) : -1;
                if (h < 0 || l < 0)
                    return fl_fail(e, FL_ERR_FORMAT, "%s:%d: '\\x' must be followed by two hex digits",
                                   name, line);
                if (!h && !l)
                    return fl_fail(e, FL_ERR_FORMAT, "%s:%d: \\x00 cannot be part of a text token",
                                   name, line);
                v[k++] = (char)(h * 16 + l);
                i += 2;
            } else {
                return fl_fail(e, FL_ERR_FORMAT, "%s:%d: unknown escape '\\%c' (use \\\\, \\\" or \\xNN)",
                               name, line, x >= 32 && x < 127 ? x : '?');
            }
        } else if (c == '"') {
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: unescaped '\"' inside the value", name, line);
        } else if (c < 32 || c == 127) {
            return fl_fail(e, FL_ERR_FORMAT, "%s:%d: control character 0x%02x in the value (use \\xNN)",
                           name, line, c);
        } else {
            v[k++] = (char)c;
        }
    }
    if (!k) return fl_fail(e, FL_ERR_FORMAT, "%s:%d: empty value", name, line);
    if (!fl_utf8_valid(v, k))
        return fl_fail(e, FL_ERR_FORMAT, "%s:%d: the value is not valid UTF-8 text", name, line);
    return push(d, v, k, e);
}

fl_status mt_dict_add_text(mt_dict *d, const char *text, size_t len, const char *name, fl_err *e) {
    int n0 = d->n;
    fl_status st = fl_text_lines(text, len, name, parse_line, d, e);
    if (st != FL_OK) { /* all or nothing */
        for (int k = n0; k < d->n; k++) free(d->tok[k]);
        d->n = n0;
    }
    return st;
}

void mt_dict_clear(mt_dict *d) {
    for (int k = 0; k < d->n; k++) free(d->tok[k]);
    free(d->tok);
    memset(d, 0, sizeof *d);
}

/* ---- words of identifiers (the spec's automatic dictionary) ------------------------------- */
static int dict_has(const mt_dict *d, const char *v, size_t n) {
    for (int k = 0; k < d->n; k++)
        if (strlen(d->tok[k]) == n && !memcmp(d->tok[k], v, n)) return 1;
    return 0;
}

/* push v[0..n) unless present; 1 added, 0 present or too short, -1 out of memory */
static int add_new(mt_dict *d, const char *v, size_t n) {
    if (n < 2 || n >= TOKEN_MAX || dict_has(d, v, n) || !fl_utf8_valid(v, n)) return 0;
    fl_err e;
    return push(d, v, n, &e) == FL_OK ? 1 : -1;
}

static int is_sep(char c) { return c == '_' || c == '-' || c == '.' || c == '/' || c == ' '; }

int mt_dict_add_ident(mt_dict *d, const char *ident) {
    char w[TOKEN_MAX], whole[TOKEN_MAX];
    size_t nw = 0, nwhole = 0;
    int added = 0, words = 0;
    size_t len = strlen(ident);
    for (size_t i = 0; i <= len; i++) {
        char c = ident[i];
        /* a word ends at a separator, the end, or a lower-case letter or digit followed by an
         * upper-case one (camelCase) */
        int boundary = !c || is_sep(c) ||
                       (i > 0 && c >= 'A' && c <= 'Z' && ((ident[i - 1] >= 'a' && ident[i - 1] <= 'z') ||
                                                          (ident[i - 1] >= '0' && ident[i - 1] <= '9')));
        if (boundary && nw) {
            int r = add_new(d, w, nw);
            if (r < 0) return -1;
            added += r;
            if (nwhole && nwhole + 1 < sizeof whole) whole[nwhole++] = ' ';
            if (nwhole + nw < sizeof whole) memcpy(whole + nwhole, w, nw), nwhole += nw;
            words++;
            nw = 0;
        }
        if (c && !is_sep(c) && nw + 1 < sizeof w) w[nw++] = (char)mt_lower((unsigned char)c);
    }
    if (words > 1) {
        int r = add_new(d, whole, nwhole);
        if (r < 0) return -1;
        added += r;
    }
    return added;
}

const char *mt_dict_pick(const mt_env *env) {
    const mt_dict *d = &env->m->dict;
    int total = mt_dict_count(env);
    if (total == 0) return NULL;
    uint32_t k = fl_rng_below(env->r, (uint32_t)total);
    return (int)k < d->n ? d->tok[k] : env->extra->tok[k - (uint32_t)d->n];
}
