/* Test helper for the agents modules: build a trace from a compact script, through the real
 * event-line parser (fl_trace_feed_line). Steps are separated by ';':
 *     m FROM TO text     message            c AGENT TOOL [text]  tool call ({"text": text})
 *     r AGENT TOOL ok|fail text  tool result  b AGENT POINT CHOICE  branch
 *     e AGENT text       error              o text              output ("o" alone: empty)
 *     d                  done (sets exit = FL_EXIT_DONE; otherwise exit is FL_EXIT_EOF)
 * e.g. tr("m user Master hi; c Master calc; r Master calc ok 4; o 4; d"). */
#ifndef FLARE_TEST_AGTRACE_H
#define FLARE_TEST_AGTRACE_H

#include <cjson/cJSON.h>

#include "flare/agents/protocol.h"

/* Next space-separated word of *p into w (cap 128); returns w. */
static inline const char *tr_word(const char **p, char *w) {
    while (**p == ' ') (*p)++;
    int k = 0;
    while (**p && **p != ' ' && k < 127) w[k++] = *(*p)++;
    w[k] = 0;
    if (**p == ' ') (*p)++;
    return w;
}

static inline fl_trace *tr(const char *script) {
    fl_trace *t = fl_trace_new();
    assert_non_null(t);
    t->exit = FL_EXIT_EOF;
    char step[4096];
    const char *s = script;
    while (*s) {
        const char *end = strchr(s, ';');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        assert_true(n < sizeof step);
        memcpy(step, s, n);
        step[n] = 0;
        s += n + (end ? 1 : 0);
        const char *p = step;
        char op[128], a[128], b[128], c[128];
        tr_word(&p, op);
        if (!op[0]) continue;
        cJSON *j = cJSON_CreateObject();
        switch (op[0]) {
        case 'm':
            cJSON_AddStringToObject(j, "event", "message");
            cJSON_AddStringToObject(j, "from", tr_word(&p, a));
            cJSON_AddStringToObject(j, "to", tr_word(&p, b));
            cJSON_AddStringToObject(j, "content", p);
            break;
        case 'c':
            cJSON_AddStringToObject(j, "event", "tool_call");
            cJSON_AddStringToObject(j, "agent", tr_word(&p, a));
            cJSON_AddStringToObject(j, "tool", tr_word(&p, b));
            if (*p) { /* "c A tool some words": arguments {"text": "some words"} */
                cJSON *args = cJSON_AddObjectToObject(j, "arguments");
                cJSON_AddStringToObject(args, "text", p);
            } else {
                cJSON_AddRawToObject(j, "arguments", "{}");
            }
            break;
        case 'r':
            cJSON_AddStringToObject(j, "event", "tool_result");
            cJSON_AddStringToObject(j, "agent", tr_word(&p, a));
            cJSON_AddStringToObject(j, "tool", tr_word(&p, b));
            cJSON_AddBoolToObject(j, "ok", !strcmp(tr_word(&p, c), "ok"));
            cJSON_AddStringToObject(j, "content", p);
            break;
        case 'b':
            cJSON_AddStringToObject(j, "event", "branch");
            cJSON_AddStringToObject(j, "agent", tr_word(&p, a));
            cJSON_AddStringToObject(j, "point", tr_word(&p, b));
            cJSON_AddStringToObject(j, "choice", tr_word(&p, c));
            break;
        case 'e':
            cJSON_AddStringToObject(j, "event", "error");
            cJSON_AddStringToObject(j, "agent", tr_word(&p, a));
            cJSON_AddStringToObject(j, "message", p);
            break;
        case 'o':
            cJSON_AddStringToObject(j, "event", "output");
            cJSON_AddStringToObject(j, "content", p);
            break;
        case 'd':
            cJSON_AddStringToObject(j, "event", "done");
            t->exit = FL_EXIT_DONE;
            break;
        default: fail_msg("tr: unknown step '%s'", op);
        }
        char *line = cJSON_PrintUnformatted(j);
        int done;
        assert_int_equal(fl_trace_feed_line(t, line, strlen(line), 0, &done), FL_OK);
        free(line);
        cJSON_Delete(j);
    }
    assert_int_equal(t->n_protocol, 0);
    return t;
}

#endif
