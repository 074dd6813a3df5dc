/* The findings of the oracles: kind names, signatures, and appending a finding to this case's
 * list once per signature (ora_add, shared by oracle.c and oracle_loop.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "flare/agents/oracle.h"
#include "agents/oracle/oracle_int.h"

static const char *const kind_names[FL_FIND_COUNT_] = {
    "crash",    "hang",     "no_output",      "empty_output",     "turn_limit",   "message_limit",
    "loop",     "tool_error", "protocol",     "spec_violation",   "forbidden_output", "output_length",
    "llm_judge", "expectation"};

const char *fl_finding_kind_name(fl_finding_kind k) { return (unsigned)k < FL_FIND_COUNT_ ? kind_names[k] : "?"; }

int fl_finding_kind_parse(const char *name) {
    for (int k = 0; name && k < FL_FIND_COUNT_; k++)
        if (!strcmp(kind_names[k], name)) return k;
    return -1;
}

void fl_oracle_signature(const char *key, char out[17]) {
    uint64_t h = fl_aghash_final(fl_aghash_str(FL_AGHASH_INIT, key));
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void fl_findings_clear(fl_findings *f) { f->n = 0; }

void fl_findings_free(fl_findings *f) {
    free(f->v);
    *f = (fl_findings){0};
}

void ora_add(ora *x, fl_finding_kind kind, const char *mast, int event, const char *key, const char *fmt, ...) {
    if (x->oom || !(x->o.kinds & (1u << kind))) return;
    char sig[17];
    fl_oracle_signature(key, sig);
    for (int i = x->first; i < x->out->n; i++)
        if (!strcmp(x->out->v[i].signature, sig)) return;
    if (x->out->n - x->first >= FL_ORACLE_MAX_FINDINGS) return;
    if (x->out->n == x->out->cap) {
        int cap = x->out->cap ? x->out->cap * 2 : 8;
        fl_finding *p = realloc(x->out->v, (size_t)cap * sizeof *p);
        if (!p) {
            x->oom = 1;
            return;
        }
        x->out->v = p;
        x->out->cap = cap;
    }
    fl_finding *f = &x->out->v[x->out->n++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->mast = mast;
    f->event = event;
    memcpy(f->signature, sig, sizeof sig);
    snprintf(f->key, sizeof f->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
}

/* line [a, b) with digits as '#', runs of them as one, trimmed, appended to out */
static size_t norm_line(const char *a, const char *b, char *out, size_t k, size_t n) {
    while (a < b && (*a == ' ' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) b--;
    for (const char *p = a; p < b && k + 1 < n; p++) {
        if (*p >= '0' && *p <= '9') {
            if (k && out[k - 1] == '#') continue;
            out[k++] = '#';
        } else {
            out[k++] = (unsigned char)*p < 0x20 ? ' ' : *p;
        }
    }
    out[k < n ? k : n - 1] = 0;
    return k;
}

static int starts(const char *a, const char *b, const char *w) {
    while (a < b && (*a == ' ' || *a == '\t')) a++;
    size_t l = strlen(w);
    return (size_t)(b - a) >= l && !strncmp(a, w, l);
}

void fl_oracle_stderr_key(const char *err, char *out, size_t n) {
    if (!n) return;
    out[0] = 0;
    if (!err) return;
    /* Python prints the innermost frame last, before the exception line; JavaScript prints the
     * error line, then its innermost frame first ("at ..."), the outermost last */
    const char *last_a = NULL, *last_b = NULL, *fr_a = NULL, *fr_b = NULL;
    const char *js_a = NULL, *js_b = NULL, *jerr_a = NULL, *jerr_b = NULL, *prev_a = NULL, *prev_b = NULL;
    int last_js = 0;
    for (const char *a = err; *a;) {
        const char *b = strchr(a, '\n');
        if (!b) b = a + strlen(a);
        const char *q = a;
        while (q < b && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < b && !starts(a, b, "[flare:")) {
            int js = starts(a, b, "at ");
            if (starts(a, b, "File \"")) fr_a = a, fr_b = b;
            if (js && !last_js) js_a = a, js_b = b, jerr_a = prev_a, jerr_b = prev_b;
            last_js = js;
            prev_a = last_a = a, prev_b = last_b = b;
        }
        a = *b ? b + 1 : b;
    }
    if (!last_a) return;
    if (last_js) { /* a JavaScript stack: its innermost frame and the error line above it */
        fr_a = js_a, fr_b = js_b;
        if (jerr_a) last_a = jerr_a, last_b = jerr_b;
        else last_a = js_a, last_b = js_b;
    }
    size_t k = 0;
    if (fr_a && fr_a != last_a) {
        k = norm_line(fr_a, fr_b, out, k, n);
        if (k + 4 < n) memcpy(out + k, " | ", 4), k += 3;
    }
    /* "ValueError: bad input 42": the exception's type, not its message */
    const char *colon = memchr(last_a, ':', (size_t)(last_b - last_a)), *p = last_a;
    while (p < last_b && (*p == ' ' || *p == '\t')) p++;
    int ident = colon && colon > p;
    for (const char *c = p; ident && c < colon; c++)
        ident = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                *c == '.';
    norm_line(last_a, ident ? colon : last_b, out, k, n);
}

/* s for a finding's message: control characters as spaces, cut at cap - 4 bytes on a whole
 * UTF-8 character with "..." (here, beside ora_add, so every oracle file calls only down). */
const char *ora_snip(const char *s, char *buf, size_t cap) {
    size_t k = 0, n = s ? strlen(s) : 0, max = cap > 4 ? cap - 4 : 0;
    for (size_t i = 0; i < n && k < max; i++) buf[k++] = (unsigned char)s[i] < 0x20 ? ' ' : s[i];
    if (k < n) {
        while (k > 0 && ((unsigned char)buf[k] & 0xc0) == 0x80) k--; /* a whole UTF-8 character */
        memcpy(buf + k, "...", 4);
    } else {
        buf[k] = 0;
    }
    return buf;
}
