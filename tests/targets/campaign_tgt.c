/* A tiny agent system for tests/test_campaign.c, speaking the protocol of
 * docs/agents-protocol.md with no library: it reacts to words anywhere in the request line.
 *
 *   user -> Master; Master routes on the words "math" / "search" (else "chat");
 *   math: Worker calls "calc", search: Worker calls "web"; each "please" adds a
 *   Master -> Checker -> Master round (hit-count buckets); every turn is handled in turn.
 *   Planted defects:
 *     "boom" anywhere  -> a Python-style traceback on stderr and abort() before answering (a
 *                         crash), unless --fixed;
 *     "leak" anywhere  -> the output carries "SECRET-4242" (forbidden in the test spec),
 *                         unless --fixed.
 *   Usage: campaign_tgt [--fixed] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has(const char *line, const char *w) { return strstr(line, w) != NULL; }

static int count(const char *line, const char *w) {
    int n = 0;
    for (const char *p = line; (p = strstr(p, w)); p += strlen(w)) n++;
    return n;
}

int main(int argc, char **argv) {
    int fixed = argc > 1 && !strcmp(argv[1], "--fixed");
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        if (!fixed && has(line, "boom")) {
            fprintf(stderr, "Traceback (most recent call last):\n  File \"tgt.py\", line 28, in main\n"
                            "RuntimeError: boom\n");
            abort();
        }
        const char *route = has(line, "math") ? "math" : has(line, "search") ? "search" : "chat";
        printf("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n");
        printf("{\"event\":\"branch\",\"agent\":\"Master\",\"point\":\"route\",\"choice\":\"%s\"}\n",
               route);
        if (strcmp(route, "chat")) {
            const char *tool = !strcmp(route, "math") ? "calc" : "web";
            printf("{\"event\":\"message\",\"from\":\"Master\",\"to\":\"Worker\",\"content\":\"do\"}\n");
            printf("{\"event\":\"tool_call\",\"agent\":\"Worker\",\"tool\":\"%s\",\"arguments\":{}}\n",
                   tool);
            printf("{\"event\":\"tool_result\",\"agent\":\"Worker\",\"tool\":\"%s\",\"ok\":true,"
                   "\"content\":\"42\"}\n", tool);
            printf("{\"event\":\"message\",\"from\":\"Worker\",\"to\":\"Master\",\"content\":\"42\"}\n");
        }
        int please = count(line, "please");
        for (int i = 0; i < please && i < 6; i++) {
            printf("{\"event\":\"message\",\"from\":\"Master\",\"to\":\"Checker\",\"content\":\"ok?\"}\n");
            printf("{\"event\":\"message\",\"from\":\"Checker\",\"to\":\"Master\",\"content\":\"ok\"}\n");
        }
        printf("{\"event\":\"output\",\"content\":\"%s\"}\n",
               !fixed && has(line, "leak") ? "the key is SECRET-4242" : "done: 42");
        printf("{\"event\":\"done\"}\n");
        fflush(stdout);
    }
    return 0;
}
