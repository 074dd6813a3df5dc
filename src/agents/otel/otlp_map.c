/* Spans of one trace -> protocol events (the rules and their sources: docs/agents-otel.md).
 *
 * Each span's role and fields come from the convention tables (otlp_conv.c), then from the
 * trace's shape (derive_roles); attribute values are read by otlp_value.c. Events are
 * produced per span and sorted by time (ties in span start order), so the result reads like
 * the event lines a system would have written itself.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"
#include "flare/agents/protocol.h"
#include "agents/otel/otlp_int.h"

/* ---- roles and names ----------------------------------------------------------------------- */
static const char *const role_names[] = {"other", "workflow", "agent", "tool", "llm", "create_agent",
                                         "handoff"};

const char *fl_otlp_role_name(fl_otlp_role r) {
    return (unsigned)r < sizeof role_names / sizeof role_names[0] ? role_names[r] : "?";
}

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

static const char *first_attr(const fl_otlp_span *s, fl_otlp_field f) { return fl_otlp_field_get(s, f); }

/* Tools that are handoffs by name: the OpenAI Agents SDK's transfer_to_<agent> (Python) and
 * handoff_to_<agent> spellings */
static const char *const handoff_prefixes[] = {"transfer_to_", "handoff_to_", NULL};

static const char *handoff_target(const char *tool) {
    for (const char *const *p = handoff_prefixes; *p; p++)
        if (starts(tool, *p) && tool[strlen(*p)]) return tool + strlen(*p);
    return NULL;
}

/* ---- the events, collected with their times, then sorted ----------------------------------- */
typedef struct mev {
    uint64_t t;
    int seq;
    fl_event ev;
} mev;

typedef struct evlist {
    mev *v;
    int n, cap;
    int oom;
} evlist;

static char *dupn(const char *s) { return s ? fl_utf8_dup(s, strlen(s)) : NULL; }

static void ev_free(fl_event *ev) {
    free(ev->agent), free(ev->to), free(ev->tool), free(ev->point), free(ev->choice);
    free(ev->content), free(ev->arguments);
}

static void add(evlist *L, uint64_t t, fl_event ev) {
    if (L->oom) return;
    if (L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 16;
        mev *nv = realloc(L->v, (size_t)cap * sizeof *nv);
        if (!nv) { L->oom = 1; return; }
        L->v = nv;
        L->cap = cap;
    }
    fl_event d = ev;
    d.agent = dupn(ev.agent), d.to = dupn(ev.to), d.tool = dupn(ev.tool), d.point = dupn(ev.point);
    d.choice = dupn(ev.choice), d.content = dupn(ev.content), d.arguments = dupn(ev.arguments);
    if ((ev.agent && !d.agent) || (ev.to && !d.to) || (ev.tool && !d.tool) || (ev.point && !d.point) ||
        (ev.choice && !d.choice) || (ev.content && !d.content) || (ev.arguments && !d.arguments)) {
        ev_free(&d);
        L->oom = 1;
        return;
    }
    L->v[L->n] = (mev){t, L->n, d};
    L->n++;
}

static int mev_cmp(const void *a, const void *b) {
    const mev *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->seq - y->seq;
}

/* ---- the mapping --------------------------------------------------------------------------- */
typedef struct mctx {
    const fl_otlp_span *sp;
    int n;
    fl_otlp_role *role;
    int *parent; /* index of the parent span within the trace, -1 */
    char *usage_below; /* 1: a descendant reports token usage */
} mctx;

static const char *agent_of(const mctx *m, int i) {
    const char *a = fl_otlp_agent_name(&m->sp[i]);
    if (a) return a;
    return m->role[i] == FL_OTLP_AGENT ? m->sp[i].name : NULL;
}

/* The nearest agent span above i (not i itself), -1. Bounded against parent cycles. */
static int agent_above(const mctx *m, int i) {
    for (int k = 0, p = m->parent[i]; p >= 0 && k < m->n; p = m->parent[p], k++)
        if (m->role[p] == FL_OTLP_AGENT) return p;
    return -1;
}

/* The tool span that agent span j runs inside (a few levels up, no other agent between), -1:
 * a sub-agent called as a tool (agent.asTool, a route_to_x tool that runs x). */
static int tool_above(const mctx *m, int j) {
    for (int k = 0, p = m->parent[j]; p >= 0 && k < 4; p = m->parent[p], k++) {
        if (m->role[p] == FL_OTLP_TOOL) return p;
        if (m->role[p] == FL_OTLP_AGENT) break;
    }
    return -1;
}

/* An agent span run inside tool span i, -1. */
static int agent_below(const mctx *m, int i) {
    for (int j = 0; j < m->n; j++)
        if (m->role[j] == FL_OTLP_AGENT && tool_above(m, j) == i) return j;
    return -1;
}

static int workflow_above(const mctx *m, int i) {
    for (int k = 0, p = m->parent[i]; p >= 0 && k < m->n; p = m->parent[p], k++)
        if (m->role[p] == FL_OTLP_WORKFLOW) return 1;
    return 0;
}

/* The agent a tool/branch belongs to: its own agent attribute, else the enclosing agent. */
static const char *context_agent(const mctx *m, int i) {
    const char *a = m->role[i] == FL_OTLP_AGENT ? agent_of(m, i) : fl_otlp_agent_name(&m->sp[i]);
    if (a) return a;
    int p = agent_above(m, i);
    return p >= 0 ? agent_of(m, p) : "unknown";
}

/* Pending handoff targets: an agent span whose arrival a handoff already announced draws no
 * implicit edge. Names match loosely (case, and ' ' '-' '_' alike), because a transfer tool is
 * named after the agent in snake case ("transfer_to_french_agent" for "French Agent"); the
 * handoff message then takes the agent's own spelling. */
typedef struct pend {
    const char *names[64];
    int ev[64]; /* index of the MESSAGE event in the list */
    int n;
} pend;

static void pend_add(pend *p, const char *name, int ev) {
    if (p->n < 64) p->names[p->n] = name, p->ev[p->n++] = ev;
}

static int loose_eq(const char *a, const char *b) {
    for (;; a++, b++) {
        int x = (unsigned char)*a, y = (unsigned char)*b;
        x = x == ' ' || x == '-' ? '_' : x >= 'A' && x <= 'Z' ? x + 32 : x;
        y = y == ' ' || y == '-' ? '_' : y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (x != y) return 0;
        if (!x) return 1;
    }
}

/* The pending entry announcing name, -1. Its message takes name's spelling. */
static int pend_find(pend *p, evlist *L, const char *name) {
    for (int i = 0; i < p->n; i++) {
        if (!loose_eq(p->names[i], name)) continue;
        int k = p->ev[i];
        if (k >= 0 && k < L->n && strcmp(L->v[k].ev.to, name)) {
            char *to = dupn(name);
            if (!to) L->oom = 1;
            else free(L->v[k].ev.to), L->v[k].ev.to = to;
        }
        return i;
    }
    return -1;
}

static int pend_take(pend *p, evlist *L, const char *name) {
    int i = pend_find(p, L, name);
    if (i < 0) return 0;
    p->names[i] = p->names[p->n - 1], p->ev[i] = p->ev[p->n - 1], p->n--;
    return 1;
}

static int64_t usage(const fl_otlp_span *s, int out) {
    static const char *const in_keys[] = {"gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                                          "llm.token_count.prompt", NULL};
    static const char *const out_keys[] = {"gen_ai.usage.output_tokens",
                                           "gen_ai.usage.completion_tokens",
                                           "llm.token_count.completion", NULL};
    int64_t v;
    for (const char *const *k = out ? out_keys : in_keys; *k; k++)
        if (fl_otlp_attr_int(s, *k, &v) && v > 0) return v;
    return 0;
}

static int start_cmp(const fl_otlp_span *sp, int a, int b) {
    if (sp[a].start_ns != sp[b].start_ns) return sp[a].start_ns < sp[b].start_ns ? -1 : 1;
    return a - b;
}

static void map_spans(const mctx *m, const int *order, evlist *L, int64_t *tin, int64_t *tout) {
    const fl_otlp_span *sp = m->sp;
    pend pending = {{0}, {0}, 0};
    const char *prev_top = "user";
    char *buf;
    for (int oi = 0; oi < m->n; oi++) {
        int i = order[oi];
        const fl_otlp_span *s = &sp[i];
        switch (m->role[i]) {
        case FL_OTLP_HANDOFF: {
            const char *to = fl_otlp_attr_str(s, "to_agent");
            const char *from = fl_otlp_attr_str(s, "from_agent");
            if (!to || !to[0]) break;
            if (!from || !from[0]) from = context_agent(m, i);
            /* the SDK's handoff span after its transfer_to_<x> tool span: one edge, not two */
            if (pend_find(&pending, L, to) >= 0) break;
            buf = otlp_message_text(first_attr(s, FL_OTLP_F_INPUT));
            if (!buf) L->oom = 1;
            add(L, s->start_ns, (fl_event){.kind = FL_EV_MESSAGE, .agent = (char *)from, .to = (char *)to,
                                           .content = buf});
            free(buf);
            pend_add(&pending, to, L->n - 1);
            break;
        }
        case FL_OTLP_TOOL: {
            const char *agent = context_agent(m, i), *tool = fl_otlp_tool_name(s);
            if (!tool) tool = s->name;
            /* a sub-agent called as a tool (agent.asTool): an edge to it, not a tool call */
            int sub = agent_below(m, i);
            if (sub >= 0) {
                add(L, s->start_ns, (fl_event){.kind = FL_EV_MESSAGE, .agent = (char *)agent,
                                               .to = (char *)agent_of(m, sub), .content = (char *)""});
                pend_add(&pending, agent_of(m, sub), L->n - 1);
                /* ... and back when the tool returns: the caller holds control again (its
                 * answer is its own), the sub-agent's result is the message */
                const char *res = fl_otlp_field_raw(s, FL_OTLP_F_RESULT);
                int failed = 0;
                char *unwrapped = otlp_unwrap_result(res, &failed);
                add(L, s->end_ns, (fl_event){.kind = FL_EV_MESSAGE, .agent = (char *)agent_of(m, sub),
                                             .to = (char *)agent,
                                             .content = (char *)(unwrapped ? unwrapped : res ? res : "")});
                free(unwrapped);
                break;
            }
            const char *to = handoff_target(tool);
            if (to) { /* a handoff tool: an edge, not a tool */
                add(L, s->start_ns, (fl_event){.kind = FL_EV_MESSAGE, .agent = (char *)agent,
                                               .to = (char *)to, .content = (char *)""});
                pend_add(&pending, to, L->n - 1);
                break;
            }
            const char *args = first_attr(s, FL_OTLP_F_ARGS), *res = fl_otlp_field_raw(s, FL_OTLP_F_RESULT);
            buf = args ? otlp_json_text(args, first_attr(s, FL_OTLP_F_ARGS_MIME)) : NULL;
            if (args && !buf) L->oom = 1;
            add(L, s->start_ns, (fl_event){.kind = FL_EV_TOOL_CALL, .agent = (char *)agent,
                                           .tool = (char *)tool, .arguments = buf});
            free(buf);
            int failed = otlp_is_error(s);
            char *unwrapped = otlp_unwrap_result(res, &failed);
            add(L, s->end_ns, (fl_event){.kind = FL_EV_TOOL_RESULT, .agent = (char *)agent, .tool = (char *)tool,
                                         .ok = !failed,
                                         .content = (char *)(unwrapped ? unwrapped : res && (res[0] || !failed) ? res
                                                             : !failed ? "" : otlp_error_text(s))});
            free(unwrapped);
            break;
        }
        case FL_OTLP_AGENT: {
            const char *name = agent_of(m, i);
            int up = agent_above(m, i);
            /* OpenInference's graph.node.parent_id names the calling agent outright */
            const char *parent = first_attr(s, FL_OTLP_F_PARENT_AGENT);
            const char *from = parent ? parent : up >= 0 ? agent_of(m, up) : prev_top;
            if (up < 0) prev_top = name;
            /* a sub-agent run by a tool: the tool span draws its edge */
            if (!pend_take(&pending, L, name) && strcmp(from, name) && tool_above(m, i) < 0) {
                buf = otlp_message_text(first_attr(s, FL_OTLP_F_INPUT));
                if (!buf) L->oom = 1;
                add(L, s->start_ns, (fl_event){.kind = FL_EV_MESSAGE, .agent = (char *)from,
                                               .to = (char *)name, .content = buf});
                free(buf);
            }
            if (otlp_is_error(s))
                add(L, s->end_ns, (fl_event){.kind = FL_EV_ERROR, .agent = (char *)name,
                                             .content = (char *)otlp_error_text(s)});
            break;
        }
        case FL_OTLP_LLM: {
            /* the model's decision: which tools (or handoff tools) it called, or "answer";
             * placed at the call's start, because frameworks' millisecond clocks often end
             * the LLM span after the tool span it chose has started */
            int got = fl_otlp_llm_choice(s, &buf);
            if (got < 0) L->oom = 1;
            if (got > 0)
                add(L, s->start_ns, (fl_event){.kind = FL_EV_BRANCH, .agent = (char *)context_agent(m, i),
                                             .point = (char *)FL_POINT_LLM_TOOL_CHOICE, .choice = buf});
            free(buf);
            break;
        }
        default: break;
        }
        /* branches: span events named flare.branch (flare's own extension, see the docs) */
        for (int k = 0; k < s->n_events; k++) {
            const fl_otlp_event *ev = &s->events[k];
            if (strcmp(ev->name, "flare.branch")) continue;
            const char *point = NULL, *choice = NULL, *agent = NULL;
            for (int a = 0; a < ev->n_attrs; a++) {
                if (!strcmp(ev->attrs[a].key, "point")) point = ev->attrs[a].text;
                if (!strcmp(ev->attrs[a].key, "choice")) choice = ev->attrs[a].text;
                if (!strcmp(ev->attrs[a].key, "agent")) agent = ev->attrs[a].text;
            }
            if (!point || !choice) continue;
            add(L, ev->time_ns ? ev->time_ns : s->start_ns,
                (fl_event){.kind = FL_EV_BRANCH, .agent = (char *)(agent ? agent : context_agent(m, i)),
                           .point = (char *)point, .choice = (char *)choice});
        }
        /* tokens: only spans without a descendant reporting usage (no double counting of
         * totals that frameworks also put on agent spans) */
        int64_t ui = usage(s, 0), uo = usage(s, 1);
        if ((ui || uo) && !m->usage_below[i]) *tin += ui, *tout += uo;
    }
    /* the final answer of each turn: every outermost workflow span's output, else every root
     * span's (a multi-turn case runs the graph once per turn), else the last top-level
     * agent's; an empty output is an empty answer */
    int found = 0;
    for (int pass = 0; pass < 3 && !found; pass++)
        for (int oi = 0; oi < m->n; oi++) {
            int i = pass == 2 ? order[m->n - 1 - oi] : order[oi];
            int fits = pass == 0 ? m->role[i] == FL_OTLP_WORKFLOW && !workflow_above(m, i)
                     : pass == 1 ? m->parent[i] < 0
                                 : m->role[i] == FL_OTLP_AGENT && agent_above(m, i) < 0;
            const char *v = fits ? fl_otlp_field_raw(&sp[i], FL_OTLP_F_OUTPUT) : NULL;
            if (!v) continue;
            found++;
            buf = otlp_state_answer(v);
            if (!buf) buf = otlp_json_string(v);
            if (!buf) buf = otlp_message_text(v);
            if (!buf) L->oom = 1;
            add(L, sp[i].end_ns, (fl_event){.kind = FL_EV_OUTPUT, .content = buf});
            free(buf);
            if (pass == 2) break;
        }
}

static int is_openinference(const fl_otlp_span *s) {
    const char *c;
    fl_otlp_classify_conv(s, &c);
    return c && !strcmp(c, "openinference");
}

/* qsort has no context argument in C11; mapping runs on one thread at a time per call site,
 * but campaigns may map on several threads: the comparator reads the ids through a
 * thread-local pointer. */
static _Thread_local const fl_otlp_span *g_ids;
static int id_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(g_ids[x].span_id, g_ids[y].span_id);
    return c ? c : x - y;
}

static int order_cmp(const void *a, const void *b) {
    return start_cmp(g_ids, *(const int *)a, *(const int *)b);
}

/* Each span's role: its table's (otlp_conv.c), then what the trace's shape says (docs §2);
 * parent[i]: the index of i's parent span, -1 (byid, mark: n scratch entries each). */
static void derive_roles(const fl_otlp_span *spans, int n, fl_otlp_role *role, int *parent, int *byid,
                         char *mark) {
    for (int i = 0; i < n; i++) role[i] = fl_otlp_classify(&spans[i]), parent[i] = -1, mark[i] = 0;
    /* parents: span ids sorted once, then a binary search per span */
    for (int i = 0; i < n; i++) byid[i] = i;
    g_ids = spans;
    qsort(byid, (size_t)n, sizeof *byid, id_cmp);
    for (int i = 0; i < n; i++) {
        if (!spans[i].parent_id[0]) continue;
        int lo = 0, hi = n - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2, c = strcmp(spans[byid[mid]].span_id, spans[i].parent_id);
            if (!c) { parent[i] = byid[mid] != i ? byid[mid] : -1; break; }
            if (c < 0) lo = mid + 1;
            else hi = mid - 1;
        }
    }
    /* a CHAIN span whose parent is outside the trace's spans (the case's own span, from the
     * request's traceparent) is the graph's root: the workflow */
    for (int i = 0; i < n; i++) {
        const char *k = fl_otlp_attr_str(&spans[i], "openinference.span.kind");
        if (role[i] == FL_OTLP_OTHER && parent[i] < 0 && k && !strcmp(k, "CHAIN")) role[i] = FL_OTLP_WORKFLOW;
    }
    /* a root agent span over other agents is the run's workflow (the OpenAI Agents SDK's
     * trace root is an AGENT span named after the workflow), not an agent */
    for (int i = 0; i < n; i++)
        if (role[i] == FL_OTLP_AGENT && parent[i] >= 0 && parent[parent[i]] < 0 &&
            role[parent[i]] == FL_OTLP_AGENT && is_openinference(&spans[parent[i]]))
            mark[parent[i]] = 1;
    for (int i = 0; i < n; i++)
        if (mark[i]) role[i] = FL_OTLP_WORKFLOW, mark[i] = 0;
}

fl_status fl_otlp_roles(const fl_otlp_span *spans, int n, fl_otlp_role *roles, fl_err *e) {
    if (n <= 0) return FL_OK;
    int *parent = calloc((size_t)n, sizeof *parent), *byid = calloc((size_t)n, sizeof *byid);
    char *mark = calloc((size_t)n, 1);
    fl_status st = FL_OK;
    if (!parent || !byid || !mark) st = fl_fail(e, FL_ERR_NOMEM, "OTLP: out of memory for %d spans", n);
    else derive_roles(spans, n, roles, parent, byid, mark);
    free(parent), free(byid), free(mark);
    return st;
}

fl_status fl_otlp_map(const fl_otlp_span *spans, int n, fl_trace *out, fl_err *e) {
    if (n <= 0) return FL_OK;
    mctx m = {spans, n, calloc((size_t)n, sizeof *m.role), calloc((size_t)n, sizeof *m.parent),
              calloc((size_t)n, 1)};
    int *order = calloc((size_t)n, sizeof *order), *byid = calloc((size_t)n, sizeof *byid);
    evlist L = {0};
    fl_status st = FL_OK;
    if (!m.role || !m.parent || !m.usage_below || !order || !byid) goto nomem;
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        order[i] = i;
        if (spans[i].start_ns < t0) t0 = spans[i].start_ns;
    }
    derive_roles(spans, n, m.role, m.parent, byid, m.usage_below);
    /* spans below which usage is reported (bounded walk: ids may form cycles) */
    for (int i = 0; i < n; i++) {
        if (!usage(&spans[i], 0) && !usage(&spans[i], 1)) continue;
        for (int k = 0, p = m.parent[i]; p >= 0 && k < n && !m.usage_below[p]; p = m.parent[p], k++)
            m.usage_below[p] = 1;
    }
    /* span indices by start time, ties in arrival order */
    g_ids = spans;
    qsort(order, (size_t)n, sizeof *order, order_cmp);
    map_spans(&m, order, &L, &out->tokens_in, &out->tokens_out);
    if (L.oom) goto nomem;
    if (L.n) qsort(L.v, (size_t)L.n, sizeof *L.v, mev_cmp);
    /* append, before a trailing DONE */
    int has_done = out->n_events > 0 && out->events[out->n_events - 1].kind == FL_EV_DONE;
    if (out->n_events + L.n > out->cap_events) {
        int cap = out->cap_events ? out->cap_events : 16;
        while (cap < out->n_events + L.n) cap *= 2;
        fl_event *ne = realloc(out->events, (size_t)cap * sizeof *ne);
        if (!ne) goto nomem;
        out->events = ne;
        out->cap_events = cap;
    }
    fl_event done;
    if (has_done) done = out->events[--out->n_events];
    for (int i = 0; i < L.n; i++) {
        L.v[i].ev.t_ms = (double)(L.v[i].t - (L.v[i].t >= t0 ? t0 : L.v[i].t)) / 1e6;
        out->events[out->n_events++] = L.v[i].ev;
    }
    if (has_done) out->events[out->n_events++] = done;
    L.n = 0;
    goto done;
nomem:
    st = fl_fail(e, FL_ERR_NOMEM, "OTLP: out of memory mapping %d spans", n);
done:
    for (int i = 0; i < L.n; i++) ev_free(&L.v[i].ev);
    free(L.v);
    free(m.role);
    free(m.parent);
    free(m.usage_below);
    free(order);
    free(byid);
    return st;
}
