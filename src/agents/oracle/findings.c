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
    "llm_judge"};

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
