/* A tiny agent system for tests/test_campaign_stall.c: a request with the word "wait" anywhere
 * is routed to a Waiter, which goes silent for ever after its first events (a hang that
 * flare's timeout, or its stall check, ends); any other request is answered at once. Each
 * "please" (up to 6) adds a Master -> Checker -> Master round first, so that mutants reach new
 * coverage (hit-count buckets), hanging ones too. The protocol is docs/agents-protocol.md's,
 * written by hand. */
#include <stdio.h>
#include <string.h>
#include <time.h>

int main(void) {
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        int wait = strstr(line, "wait") != NULL;
        printf("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n");
        int please = 0;
        for (const char *p = line; (p = strstr(p, "please")) && please < 6; p += 6) please++;
        for (int i = 0; i < please; i++)
            printf("{\"event\":\"message\",\"from\":\"Master\",\"to\":\"Checker\",\"content\":\"ok?\"}\n"
                   "{\"event\":\"message\",\"from\":\"Checker\",\"to\":\"Master\",\"content\":\"ok\"}\n");
        printf("{\"event\":\"branch\",\"agent\":\"Master\",\"point\":\"route\",\"choice\":\"%s\"}\n",
               wait ? "wait" : "answer");
        if (wait) {
            printf("{\"event\":\"message\",\"from\":\"Master\",\"to\":\"Waiter\",\"content\":\"go\"}\n");
            fflush(stdout);
            for (;;) {
                struct timespec ts = {1, 0};
                nanosleep(&ts, NULL);
            }
        }
        printf("{\"event\":\"output\",\"content\":\"ok\"}\n{\"event\":\"done\"}\n");
        fflush(stdout);
    }
    return 0;
}
