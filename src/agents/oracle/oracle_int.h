/* Internal to the oracles (oracle.c, oracle_loop.c, findings.c): the state of one check. */
#ifndef FLARE_ORACLE_INT_H
#define FLARE_ORACLE_INT_H

#include "flare/agents/expect.h"
#include "flare/agents/oracle.h"

typedef struct ora {
    const fl_spec *spec;
    const fl_trace *t;
    fl_oracle_opts o;
    fl_findings *out;
    int first;          /* this case's findings start at out->v[first] */
    int oom;
    size_t input_bytes; /* the case's user turns, for messages */
} ora;

/* Append a finding unless its signature is already among this case's findings (findings.c). */
void ora_add(ora *x, fl_finding_kind kind, const char *mast, int event, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* s shortened to fit buf (control characters as spaces, "..." when cut). */
const char *ora_snip(const char *s, char *buf, size_t cap);
void ora_check_loops(ora *x);
/* Forbidden patterns and the secret detector on every channel (oracle_forbidden.c). */
void ora_check_forbidden(ora *x);
/* The case's own expectations (oracle_expect.c). */
void ora_check_expect(ora *x, const fl_expect *ex);

#endif
