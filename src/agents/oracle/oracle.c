/* Module agents/oracle — what counts as a failure in one trace: the rule oracles (this file),
 * the loop detector (oracle_loop.c) and the findings list both append to (findings.c).
 * Depends on protocol and cover (trace views, hashes). API: include/flare/agents/oracle.h;
 * definitions, options, MAST tags and their reasons: docs/agents-oracles.md.
 *
 * Signatures hash a key made only of the kind and the names involved (agents, edge, tool,
 * pattern name), so that a fuzzer that reaches the same defect through a thousand inputs
 * saves it once. Messages may quote contents (shortened); keys never do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "flare/agents/oracle.h"
#include "flare/agents/protocol.h"
#include "agents/oracle/oracle_int.h"

void fl_oracle_opts_default(fl_oracle_opts *o) {
    *o = (fl_oracle_opts){.max_turns = 50, .max_messages = 100, .max_output_bytes = 65536, .loop_repetitions = 4,
                          .loop_cycle = 4, .loop_match = FL_LOOP_EDGES, .recovery = FL_RECOVERY_SAME_TOOL,
                          .kinds = (1u << FL_FIND_COUNT_) - 1};
}

#define S(x) ((x) ? (x) : "?")

static const char *last_actor(const fl_trace *t, const fl_spec *spec) {
    const char *a = fl_agtrace_holder(t, t->n_events, spec);
    return a ? a : "(none)";
}

static void check_exit(ora *x) {
    const fl_trace *t = x->t;
    char key[192];
    const char *who = last_actor(t, x->spec);
    char how[160];
    switch (t->exit) {
    case FL_EXIT_CRASH:
        snprintf(key, sizeof key, "crash:%d:%s", t->exit_status, who);
        ora_add(x, FL_FIND_CRASH, NULL, t->n_events - 1, key, "%s; last agent active: %s, after %d events",
                fl_trace_describe_exit(t, how, sizeof how), who, t->n_events);
        break;
    case FL_EXIT_HANG:
        snprintf(key, sizeof key, "hang:%s", who);
        ora_add(x, FL_FIND_HANG, NULL, t->n_events - 1, key, "%s; last agent active: %s, after %d events",
                fl_trace_describe_exit(t, how, sizeof how), who, t->n_events);
        break;
    case FL_EXIT_EOF:
        ora_add(x, FL_FIND_PROTOCOL, NULL, t->n_events - 1, "protocol:eof",
                "the target closed its output without \"done\" after %d events", t->n_events);
        break;
    case FL_EXIT_LIMIT:
        ora_add(x, FL_FIND_PROTOCOL, NULL, t->n_events - 1, "protocol:limit",
                "the case's output exceeded the byte cap (%zu bytes read)", t->bytes);
        break;
    default: break;
    }
    /* the runner records EOF also as the problem "no done event", after any earlier ones */
    int bad = t->n_protocol - (t->exit == FL_EXIT_EOF && t->n_protocol > 0);
    if (bad > 0)
        ora_add(x, FL_FIND_PROTOCOL, NULL, -1, "protocol:bad_event", "%d protocol problem%s; first: %s", bad,
                bad == 1 ? "" : "s", t->protocol_msg[0] ? t->protocol_msg : "(no detail)");
}

static int blank(const char *s) {
    for (; s && *s; s++)
        if (!strchr(" \t\r\n\f\v", *s)) return 0;
    return 1;
}

static void check_output(ora *x) {
    const fl_trace *t = x->t;
    char key[192];
    int last = fl_agtrace_last_output(t);
    if (last < 0) {
        if (t->exit == FL_EXIT_DONE) {
            const char *who = last_actor(t, x->spec);
            snprintf(key, sizeof key, "no_output:%s", who);
            ora_add(x, FL_FIND_NO_OUTPUT, "FM-3.1", -1, key,
                    "the case ended (\"done\") without an output event; last agent active: %s", who);
        }
        return;
    }
    const char *prod = S(fl_agtrace_actor(t, last, x->spec));
    if (blank(t->events[last].content)) {
        snprintf(key, sizeof key, "empty_output:%s", prod);
        ora_add(x, FL_FIND_EMPTY_OUTPUT, "FM-3.1", last, key, "the final output (event %d, from %s) is empty", last, prod);
    }
    int64_t limit = x->spec && x->spec->max_output_bytes ? x->spec->max_output_bytes : x->o.max_output_bytes;
    const char *src = x->spec && x->spec->max_output_bytes ? x->spec->path : "default";
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        if (ev->kind != FL_EV_OUTPUT) continue;
        const char *who = S(fl_agtrace_actor(t, i, x->spec));
        size_t len = ev->content ? strlen(ev->content) : 0;
        if (limit > 0 && (int64_t)len > limit) {
            snprintf(key, sizeof key, "output_length:%s", who);
            ora_add(x, FL_FIND_OUTPUT_LENGTH, x->spec && x->spec->max_output_bytes ? "FM-1.1" : NULL, i, key,
                    "output (event %d, from %s) is %zu bytes, limit %lld (%s); input was %zu bytes", i, who, len,
                    (long long)limit, src, x->input_bytes);
        }
    }
}

static void check_limits(ora *x) {
    const fl_trace *t = x->t;
    const fl_spec *s = x->spec;
    int tl = s && s->max_turns ? s->max_turns : x->o.max_turns;
    int ml = s && s->max_messages ? s->max_messages : x->o.max_messages;
    const char *tsrc = s && s->max_turns ? s->path : "default", *msrc = s && s->max_messages ? s->path : "default";
    int turns = fl_agtrace_turns(t), msgs = fl_agtrace_messages(t);
    if (tl > 0 && turns > tl) {
        /* the event that started turn tl+1 */
        int k = 0, at = -1;
        const char *prev = NULL;
        for (int i = 0; i < t->n_events && at < 0; i++) {
            const fl_event *ev = &t->events[i];
            if (ev->kind == FL_EV_OUTPUT || ev->kind == FL_EV_DONE || !ev->agent || !strcmp(ev->agent, "user")) continue;
            if (!prev || strcmp(prev, ev->agent)) k++;
            prev = ev->agent;
            if (k > tl) at = i;
        }
        ora_add(x, FL_FIND_TURN_LIMIT, "FM-1.5", at, "turn_limit", "%d agent turns, limit %d (%s); turn %d starts at event %d",
                turns, tl, tsrc, tl + 1, at);
    }
    if (ml > 0 && msgs > ml) {
        int k = 0, at = -1;
        for (int i = 0; i < t->n_events && at < 0; i++)
            if (t->events[i].kind == FL_EV_MESSAGE && ++k > ml) at = i;
        ora_add(x, FL_FIND_MESSAGE_LIMIT, "FM-1.5", at, "message_limit", "%d messages, limit %d (%s); message %d is event %d",
                msgs, ml, msrc, ml + 1, at);
    }
}

/* Is the failure at event i (agent a, tool) handled before event `until`? */
static int recovered(const ora *x, int i, int until) {
    const fl_event *f = &x->t->events[i];
    for (int j = i + 1; j < until; j++) {
        const fl_event *ev = &x->t->events[j];
        int same_agent = ev->agent && f->agent && !strcmp(ev->agent, f->agent);
        if (ev->kind == FL_EV_TOOL_RESULT && ev->ok) {
            int same_tool = ev->tool && f->tool && !strcmp(ev->tool, f->tool);
            if (same_tool) return 1;
            if (x->o.recovery != FL_RECOVERY_SAME_TOOL && same_agent) return 1;
        }
        if (x->o.recovery == FL_RECOVERY_ERROR_EVENT && ev->kind == FL_EV_ERROR && same_agent) return 1;
    }
    return 0;
}

static void check_tool_errors(ora *x) {
    const fl_trace *t = x->t;
    char key[192], snip[80];
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        if (ev->kind != FL_EV_TOOL_RESULT || ev->ok) continue;
        int j = i + 1;
        while (j < t->n_events && t->events[j].kind != FL_EV_OUTPUT) j++;
        if (j == t->n_events || recovered(x, i, j)) continue;
        snprintf(key, sizeof key, "tool_error:%s/%s", S(ev->agent), S(ev->tool));
        ora_add(x, FL_FIND_TOOL_ERROR, "FM-3.2", i, key,
                "tool %s of %s failed (event %d: \"%s\") and the output (event %d, from %s) followed without a "
                "successful %s",
                S(ev->tool), S(ev->agent), i, ora_snip(ev->content, snip, sizeof snip), j,
                S(fl_agtrace_actor(t, j, x->spec)), x->o.recovery == FL_RECOVERY_SAME_TOOL ? "retry" : "recovery");
    }
}

static int tool_declared(const fl_spec *s, const char *tool) {
    for (int a = 0; a < s->n_agents; a++)
        if (fl_spec_tool_find(s, a, tool) >= 0) return 1;
    return 0;
}

static void check_spec(ora *x) {
    const fl_spec *s = x->spec;
    const fl_trace *t = x->t;
    char key[192];
    fl_agedge *e;
    int n = fl_agtrace_edges(t, s, &e);
    if (n < 0) {
        x->oom = 1;
        return;
    }
    for (int i = 0; i < n; i++) {
        int ev = e[i].event >= 0 ? e[i].event : 0, a = fl_spec_agent_find(s, e[i].from), b = fl_spec_agent_find(s, e[i].to);
        if (a == FL_SPEC_NONE || b == FL_SPEC_NONE) { /* each undeclared end is its own finding */
            const char *ends[2] = {e[i].from, e[i].to};
            int bad[2] = {a == FL_SPEC_NONE, b == FL_SPEC_NONE};
            for (int k = 0; k < 2; k++) {
                if (!bad[k]) continue;
                snprintf(key, sizeof key, "spec_violation:agent:%s", S(ends[k]));
                ora_add(x, FL_FIND_SPEC, "FM-1.2", ev, key, "undeclared agent \"%s\" in handoff %s -> %s (event %d)",
                        S(ends[k]), S(e[i].from), S(e[i].to), e[i].event);
            }
        } else if (fl_spec_edge_find(s, a, b) < 0) {
            snprintf(key, sizeof key, "spec_violation:edge:%s>%s", S(e[i].from), S(e[i].to));
            ora_add(x, FL_FIND_SPEC, "FM-1.2", ev, key, "handoff %s -> %s is not an allowed edge (event %d%s)",
                    S(e[i].from), S(e[i].to), e[i].event, e[i].event < 0 ? ": the first agent to act" : "");
        }
    }
    free(e);
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        if (ev->kind == FL_EV_MESSAGE || ev->kind == FL_EV_OUTPUT || !ev->agent) continue;
        int a = fl_spec_agent_find(s, ev->agent);
        if (a == FL_SPEC_NONE) {
            snprintf(key, sizeof key, "spec_violation:agent:%s", ev->agent);
            ora_add(x, FL_FIND_SPEC, "FM-1.2", i, key, "undeclared agent \"%s\" acts (event %d)", ev->agent, i);
            /* its tools are still checked: one that no agent declares is a violation of its own */
            if ((ev->kind == FL_EV_TOOL_CALL || ev->kind == FL_EV_TOOL_RESULT) && !tool_declared(s, ev->tool)) {
                snprintf(key, sizeof key, "spec_violation:tool:%s/%s", ev->agent, S(ev->tool));
                ora_add(x, FL_FIND_SPEC, "FM-1.2", i, key,
                        "undeclared agent %s uses tool \"%s\", which no agent declares (event %d)", ev->agent,
                        S(ev->tool), i);
            }
            continue;
        }
        if (a < 0) continue; /* "user" acting is a protocol matter */
        if ((ev->kind == FL_EV_TOOL_CALL || ev->kind == FL_EV_TOOL_RESULT) && fl_spec_tool_find(s, a, ev->tool) < 0) {
            snprintf(key, sizeof key, "spec_violation:tool:%s/%s", ev->agent, S(ev->tool));
            ora_add(x, FL_FIND_SPEC, "FM-1.2", i, key, "agent %s uses tool \"%s\", not among its declared tools (event %d)",
                    ev->agent, S(ev->tool), i);
        } else if (ev->kind == FL_EV_BRANCH) {
            int ch, p = fl_spec_point_find(s, a, ev->point, ev->choice, &ch);
            /* decisions derived from LLM spans: a spec that does not declare the point says
             * nothing about them */
            if (p < 0 && ev->point && !strcmp(ev->point, FL_POINT_LLM_TOOL_CHOICE)) continue;
            if (p < 0) {
                snprintf(key, sizeof key, "spec_violation:decision:%s/%s", ev->agent, S(ev->point));
                ora_add(x, FL_FIND_SPEC, "FM-1.2", i, key, "agent %s decides at undeclared point \"%s\" (event %d)",
                        ev->agent, S(ev->point), i);
            } else if (ch < 0) {
                snprintf(key, sizeof key, "spec_violation:choice:%s/%s=%s", ev->agent, S(ev->point), S(ev->choice));
                ora_add(x, FL_FIND_SPEC, "FM-1.2", i, key, "agent %s chose undeclared \"%s\" at point \"%s\" (event %d)",
                        ev->agent, S(ev->choice), S(ev->point), i);
            }
        }
    }
}

fl_status fl_oracle_check(const fl_spec *spec, const fl_case *c, const fl_trace *t, const fl_oracle_opts *o,
                          fl_findings *out, fl_err *e) {
    ora x = {.spec = spec, .t = t, .out = out, .first = out->n};
    if (o) x.o = *o;
    else fl_oracle_opts_default(&x.o);
    if (x.o.loop_repetitions < 2 || x.o.loop_cycle < 1 || x.o.loop_cycle > 64)
        return fl_fail(e, FL_ERR_ARG, "oracles: loop repetitions %d (need >= 2) or cycle length %d (need 1..64)",
                       x.o.loop_repetitions, x.o.loop_cycle);
    for (int i = 0; c && i < c->n_turns; i++) x.input_bytes += c->turns[i] ? strlen(c->turns[i]) : 0;
    int before = out->n;
    check_exit(&x);
    if (t->err_len) /* the traceback's end groups crashes beside their trace signature */
        for (int i = before; i < out->n; i++) {
            fl_finding *f = &out->v[i];
            fl_oracle_stderr_key(t->err, f->stderr_key, sizeof f->stderr_key);
            if (!f->stderr_key[0]) continue;
            char key[256];
            snprintf(key, sizeof key, "stderr:%s", f->stderr_key);
            fl_oracle_signature(key, f->stderr_group);
        }
    check_output(&x);
    ora_check_forbidden(&x);
    check_limits(&x);
    if (x.o.kinds & (1u << FL_FIND_LOOP)) ora_check_loops(&x);
    check_tool_errors(&x);
    if (c && c->expect) ora_check_expect(&x, c->expect);
    if (spec && (x.o.kinds & (1u << FL_FIND_SPEC))) check_spec(&x);
    if (x.oom) return fl_fail(e, FL_ERR_NOMEM, "oracles: out of memory");
    return FL_OK;
}
