/* The attribute conventions of agent frameworks, as data (docs/agents-otel.md lists them with
 * their sources).
 *
 * Each convention is one table: rules that give a span a role, and the attribute keys where
 * that convention keeps a span's agent name, tool name, tool arguments and result, input and
 * output. Conventions are tried in the order of `conventions` below; the first rule that
 * matches decides the span's role and names the convention. Field lookups go through the
 * matched convention's own entries first ("own": valid only for spans it classified, like
 * LangGraph's node name being the span name), then through every convention's general
 * entries in table order. A new convention is a new table here, not a new code path.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/otlp.h"

enum { M_ATTR_EQ, M_ATTR_ANY, M_NAME_WORD, M_NAME_EQ, M_LANGGRAPH_NODE };

typedef struct rule {
    int match;
    const char *key;   /* M_ATTR_*: the attribute */
    const char *value; /* M_ATTR_EQ: its value; M_NAME_*: the span name (or first word) */
    const char *need;  /* another attribute that must be present and non-empty, or NULL */
    int root_only;     /* only a span without a parent */
    fl_otlp_role role;
} rule;

#define OWN 1
typedef struct field {
    const char *key;    /* an attribute; "@name": the span name; "@suffix": after value + ' ' */
    const char *if_key; /* only when attribute if_key == if_val (NULL: always) */
    const char *if_val;
    int own;            /* only for spans this convention classified */
    int empty;          /* PRESENT_EMPTY: the attribute's presence means "" (see vc_out) */
} field;
#define PRESENT_EMPTY 1

/* Where an LLM span keeps the tool calls its model chose (a decision, see fl_otlp_llm_choice):
 * C_PARTS: a JSON list of GenAI messages whose parts of type "tool_call" name the tool;
 * C_LIST: a JSON list of objects, member `name` names the tool; C_FLAT: attributes flattened
 * as `key` N ".tool_calls." M ... ending in `name` (OpenInference's and older OpenLLMetry's). */
enum { C_PARTS, C_LIST, C_FLAT };
typedef struct calls {
    int form;
    const char *key;
    const char *name;
} calls;

typedef struct convention {
    const char *name;
    const rule *rules;
    const field *f[FL_OTLP_F_COUNT]; /* each list ends with {NULL} */
    const calls *calls;              /* ends with {-1}; NULL: none */
} convention;

static const field none[] = {{NULL, NULL, NULL, 0, 0}};

/* ---- OpenTelemetry GenAI semantic conventions (v1.37: gen_ai.operation.name, gen_ai.agent.*,
 * gen_ai.tool.*, gen_ai.input/output.messages) --------------------------------------------- */
static const rule genai_rules[] = {
    {M_ATTR_EQ, "gen_ai.operation.name", "invoke_workflow", NULL, 0, FL_OTLP_WORKFLOW},
    {M_ATTR_EQ, "gen_ai.operation.name", "invoke_agent", NULL, 0, FL_OTLP_AGENT},
    {M_ATTR_EQ, "gen_ai.operation.name", "execute_tool", NULL, 0, FL_OTLP_TOOL},
    {M_ATTR_EQ, "gen_ai.operation.name", "create_agent", NULL, 0, FL_OTLP_CREATE_AGENT},
    {M_ATTR_EQ, "gen_ai.operation.name", "chat", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "gen_ai.operation.name", "text_completion", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "gen_ai.operation.name", "generate_content", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "gen_ai.operation.name", "embeddings", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "gen_ai.operation.name", "handoff", NULL, 0, FL_OTLP_HANDOFF},
    {-1, NULL, NULL, NULL, 0, 0}};
static const field genai_agent[] = {{"gen_ai.agent.name", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field genai_tool[] = {{"gen_ai.tool.name", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field genai_args[] = {{"gen_ai.tool.call.arguments", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field genai_result[] = {{"gen_ai.tool.call.result", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field genai_input[] = {{"gen_ai.input.messages", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field genai_output[] = {{"gen_ai.output.messages", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
/* gen_ai.output.messages parts; gen_ai.completion.N.tool_calls.M.name before semconv 1.37 */
static const calls genai_calls[] = {{C_PARTS, "gen_ai.output.messages", NULL},
                                    {C_FLAT, "gen_ai.completion.", ".name"}, {-1, NULL, NULL}};

/* ---- OpenAI Agents SDK handoff spans (span data from_agent / to_agent) ------------------- */
static const rule handoff_rules[] = {{M_ATTR_ANY, "to_agent", NULL, NULL, 0, FL_OTLP_HANDOFF},
                                     {-1, NULL, NULL, NULL, 0, 0}};

/* ---- LangGraph node metadata (inside OpenInference's `metadata` JSON): a CHAIN span named
 * like its metadata.langgraph_node, at the top level of the graph (langgraph_checkpoint_ns
 * without '|'), is an agent; the nodes of a subgraph (a worker's own "agent"/"tools") are not */
static const rule langgraph_rules[] = {{M_LANGGRAPH_NODE, "metadata", NULL, NULL, 0, FL_OTLP_AGENT},
                                       {-1, NULL, NULL, NULL, 0, 0}};
static const field langgraph_agent[] = {{"@name", NULL, NULL, OWN, 0}, {NULL, NULL, NULL, 0, 0}};

/* ---- OpenInference (openinference.span.kind, tool.name, input.value / output.value,
 * input.mime_type, graph.node.id / graph.node.parent_id, metadata) ------------------------- */
static const rule oi_rules[] = {
    {M_ATTR_EQ, "openinference.span.kind", "AGENT", NULL, 0, FL_OTLP_AGENT},
    {M_ATTR_EQ, "openinference.span.kind", "TOOL", NULL, 0, FL_OTLP_TOOL},
    {M_ATTR_EQ, "openinference.span.kind", "LLM", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "openinference.span.kind", "EMBEDDING", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "openinference.span.kind", "RERANKER", NULL, 0, FL_OTLP_LLM},
    {M_ATTR_EQ, "openinference.span.kind", "CHAIN", NULL, 1, FL_OTLP_WORKFLOW},
    {-1, NULL, NULL, NULL, 0, 0}};
static const field oi_agent[] = {{"agent.name", NULL, NULL, 0, 0}, {"graph.node.id", NULL, NULL, 0, 0},
                                 {NULL, NULL, NULL, 0, 0}};
static const field oi_tool[] = {{"tool.name", NULL, NULL, 0, 0}, {"tool_name", NULL, NULL, 0, 0},
                                {NULL, NULL, NULL, 0, 0}};
static const field oi_in[] = {{"input.value", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field oi_out[] = {{"output.value", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field oi_in_mime[] = {{"input.mime_type", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field oi_parent[] = {{"graph.node.parent_id", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const calls oi_calls[] = {{C_FLAT, "llm.output_messages.", ".tool_call.function.name"}, {-1, NULL, NULL}};

/* ---- Traceloop OpenLLMetry (traceloop.span.kind workflow/task/agent/tool,
 * traceloop.entity.name / .input / .output, llm.request.type) ----------------------------- */
static const rule tl_rules[] = {
    {M_ATTR_EQ, "traceloop.span.kind", "workflow", NULL, 0, FL_OTLP_WORKFLOW},
    {M_ATTR_EQ, "traceloop.span.kind", "agent", NULL, 0, FL_OTLP_AGENT},
    {M_ATTR_EQ, "traceloop.span.kind", "tool", NULL, 0, FL_OTLP_TOOL},
    {M_ATTR_ANY, "llm.request.type", NULL, NULL, 0, FL_OTLP_LLM},
    {-1, NULL, NULL, NULL, 0, 0}};
static const field tl_agent[] = {{"traceloop.entity.name", "traceloop.span.kind", "agent", 0, 0},
                                 {NULL, NULL, NULL, 0, 0}};
static const field tl_tool[] = {{"traceloop.entity.name", "traceloop.span.kind", "tool", 0, 0},
                                {NULL, NULL, NULL, 0, 0}};
static const field tl_in[] = {{"traceloop.entity.input", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field tl_out[] = {{"traceloop.entity.output", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};

/* ---- Vercel AI SDK experimental_telemetry (span names ai.generateText / ai.streamText and
 * their .doGenerate / .doStream model calls, ai.toolCall; ai.telemetry.functionId names the
 * agent; ai.toolCall.name/.args/.result; ai.response.text) -------------------------------- */
static const rule vercel_rules[] = {
    {M_NAME_EQ, NULL, "ai.generateText", "ai.telemetry.functionId", 0, FL_OTLP_AGENT},
    {M_NAME_EQ, NULL, "ai.streamText", "ai.telemetry.functionId", 0, FL_OTLP_AGENT},
    {M_NAME_EQ, NULL, "ai.generateObject", "ai.telemetry.functionId", 0, FL_OTLP_AGENT},
    {M_NAME_EQ, NULL, "ai.toolCall", NULL, 0, FL_OTLP_TOOL},
    {M_NAME_EQ, NULL, "ai.generateText.doGenerate", NULL, 0, FL_OTLP_LLM},
    {M_NAME_EQ, NULL, "ai.streamText.doStream", NULL, 0, FL_OTLP_LLM},
    {M_NAME_EQ, NULL, "ai.generateObject.doGenerate", NULL, 0, FL_OTLP_LLM},
    {-1, NULL, NULL, NULL, 0, 0}};
static const field vc_agent[] = {{"ai.telemetry.functionId", NULL, NULL, OWN, 0}, {NULL, NULL, NULL, 0, 0}};
static const field vc_tool[] = {{"ai.toolCall.name", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field vc_args[] = {{"ai.toolCall.args", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field vc_result[] = {{"ai.toolCall.result", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
/* the SDK leaves ai.response.text out when the text is empty: a finished call (its
 * finishReason recorded) without it answered "" */
static const field vc_out[] = {{"ai.response.text", NULL, NULL, OWN, 0},
                               {"ai.response.finishReason", NULL, NULL, OWN, PRESENT_EMPTY},
                               {NULL, NULL, NULL, 0, 0}};
static const calls vc_calls[] = {{C_LIST, "ai.response.toolCalls", "toolName"}, {-1, NULL, NULL}};

/* ---- GenAI by span name and provider alone (last: the weakest evidence) ------------------- */
static const rule name_rules[] = {
    {M_NAME_WORD, NULL, "invoke_workflow", NULL, 0, FL_OTLP_WORKFLOW},
    {M_NAME_WORD, NULL, "invoke_agent", NULL, 0, FL_OTLP_AGENT},
    {M_NAME_WORD, NULL, "execute_tool", NULL, 0, FL_OTLP_TOOL},
    {M_NAME_WORD, NULL, "create_agent", NULL, 0, FL_OTLP_CREATE_AGENT},
    {M_NAME_WORD, NULL, "chat", NULL, 0, FL_OTLP_LLM},
    {M_NAME_WORD, NULL, "text_completion", NULL, 0, FL_OTLP_LLM},
    {M_NAME_WORD, NULL, "generate_content", NULL, 0, FL_OTLP_LLM},
    {M_NAME_WORD, NULL, "embeddings", NULL, 0, FL_OTLP_LLM},
    {M_NAME_WORD, NULL, "handoff", NULL, 0, FL_OTLP_HANDOFF},
    {M_ATTR_ANY, "gen_ai.provider.name", NULL, NULL, 0, FL_OTLP_LLM},
    {M_ATTR_ANY, "gen_ai.system", NULL, NULL, 0, FL_OTLP_LLM}, /* before semconv 1.37 */
    {-1, NULL, NULL, NULL, 0, 0}};
static const field name_agent[] = {{"@suffix", "invoke_agent", NULL, 0, 0},
                                   {"@suffix", "create_agent", NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field name_tool[] = {{"@suffix", "execute_tool", NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field name_in[] = {{"gen_ai.prompt", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};
static const field name_out[] = {{"gen_ai.completion", NULL, NULL, 0, 0}, {NULL, NULL, NULL, 0, 0}};

/* field order: AGENT, TOOL, ARGS, RESULT, INPUT, OUTPUT, ARGS_MIME, PARENT_AGENT; then calls */
static const convention conventions[] = {
    {"gen_ai", genai_rules, {genai_agent, genai_tool, genai_args, genai_result, genai_input, genai_output, none, none},
     genai_calls},
    {"openai-agents", handoff_rules, {none, none, none, none, none, none, none, none}, NULL},
    {"langgraph", langgraph_rules, {langgraph_agent, none, none, none, none, none, none, none}, NULL},
    {"openinference", oi_rules, {oi_agent, oi_tool, oi_in, oi_out, oi_in, oi_out, oi_in_mime, oi_parent}, oi_calls},
    {"traceloop", tl_rules, {tl_agent, tl_tool, tl_in, tl_out, tl_in, tl_out, none, none}, NULL},
    {"vercel-ai", vercel_rules, {vc_agent, vc_tool, vc_args, vc_result, none, vc_out, none, none}, vc_calls},
    {"gen_ai-name", name_rules, {name_agent, name_tool, none, none, name_in, name_out, none, none}, NULL},
};
enum { N_CONV = (int)(sizeof conventions / sizeof conventions[0]) };

/* metadata.langgraph_node == the span name, at the graph's top level, not __start__ & co. */
static int langgraph_node(const fl_otlp_span *s, const char *key) {
    const char *md = fl_otlp_attr_str(s, key);
    if (!md || !strstr(md, "langgraph_node") || !strncmp(s->name, "__", 2)) return 0;
    cJSON *j = cJSON_Parse(md);
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(j, "langgraph_node");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(j, "langgraph_checkpoint_ns");
    int ok = cJSON_IsString(node) && !strcmp(node->valuestring, s->name) &&
             (!cJSON_IsString(ns) || !strchr(ns->valuestring, '|'));
    cJSON_Delete(j);
    return ok;
}

static int rule_matches(const rule *r, const fl_otlp_span *s) {
    const char *v;
    size_t n;
    if (r->root_only && s->parent_id[0]) return 0;
    if (r->need && (!(v = fl_otlp_attr_str(s, r->need)) || !v[0])) return 0;
    switch (r->match) {
    case M_ATTR_EQ: return (v = fl_otlp_attr_str(s, r->key)) && !strcmp(v, r->value);
    case M_ATTR_ANY: return fl_otlp_attr_get(s, r->key) != NULL;
    case M_NAME_EQ: return !strcmp(s->name, r->value);
    case M_NAME_WORD:
        n = strlen(r->value);
        return !strncmp(s->name, r->value, n) && (s->name[n] == 0 || s->name[n] == ' ');
    case M_LANGGRAPH_NODE: return langgraph_node(s, r->key);
    }
    return 0;
}

static int classify(const fl_otlp_span *s, fl_otlp_role *role) {
    for (int c = 0; c < N_CONV; c++)
        for (const rule *r = conventions[c].rules; r->match >= 0; r++)
            if (rule_matches(r, s)) { *role = r->role; return c; }
    *role = FL_OTLP_OTHER;
    return -1;
}

fl_otlp_role fl_otlp_classify_conv(const fl_otlp_span *s, const char **conv) {
    fl_otlp_role r;
    int c = classify(s, &r);
    if (conv) *conv = c >= 0 ? conventions[c].name : NULL;
    return r;
}

fl_otlp_role fl_otlp_classify(const fl_otlp_span *s) { return fl_otlp_classify_conv(s, NULL); }

static const char *field_value(const field *f, const fl_otlp_span *s) {
    const char *v;
    if (f->if_key && !f->if_val) { /* "@suffix": if_key is the operation word */
        size_t n = strlen(f->if_key);
        return !strncmp(s->name, f->if_key, n) && s->name[n] == ' ' && s->name[n + 1] ? s->name + n + 1 : NULL;
    }
    if (f->if_key && (!(v = fl_otlp_attr_str(s, f->if_key)) || strcmp(v, f->if_val))) return NULL;
    if (f->empty) return fl_otlp_attr_get(s, f->key) ? "" : NULL;
    return !strcmp(f->key, "@name") ? s->name : fl_otlp_attr_str(s, f->key);
}

static const char *lookup(const fl_otlp_span *s, fl_otlp_field which, int allow_empty) {
    fl_otlp_role r;
    int mine = classify(s, &r);
    for (int pass = 0; pass < 2; pass++)
        for (int c = pass ? 0 : mine; c >= 0 && c < N_CONV; c = pass ? c + 1 : N_CONV)
            for (const field *f = conventions[c].f[which]; f->key; f++) {
                if ((f->own != 0) != (pass == 0) || (f->own && c != mine)) continue;
                const char *v = field_value(f, s);
                if (v && (v[0] || allow_empty)) return v;
            }
    return NULL;
}

const char *fl_otlp_field_get(const fl_otlp_span *s, fl_otlp_field which) { return lookup(s, which, 0); }
const char *fl_otlp_field_raw(const fl_otlp_span *s, fl_otlp_field which) { return lookup(s, which, 1); }

const char *fl_otlp_agent_name(const fl_otlp_span *s) { return lookup(s, FL_OTLP_F_AGENT, 0); }
const char *fl_otlp_tool_name(const fl_otlp_span *s) { return lookup(s, FL_OTLP_F_TOOL, 0); }

/* ---- decisions ------------------------------------------------------------------------------ */
typedef struct names {
    char *v[32];
    int n, oom;
} names;

static void names_add(names *ns, const char *name) {
    if (!name || !name[0] || ns->n == 32) return;
    for (int i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i], name)) return; /* a tool called twice in one reply: one choice */
    if (!(ns->v[ns->n] = strdup(name))) ns->oom = 1;
    else ns->n++;
}

static const char *json_str(const cJSON *o, const char *member) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, member);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* C_FLAT: key = prefix N ".tool_calls." ... ending: a tool call's name */
static int flat_call(const char *key, const calls *c) {
    size_t lp = strlen(c->key), lk = strlen(key), le = strlen(c->name);
    if (strncmp(key, c->key, lp) || lk < lp + le || strcmp(key + lk - le, c->name)) return 0;
    const char *tc = strstr(key + lp, ".tool_calls.");
    return tc && tc + 12 <= key + lk - le;
}

/* 1: the span records its model's reply in source c (names added), 0: not in c */
static int read_calls(const fl_otlp_span *s, const calls *c, names *ns) {
    if (c->form == C_FLAT) {
        int present = 0;
        for (int i = 0; i < s->n_attrs; i++) {
            const fl_otlp_attr *a = &s->attrs[i];
            if (strncmp(a->key, c->key, strlen(c->key))) continue;
            present = 1;
            if (flat_call(a->key, c) && a->type == FL_OTLP_STR) names_add(ns, a->text);
        }
        return present;
    }
    const char *v = fl_otlp_attr_str(s, c->key);
    if (!v) return 0;
    cJSON *j = cJSON_Parse(v);
    const cJSON *it;
    if (!cJSON_IsArray(j)) { cJSON_Delete(j); return 0; } /* not this shape: not a reply we read */
    cJSON_ArrayForEach(it, j) {
        if (c->form == C_LIST) { names_add(ns, json_str(it, c->name)); continue; }
        const cJSON *part, *parts = cJSON_GetObjectItemCaseSensitive(it, "parts");
        cJSON_ArrayForEach(part, parts) {
            const char *type = json_str(part, "type");
            if (type && !strcmp(type, "tool_call")) names_add(ns, json_str(part, "name"));
        }
    }
    cJSON_Delete(j);
    return 1;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int fl_otlp_llm_choice(const fl_otlp_span *s, char **choice) {
    names ns = {{0}, 0, 0};
    int present = 0;
    *choice = NULL;
    for (int c = 0; c < N_CONV && !present; c++)
        for (const calls *k = conventions[c].calls; k && k->form >= 0 && !present; k++)
            present = read_calls(s, k, &ns);
    /* a reply kept only as output text (Vercel's ai.response.text, OpenInference's
     * output.value) is an answer */
    if (!present) present = fl_otlp_field_raw(s, FL_OTLP_F_OUTPUT) != NULL;
    size_t len = 0;
    qsort(ns.v, (size_t)ns.n, sizeof *ns.v, str_cmp);
    for (int i = 0; i < ns.n; i++) len += strlen(ns.v[i]) + 1;
    if (present && !ns.oom && (*choice = malloc(ns.n ? len : sizeof "answer"))) {
        if (!ns.n) strcpy(*choice, "answer");
        else (*choice)[0] = 0;
        for (int i = 0; i < ns.n; i++) strcat(strcat(*choice, i ? "+" : ""), ns.v[i]);
    }
    int oom = ns.oom || (present && !*choice);
    for (int i = 0; i < ns.n; i++) free(ns.v[i]);
    return oom ? -1 : present;
}
