/* The agent spec loader (format: docs/agents-spec.md).
 *
 * The loader is strict because a spec is written by hand and a typo ("tool" for "tools", an
 * edge to "Checkr") would otherwise silently change coverage denominators and oracles. Every
 * error names the file and the JSON path of the offending value, e.g.
 *     spec.json: $.edges[3][1]: unknown agent "Checkr" (declared: Master, Worker, Checker)
 * Keys starting with "_" and "description" keys are ignored everywhere (room for comments).
 */
#include "flare/agents/spec.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parsing state: the error sink and the file name every message starts with. */
typedef struct sp {
    fl_spec *s;
    const char *name;
    fl_err *e;
} sp;

#define PATH_MAX_ 256

static fl_status perr(sp *p, fl_status st, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static fl_status perr(sp *p, fl_status st, const char *path, const char *fmt, ...) {
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return fl_fail(p->e, st, "%s: %s: %s", p->name, path, detail);
}

/* JSON paths are built with this (vsnprintf: a very long key is cut, never overflows). */
static char *pathf(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *pathf(char *buf, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, PATH_MAX_, fmt, ap);
    va_end(ap);
    return buf;
}

static int ignored_key(const char *k) { return k[0] == '_' || strcmp(k, "description") == 0; }

/* Check that every key of object `o` is one of `allowed` (NULL-terminated) and appears once. */
static fl_status check_keys(sp *p, const cJSON *o, const char *path, const char *const *allowed) {
    for (const cJSON *c = o->child; c; c = c->next) {
        if (ignored_key(c->string)) continue;
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(c->string, allowed[i]) == 0;
        if (!ok) {
            char known[256] = "";
            for (int i = 0; allowed[i]; i++) {
                if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
                strncat(known, allowed[i], sizeof known - strlen(known) - 1);
            }
            return perr(p, FL_ERR_FORMAT, path, "unknown key \"%s\" (known: %s)", c->string, known);
        }
        for (const cJSON *d = o->child; d != c; d = d->next)
            if (strcmp(d->string, c->string) == 0)
                return perr(p, FL_ERR_FORMAT, path, "duplicate key \"%s\"", c->string);
    }
    return FL_OK;
}

static const char *type_name(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    return "null";
}

static fl_status want(sp *p, const cJSON *v, int ok, const char *path, const char *what) {
    if (ok) return FL_OK;
    return perr(p, FL_ERR_FORMAT, path, "expected %s, found %s", what, type_name(v));
}

/* A non-empty string, strdup'ed into *out. */
static fl_status get_name(sp *p, const cJSON *v, const char *path, char **out) {
    fl_status st = want(p, v, cJSON_IsString(v), path, "a string");
    if (st) return st;
    if (!v->valuestring[0]) return perr(p, FL_ERR_FORMAT, path, "empty name");
    if (!(*out = strdup(v->valuestring))) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    return FL_OK;
}

/* An array of distinct non-empty strings. */
static fl_status get_names(sp *p, const cJSON *a, const char *path, const char *what, int *n, char ***out) {
    fl_status st = want(p, a, cJSON_IsArray(a), path, "an array of strings");
    if (st) return st;
    int m = cJSON_GetArraySize(a);
    *out = calloc(m ? (size_t)m : 1, sizeof **out);
    if (!*out) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    *n = 0;
    char sub[PATH_MAX_];
    for (const cJSON *c = a->child; c; c = c->next) {
        pathf(sub, "%s[%d]", path, *n);
        if ((st = get_name(p, c, sub, &(*out)[*n]))) return st;
        const char *last = (*out)[(*n)++];
        for (int j = 0; j < *n - 1; j++)
            if (strcmp((*out)[j], last) == 0) return perr(p, FL_ERR_FORMAT, sub, "duplicate %s \"%s\"", what, last);
    }
    return FL_OK;
}

/* A non-negative integer that fits an int64 (and `max`). */
static fl_status get_count(sp *p, const cJSON *v, const char *path, double max, int64_t *out) {
    fl_status st = want(p, v, cJSON_IsNumber(v), path, "a non-negative integer");
    if (st) return st;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= max) || d != (double)(int64_t)d) {
        char num[64];
        snprintf(num, sizeof num, "%g", d);
        return perr(p, FL_ERR_FORMAT, path, "expected a non-negative integer, found %s", num);
    }
    *out = (int64_t)d;
    return FL_OK;
}

static fl_status parse_agent(sp *p, const cJSON *o, int i) {
    static const char *const keys[] = {"name", "tools", "decisions", NULL};
    char path[PATH_MAX_], sub[PATH_MAX_];
    pathf(path, "$.agents[%d]", i);
    fl_status st = want(p, o, cJSON_IsObject(o), path, "an object");
    if (st || (st = check_keys(p, o, path, keys))) return st;
    fl_spec_agent *a = &p->s->agents[i];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "name");
    pathf(sub, "%s.name", path);
    if (!v) return perr(p, FL_ERR_FORMAT, path, "missing \"name\"");
    if ((st = get_name(p, v, sub, &a->name))) return st;
    if (!strcmp(a->name, "user") || !strcmp(a->name, "output"))
        return perr(p, FL_ERR_FORMAT, sub, "\"%s\" is reserved (a pseudo-agent)", a->name);
    for (int j = 0; j < i; j++)
        if (!strcmp(p->s->agents[j].name, a->name))
            return perr(p, FL_ERR_FORMAT, sub, "duplicate agent \"%s\"", a->name);
    /* kept for the LLM generator's prompt (llm_gen.c); still a comment to everything else */
    v = cJSON_GetObjectItemCaseSensitive(o, "description");
    if (cJSON_IsString(v) && v->valuestring[0] && !(a->description = strdup(v->valuestring)))
        return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "tools"))) {
        pathf(sub, "%s.tools", path);
        if ((st = get_names(p, v, sub, "tool", &a->n_tools, &a->tools))) return st;
    }
    a->n_items = a->n_tools;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "decisions"))) {
        pathf(sub, "%s.decisions", path);
        if ((st = want(p, v, cJSON_IsObject(v), sub, "an object {point: [choices]}"))) return st;
        int m = cJSON_GetArraySize(v);
        if (!(a->points = calloc(m ? (size_t)m : 1, sizeof *a->points)))
            return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (ignored_key(c->string)) continue;
            fl_spec_point *pt = &a->points[a->n_points];
            char psub[PATH_MAX_];
            pathf(psub, "%s.%s", sub, c->string);
            if (!c->string[0]) return perr(p, FL_ERR_FORMAT, sub, "empty decision point name");
            for (int j = 0; j < a->n_points; j++)
                if (!strcmp(a->points[j].name, c->string))
                    return perr(p, FL_ERR_FORMAT, sub, "duplicate decision point \"%s\"", c->string);
            if (!(pt->name = strdup(c->string))) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
            a->n_points++;
            if ((st = get_names(p, c, psub, "choice", &pt->n_choices, &pt->choices))) return st;
            if (pt->n_choices == 0)
                return perr(p, FL_ERR_FORMAT, psub, "a decision point needs at least one choice");
            a->n_items += pt->n_choices;
        }
    }
    return FL_OK;
}

static const char *agent_list(const fl_spec *s, char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; i < s->n_agents; i++) {
        if (i) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, s->agents[i].name, cap - strlen(buf) - 1);
    }
    return buf;
}

static fl_status parse_edges(sp *p, const cJSON *a) {
    fl_spec *s = p->s;
    fl_status st = want(p, a, cJSON_IsArray(a), "$.edges", "an array of [from, to] pairs");
    if (st) return st;
    int m = cJSON_GetArraySize(a);
    if (!(s->edges = calloc((size_t)m + 1, sizeof *s->edges)))
        return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    int k = 0;
    char path[PATH_MAX_], sub[PATH_MAX_], list[256];
    for (const cJSON *c = a->child; c; c = c->next, k++) {
        pathf(path, "$.edges[%d]", k);
        if ((st = want(p, c, cJSON_IsArray(c) && cJSON_GetArraySize(c) == 2, path, "a [from, to] pair")))
            return st;
        int end[2];
        for (int j = 0; j < 2; j++) {
            const cJSON *v = cJSON_GetArrayItem(c, j);
            pathf(sub, "%s[%d]", path, j);
            if ((st = want(p, v, cJSON_IsString(v), sub, "an agent name"))) return st;
            end[j] = fl_spec_agent_find(s, v->valuestring);
            if (end[j] == FL_SPEC_NONE) {
                return perr(p, FL_ERR_FORMAT, sub, "unknown agent \"%s\" (declared: %s, and the pseudo-agents user, output)",
                            v->valuestring, agent_list(s, list, sizeof list));
            }
        }
        pathf(sub, "%s[0]", path);
        if (end[0] == FL_SPEC_OUTPUT)
            return perr(p, FL_ERR_FORMAT, sub, "\"output\" can only end an edge");
        pathf(sub, "%s[1]", path);
        if (end[1] == FL_SPEC_USER && end[0] == FL_SPEC_USER)
            return perr(p, FL_ERR_FORMAT, path, "edge user -> user");
        if (end[0] == FL_SPEC_USER && end[1] == FL_SPEC_OUTPUT)
            return perr(p, FL_ERR_FORMAT, path, "edge user -> output (the output comes from an agent)");
        if (fl_spec_edge_find(s, end[0], end[1]) >= 0)
            return perr(p, FL_ERR_FORMAT, path, "duplicate edge %s -> %s", fl_spec_agent_name(s, end[0]),
                        fl_spec_agent_name(s, end[1]));
        s->edges[s->n_edges++] = (fl_spec_edge){end[0], end[1]};
    }
    /* user -> entry is implied by "entry" */
    if (fl_spec_edge_find(s, FL_SPEC_USER, s->entry) < 0) s->edges[s->n_edges++] = (fl_spec_edge){FL_SPEC_USER, s->entry};
    return FL_OK;
}

static const char *const channel_names[] = {"message", "tool_arguments", "tool_result", "output"};

const char *fl_spec_channel_name(unsigned bit) {
    for (unsigned k = 0; k < 4; k++)
        if (bit == 1u << k) return channel_names[k];
    return NULL;
}

/* "channels": a non-empty array of channel names. */
static fl_status parse_channels(sp *p, const cJSON *ch, const char *path, unsigned *out) {
    char sub[PATH_MAX_];
    pathf(sub, "%s.channels", path);
    fl_status st;
    if ((st = want(p, ch, cJSON_IsArray(ch) && cJSON_GetArraySize(ch) > 0, sub, "a non-empty array of channel names")))
        return st;
    *out = 0;
    int i = 0;
    for (const cJSON *c = ch->child; c; c = c->next, i++) {
        char csub[PATH_MAX_];
        pathf(csub, "%s[%d]", sub, i);
        if ((st = want(p, c, cJSON_IsString(c), csub, "a channel name"))) return st;
        unsigned k = 0;
        while (k < 4 && strcmp(channel_names[k], c->valuestring)) k++;
        if (k == 4)
            return perr(p, FL_ERR_FORMAT, csub,
                        "unknown channel \"%s\" (channels: message, tool_arguments, tool_result, output)", c->valuestring);
        *out |= 1u << k;
    }
    return FL_OK;
}

static fl_status parse_pattern(sp *p, const cJSON *v, int i) {
    static const char *const keys[] = {"name", "pattern", "icase", "channels", NULL};
    fl_spec_pattern *f = &p->s->forbidden[i];
    char path[PATH_MAX_], sub[PATH_MAX_];
    pathf(path, "$.forbidden_output[%d]", i);
    fl_status st;
    f->channels = FL_CHAN_ALL;
    const cJSON *pat = v;
    if (cJSON_IsObject(v)) {
        if ((st = check_keys(p, v, path, keys))) return st;
        pat = cJSON_GetObjectItemCaseSensitive(v, "pattern");
        if (!pat) return perr(p, FL_ERR_FORMAT, path, "missing \"pattern\"");
        pathf(sub, "%s.pattern", path);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name"), *ic = cJSON_GetObjectItemCaseSensitive(v, "icase");
        if (n) {
            char nsub[PATH_MAX_];
            pathf(nsub, "%s.name", path);
            if ((st = get_name(p, n, nsub, &f->name))) return st;
        }
        if (ic) {
            char isub[PATH_MAX_];
            pathf(isub, "%s.icase", path);
            if ((st = want(p, ic, cJSON_IsBool(ic), isub, "true or false"))) return st;
            f->icase = cJSON_IsTrue(ic);
        }
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(v, "channels");
        if (ch && (st = parse_channels(p, ch, path, &f->channels))) return st;
    } else {
        pathf(sub, "%s", path);
    }
    if ((st = want(p, pat, cJSON_IsString(pat), sub, "a regular expression string"))) return st;
    if (!pat->valuestring[0]) return perr(p, FL_ERR_FORMAT, sub, "empty pattern (it would match every output)");
    if (!(f->pattern = strdup(pat->valuestring)) || (!f->name && !(f->name = strdup(pat->valuestring))))
        return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    int rc = regcomp(&f->re, f->pattern, REG_EXTENDED | REG_NOSUB | (f->icase ? REG_ICASE : 0));
    if (rc) {
        char why[160];
        regerror(rc, &f->re, why, sizeof why);
        return perr(p, FL_ERR_FORMAT, sub, "bad POSIX extended regex \"%s\": %s", f->pattern, why);
    }
    f->compiled = 1;
    return FL_OK;
}

static fl_status parse_limits(sp *p, const cJSON *o) {
    static const char *const keys[] = {"turns", "messages", "output_bytes", "loop_repetitions", "loop_cycle", NULL};
    fl_spec *s = p->s;
    fl_status st = want(p, o, cJSON_IsObject(o), "$.limits", "an object");
    if (st || (st = check_keys(p, o, "$.limits", keys))) return st;
    char path[PATH_MAX_];
    for (const cJSON *c = o->child; c; c = c->next) {
        if (ignored_key(c->string)) continue;
        pathf(path, "$.limits.%s", c->string);
        int64_t v = 0;
        int is_bytes = !strcmp(c->string, "output_bytes");
        if ((st = get_count(p, c, path, is_bytes ? 9.0e15 : 1.0e9, &v))) return st;
        if (!strcmp(c->string, "turns")) s->max_turns = (int)v;
        else if (!strcmp(c->string, "messages")) s->max_messages = (int)v;
        else if (is_bytes) s->max_output_bytes = v;
        else if (!strcmp(c->string, "loop_repetitions")) {
            if (v == 1) return perr(p, FL_ERR_FORMAT, path, "a loop needs at least 2 repetitions");
            s->loop_repetitions = (int)v;
        } else {
            if (v > 64) return perr(p, FL_ERR_FORMAT, path, "at most 64");
            s->loop_cycle = (int)v;
        }
    }
    return FL_OK;
}

static fl_status parse_root(sp *p, const cJSON *root) {
    static const char *const keys[] = {"agents", "entry", "edges", "limits", "forbidden_output", "secrets", NULL};
    fl_spec *s = p->s;
    fl_status st = want(p, root, cJSON_IsObject(root), "$", "an object");
    if (st || (st = check_keys(p, root, "$", keys))) return st;
    const cJSON *agents = cJSON_GetObjectItemCaseSensitive(root, "agents");
    if (!agents) return perr(p, FL_ERR_FORMAT, "$", "missing \"agents\"");
    if ((st = want(p, agents, cJSON_IsArray(agents), "$.agents", "an array of agent objects"))) return st;
    int n = cJSON_GetArraySize(agents);
    if (n == 0) return perr(p, FL_ERR_FORMAT, "$.agents", "no agents declared");
    if (!(s->agents = calloc((size_t)n, sizeof *s->agents))) return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
    int i = 0;
    for (const cJSON *c = agents->child; c; c = c->next, i++) {
        s->n_agents = i + 1; /* so that fl_spec_free sees the partly filled agent */
        if ((st = parse_agent(p, c, i))) return st;
    }
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(root, "entry");
    if (!entry) return perr(p, FL_ERR_FORMAT, "$", "missing \"entry\" (the agent the user talks to)");
    if ((st = want(p, entry, cJSON_IsString(entry), "$.entry", "an agent name"))) return st;
    s->entry = fl_spec_agent_find(s, entry->valuestring);
    if (s->entry < 0) {
        char list[256];
        return perr(p, FL_ERR_FORMAT, "$.entry", "\"%s\" is not a declared agent (declared: %s)", entry->valuestring,
                    agent_list(s, list, sizeof list));
    }
    const cJSON *edges = cJSON_GetObjectItemCaseSensitive(root, "edges");
    if (!edges) return perr(p, FL_ERR_FORMAT, "$", "missing \"edges\" (the allowed handoffs)");
    if ((st = parse_edges(p, edges))) return st;
    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
    if (limits && (st = parse_limits(p, limits))) return st;
    const cJSON *fo = cJSON_GetObjectItemCaseSensitive(root, "forbidden_output");
    if (fo) {
        if ((st = want(p, fo, cJSON_IsArray(fo), "$.forbidden_output", "an array of patterns"))) return st;
        int m = cJSON_GetArraySize(fo);
        if (!(s->forbidden = calloc(m ? (size_t)m : 1, sizeof *s->forbidden)))
            return fl_fail(p->e, FL_ERR_NOMEM, "%s: out of memory", p->name);
        i = 0;
        for (const cJSON *c = fo->child; c; c = c->next, i++) {
            s->n_forbidden = i + 1;
            if ((st = parse_pattern(p, c, i))) return st;
        }
    }
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, "secrets");
    if (sec) {
        if ((st = want(p, sec, cJSON_IsBool(sec), "$.secrets", "true or false"))) return st;
        s->no_secrets = cJSON_IsFalse(sec);
    }
    return FL_OK;
}

/* "line L, column C" of byte offset `at` in text. */
static void line_col(const char *text, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

fl_status fl_spec_parse(const char *text, size_t len, const char *name, fl_spec **out, fl_err *e) {
    *out = NULL;
    if (!name) name = "<string>";
    fl_spec *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(name))) {
        free(s);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", name);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        if (at > len) at = len;
        int line, col;
        line_col(text, at, &line, &col);
        fl_spec_free(s);
        return fl_fail(e, FL_ERR_FORMAT, "%s: not valid JSON (line %d, column %d)", name, line, col);
    }
    sp p = {s, name, e};
    fl_status st = parse_root(&p, root);
    cJSON_Delete(root);
    if (st) {
        fl_spec_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}

static fl_status parse_file(const uint8_t *buf, size_t len, const char *path, void *out,
                            fl_err *e) {
    return fl_spec_parse((const char *)buf, len, path, out, e);
}

fl_status fl_spec_load(const char *path, fl_spec **out, fl_err *e) {
    *out = NULL;
    return fl_file_parse(path, parse_file, out, e);
}

static void free_names(int n, char **v) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void fl_spec_free(fl_spec *s) {
    if (!s) return;
    for (int i = 0; i < s->n_agents; i++) {
        fl_spec_agent *a = &s->agents[i];
        free(a->name);
        free(a->description);
        free_names(a->n_tools, a->tools);
        for (int j = 0; j < a->n_points; j++) {
            free(a->points[j].name);
            free_names(a->points[j].n_choices, a->points[j].choices);
        }
        free(a->points);
    }
    free(s->agents);
    free(s->edges);
    for (int i = 0; i < s->n_forbidden; i++) {
        if (s->forbidden[i].compiled) regfree(&s->forbidden[i].re);
        free(s->forbidden[i].name);
        free(s->forbidden[i].pattern);
    }
    free(s->forbidden);
    free(s->path);
    free(s);
}

int fl_spec_agent_find(const fl_spec *s, const char *name) {
    if (!name) return FL_SPEC_NONE;
    if (!strcmp(name, "user")) return FL_SPEC_USER;
    if (!strcmp(name, "output")) return FL_SPEC_OUTPUT;
    for (int i = 0; s && i < s->n_agents; i++)
        if (s->agents[i].name && !strcmp(s->agents[i].name, name)) return i;
    return FL_SPEC_NONE;
}

int fl_spec_edge_find(const fl_spec *s, int from, int to) {
    for (int i = 0; i < s->n_edges; i++)
        if (s->edges[i].from == from && s->edges[i].to == to) return i;
    return -1;
}

int fl_spec_tool_find(const fl_spec *s, int a, const char *tool) {
    if (a < 0 || a >= s->n_agents || !tool) return -1;
    for (int i = 0; i < s->agents[a].n_tools; i++)
        if (!strcmp(s->agents[a].tools[i], tool)) return i;
    return -1;
}

int fl_spec_point_find(const fl_spec *s, int a, const char *point, const char *choice, int *choice_idx) {
    if (choice_idx) *choice_idx = -1;
    if (a < 0 || a >= s->n_agents || !point) return -1;
    for (int i = 0; i < s->agents[a].n_points; i++) {
        const fl_spec_point *pt = &s->agents[a].points[i];
        if (strcmp(pt->name, point)) continue;
        for (int j = 0; choice && choice_idx && j < pt->n_choices; j++)
            if (!strcmp(pt->choices[j], choice)) *choice_idx = j;
        return i;
    }
    return -1;
}

int fl_spec_item_tool(const fl_spec *s, int a, int tool) {
    (void)s, (void)a;
    return tool;
}

int fl_spec_item_choice(const fl_spec *s, int a, int point, int choice) {
    int k = s->agents[a].n_tools;
    for (int i = 0; i < point; i++) k += s->agents[a].points[i].n_choices;
    return k + choice;
}

const char *fl_spec_agent_name(const fl_spec *s, int a) {
    if (a == FL_SPEC_USER) return "user";
    if (a == FL_SPEC_OUTPUT) return "output";
    if (s && a >= 0 && a < s->n_agents) return s->agents[a].name;
    return "?";
}
