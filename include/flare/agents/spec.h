/* spec.h — the agent spec (`flare agents fuzz --spec spec.json`): what a multi-agent system is
 * allowed to do. It gives the behavioural coverage its denominators (agcov.h) and the
 * spec-violation, limit and forbidden-output oracles their rules (oracle.h).
 *
 *     {
 *       "agents": [
 *         {"name": "Master", "decisions": {"route": ["math", "search", "chat"]}},
 *         {"name": "Worker", "tools": ["calculate", "search"]},
 *         {"name": "Checker"}
 *       ],
 *       "entry": "Master",
 *       "edges": [["user", "Master"], ["Master", "Worker"], ["Worker", "Master"],
 *                 ["Master", "Checker"], ["Checker", "Master"], ["Master", "output"]],
 *       "limits": {"turns": 20, "messages": 40, "output_bytes": 4000},
 *       "forbidden_output": ["sk-[A-Za-z0-9]{16,}", {"name": "pw", "pattern": "password", "icase": true,
 *                             "channels": ["tool_arguments", "output"]}],
 *       "secrets": true
 *     }
 *
 * The format (every key, the pseudo-agents `user` and `output`, the regex dialect) is
 * documented in docs/agents-spec.md. Loading is strict: an unknown key, a duplicate name, an
 * edge naming an undeclared agent or a regex that does not compile fails with a message naming
 * the file and the JSON path of the problem ("spec.json: $.agents[1].tools[0]: ...").
 */
#ifndef FLARE_AGENTS_SPEC_H
#define FLARE_AGENTS_SPEC_H

#include <regex.h>

#include "flare/flare.h"

/* Pseudo-agent indices: the human (source of the first edge) and the final output (target of
 * the last). fl_spec_agent_find returns them for the names "user" and "output". */
#define FL_SPEC_NONE (-1)
#define FL_SPEC_USER (-2)
#define FL_SPEC_OUTPUT (-3)

typedef struct fl_spec_point {
    char *name;      /* decision point, e.g. "route" */
    int n_choices;
    char **choices;  /* e.g. "math", "search" */
} fl_spec_point;

typedef struct fl_spec_agent {
    char *name;
    char *description; /* its "description" string (NULL: none); only the LLM generator reads it */
    int n_tools;
    char **tools;
    int n_points;
    fl_spec_point *points;
    int n_items; /* tools + all choices: this agent's intra-agent coverage denominator */
} fl_spec_agent;

typedef struct fl_spec_edge {
    int from, to; /* agent index, FL_SPEC_USER (from only) or FL_SPEC_OUTPUT (to only) */
} fl_spec_edge;

/* Where a forbidden pattern looks (bits of fl_spec_pattern.channels). */
enum {
    FL_CHAN_MESSAGE = 1u << 0,        /* a message between agents (not the user's own) */
    FL_CHAN_TOOL_ARGUMENTS = 1u << 1, /* a tool call's arguments (JSON text) */
    FL_CHAN_TOOL_RESULT = 1u << 2,    /* a tool result's content */
    FL_CHAN_OUTPUT = 1u << 3,         /* the answer to the user */
    FL_CHAN_ALL = (1u << 4) - 1
};
/* "message", "tool_arguments", "tool_result", "output" for one bit; NULL otherwise. */
const char *fl_spec_channel_name(unsigned bit);

typedef struct fl_spec_pattern {
    char *name;    /* "name" from the spec, or the pattern text */
    unsigned channels; /* FL_CHAN_* bits; FL_CHAN_ALL unless the spec's "channels" narrows it */
    char *pattern; /* POSIX extended regular expression */
    int icase;
    regex_t re;    /* compiled with REG_EXTENDED | REG_NOSUB [| REG_ICASE] */
    int compiled;  /* re is valid (internal: a failed load frees only compiled ones) */
} fl_spec_pattern;

typedef struct fl_spec {
    char *path; /* where it was loaded from ("<string>" when parsed from memory) */
    int n_agents;
    fl_spec_agent *agents;
    int entry; /* agent index */
    int n_edges;
    fl_spec_edge *edges; /* always contains user -> entry (added when not listed) */
    /* limits; 0 = not set by the spec (the oracle options' defaults apply) */
    int max_turns;
    int max_messages;
    int64_t max_output_bytes;
    int loop_repetitions;
    int loop_cycle;
    int n_forbidden;
    fl_spec_pattern *forbidden;
    int no_secrets; /* "secrets": false turns the built-in secret detector off (oracle.h) */
} fl_spec;

/* Load / parse a spec. `name` is used in error messages (the file name). */
fl_status fl_spec_load(const char *path, fl_spec **out, fl_err *e);
fl_status fl_spec_parse(const char *text, size_t len, const char *name, fl_spec **out, fl_err *e);
void fl_spec_free(fl_spec *s);

/* Agent index of `name`; FL_SPEC_USER for "user", FL_SPEC_OUTPUT for "output", FL_SPEC_NONE
 * when not declared. NULL -> FL_SPEC_NONE. */
int fl_spec_agent_find(const fl_spec *s, const char *name);
/* Index of the edge from -> to in s->edges, or -1 when it is not allowed. */
int fl_spec_edge_find(const fl_spec *s, int from, int to);
/* Index of `tool` in agent a's tools, or -1. */
int fl_spec_tool_find(const fl_spec *s, int a, const char *tool);
/* Decision point index of `point` in agent a, or -1; with *choice (may be NULL) set to the
 * index of `choice` in it, or -1. */
int fl_spec_point_find(const fl_spec *s, int a, const char *point, const char *choice, int *choice_idx);
/* The item index (0 .. agents[a].n_items-1) of a tool / a choice, for per-agent bitsets:
 * tools first, then the choices of each point in order. */
int fl_spec_item_tool(const fl_spec *s, int a, int tool);
int fl_spec_item_choice(const fl_spec *s, int a, int point, int choice);
/* Printable name of an agent index (including "user" / "output"). */
const char *fl_spec_agent_name(const fl_spec *s, int a);

#endif
