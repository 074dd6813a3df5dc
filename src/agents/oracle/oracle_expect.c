/* The expectation oracle: a case's own "expect" (include/flare/agents/expect.h) checked on its
 * trace. contains / not_contains / regex look at the final output (no output: the positive
 * ones fail, the negative ones hold); max_turns counts agent turns as the turn limit does;
 * must_call / must_not_call look at the tool calls of every agent. Keys name the expectation
 * and its value ("expectation:must_not_call:delete_user"): the value is the seed author's, not
 * the system's content, so the same broken expectation is one finding however it was reached. */
#include <stdio.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "agents/oracle/oracle_int.h"

static int called(const fl_trace *t, const char *tool, int *at) {
    for (int i = 0; i < t->n_events; i++)
        if (t->events[i].kind == FL_EV_TOOL_CALL && t->events[i].tool && !strcmp(t->events[i].tool, tool)) {
            *at = i;
            return 1;
        }
    *at = -1;
    return 0;
}

static void fail(ora *x, int event, const char *what, const char *value, const char *detail) {
    char key[192], v[96];
    snprintf(key, sizeof key, "expectation:%s:%s", what, ora_snip(value, v, sizeof v));
    ora_add(x, FL_FIND_EXPECT, "FM-1.1", event, key, "the case's expectation %s \"%s\" does not hold: %s", what, v,
            detail);
}

void ora_check_expect(ora *x, const fl_expect *ex) {
    const fl_trace *t = x->t;
    int last = fl_agtrace_last_output(t);
    const char *out = last >= 0 && t->events[last].content ? t->events[last].content : NULL;
    char snip[96], detail[192];
    snprintf(detail, sizeof detail, out ? "the output (event %d) is \"%s\"" : "the case has no output%.0d%s", last,
             out ? ora_snip(out, snip, sizeof snip) : "");
    for (int i = 0; i < ex->contains.n; i++)
        if (!out || !strstr(out, ex->contains.v[i])) fail(x, last, "contains", ex->contains.v[i], detail);
    for (int i = 0; i < ex->not_contains.n; i++)
        if (out && strstr(out, ex->not_contains.v[i])) fail(x, last, "not_contains", ex->not_contains.v[i], detail);
    for (int i = 0; i < ex->regex.n; i++)
        if (!out || regexec(&ex->re[i], out, 0, NULL, 0) != 0) fail(x, last, "regex", ex->regex.v[i], detail);
    int turns = fl_agtrace_turns(t);
    if (ex->max_turns && turns > ex->max_turns) {
        char n[32], d[64];
        snprintf(n, sizeof n, "%d", ex->max_turns);
        snprintf(d, sizeof d, "%d agent turns", turns);
        fail(x, -1, "max_turns", n, d);
    }
    int at;
    for (int i = 0; i < ex->must_call.n; i++)
        if (!called(t, ex->must_call.v[i], &at)) fail(x, -1, "must_call", ex->must_call.v[i], "no agent called it");
    for (int i = 0; i < ex->must_not_call.n; i++)
        if (called(t, ex->must_not_call.v[i], &at)) {
            char d[96];
            snprintf(d, sizeof d, "%s called it (event %d)", t->events[at].agent ? t->events[at].agent : "?", at);
            fail(x, at, "must_not_call", ex->must_not_call.v[i], d);
        }
}
