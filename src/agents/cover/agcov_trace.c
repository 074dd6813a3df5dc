/* Views of a trace that coverage and the oracles share: who acted in each event, the ordered
 * handoff edges (with the implicit user -> first agent and producer -> output edges), turns,
 * message counts; and the small hashes both use. Definitions: include/flare/agents/agcov.h and
 * docs/agents-coverage.md. */
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"

uint64_t fl_aghash_str(uint64_t h, const char *s) {
    s = s ? s : "";
    return fl_fnv1a(fl_fnv1a(h, s, strlen(s)), "\xff", 1);
}

uint64_t fl_aghash_u64(uint64_t h, uint64_t v) {
    unsigned char b[8]; /* little-endian, whatever the machine's order */
    for (int k = 0; k < 8; k++, v >>= 8) b[k] = (unsigned char)(v & 0xff);
    return fl_fnv1a(h, b, 8);
}

uint64_t fl_aghash_final(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int is_user(const char *a) { return a && !strcmp(a, "user"); }

/* The agent an event is attributed to, outputs excepted (NULL when none). */
static const char *event_agent(const fl_event *ev) {
    switch (ev->kind) {
    case FL_EV_MESSAGE:
    case FL_EV_TOOL_CALL:
    case FL_EV_TOOL_RESULT:
    case FL_EV_BRANCH:
    case FL_EV_ERROR: return ev->agent;
    default: return NULL;
    }
}

/* Who holds control after event ev (NULL: unchanged). */
static const char *holder_after(const fl_event *ev) {
    if (ev->kind == FL_EV_MESSAGE) return is_user(ev->to) || !ev->to ? ev->agent : ev->to;
    return event_agent(ev);
}

const char *fl_agtrace_holder(const fl_trace *t, int n, const fl_spec *spec) {
    for (int j = (n < t->n_events ? n : t->n_events) - 1; j >= 0; j--) {
        const char *h = holder_after(&t->events[j]);
        if (h) return h;
    }
    return spec ? spec->agents[spec->entry].name : NULL;
}

const char *fl_agtrace_actor(const fl_trace *t, int i, const fl_spec *spec) {
    if (i < 0 || i >= t->n_events) return NULL;
    if (t->events[i].kind == FL_EV_OUTPUT) return t->events[i].agent ? t->events[i].agent : fl_agtrace_holder(t, i, spec);
    return event_agent(&t->events[i]);
}

int fl_agtrace_edges(const fl_trace *t, const fl_spec *spec, fl_agedge **out) {
    *out = NULL;
    int n = 0, first = 1;
    /* at most one edge per event, plus the implicit first one */
    fl_agedge *e = malloc((size_t)(t->n_events + 1) * sizeof *e);
    if (!e) return -1;
    const char *holder = spec ? spec->agents[spec->entry].name : NULL;
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        const char *actor = ev->kind == FL_EV_OUTPUT ? (ev->agent ? ev->agent : holder) : event_agent(ev);
        if (first && actor) {
            first = 0;
            if (!is_user(actor))
                e[n++] = (fl_agedge){"user", actor, -1};
        }
        if (ev->kind == FL_EV_MESSAGE) e[n++] = (fl_agedge){ev->agent, ev->to, i};
        else if (ev->kind == FL_EV_OUTPUT) e[n++] = (fl_agedge){actor ? actor : "?", "output", i};
        const char *h = holder_after(ev);
        if (h) holder = h;
    }
    *out = e;
    return n;
}

int fl_agtrace_turns(const fl_trace *t) {
    int turns = 0;
    const char *prev = NULL;
    for (int i = 0; i < t->n_events; i++) {
        const char *a = event_agent(&t->events[i]);
        if (!a || is_user(a)) continue;
        if (!prev || strcmp(prev, a)) turns++;
        prev = a;
    }
    return turns;
}

int fl_agtrace_messages(const fl_trace *t) {
    int n = 0;
    for (int i = 0; i < t->n_events; i++) n += t->events[i].kind == FL_EV_MESSAGE;
    return n;
}

int fl_agtrace_last_output(const fl_trace *t) {
    for (int i = t->n_events - 1; i >= 0; i--)
        if (t->events[i].kind == FL_EV_OUTPUT) return i;
    return -1;
}
