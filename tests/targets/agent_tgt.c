/* A misbehaving agent system on demand, for tests/test_target.c and bench/bench_agents_target.c.
 * It speaks the protocol of docs/agents-protocol.md (well or badly) and needs nothing but libc:
 * the tests compile it with `cc` at start.
 *
 *   agent_tgt MODE [N]
 *
 * MODE (for every request, or only for request number N (1-based) when N is given; the other
 * requests get the `echo` answer):
 *   done       just {"event":"done"} (the trivial target of the benchmark)
 *   echo       a message user->Master, a tool call and result, a branch, an output
 *              "pid P id ID len L" (L: request line length), done
 *   crash      abort() after one event   exit       exit(3) after one event
 *   exit0      exit(0) after one event   hang       one event, then sleep forever
 *   silent     never answer, keep reading (stays alive)
 *   noterm     ignore SIGTERM, then hang
 *   garbage    a non-JSON line, a message without "to", an output after done
 *   flood      endless short lines       floodline  one endless line (no newline)
 *   afterdone  done, then one more output (persistent: stale for the next case)
 *   env        output "TRACEPARENT|FLARE_CASE_ID", done, exit (for fresh mode)
 *   stderr     200 KB on stderr, then the echo answer
 *   traceback  one event, a Python-style traceback on stderr naming the request's length, exit(1)
 *   spawn      fork a grandchild that sleeps, report its pid as output, then hang
 *   memhog     try to malloc and touch 256 MiB: output "ok" or "nomem", done
 *   bigout     an output event of 300 KB, done
 *   noread     exit(5) at once, without reading a request
 *   early      done after reading the first 100 bytes of the request, then sleep
 *
 * AGENT_TGT_START_MS in the environment: wait that long before reading anything (a target
 * that is slow to start, as an interpreter loading a framework).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void out(const char *s) {
    fputs(s, stdout);
    fflush(stdout);
}

static void echo(const char *req, size_t len) {
    char id[32] = "?";
    const char *p = strstr(req, "\"id\":\"");
    if (p) sscanf(p + 6, "%31[^\"]", id);
    printf("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n"
           "{\"event\":\"tool_call\",\"agent\":\"Worker\",\"tool\":\"calc\",\"arguments\":{\"x\":1}}\n"
           "{\"event\":\"tool_result\",\"agent\":\"Worker\",\"tool\":\"calc\",\"ok\":true,\"content\":\"1\"}\n"
           "{\"event\":\"branch\",\"agent\":\"Master\",\"point\":\"route\",\"choice\":\"math\"}\n"
           "{\"event\":\"output\",\"content\":\"pid %d id %s len %zu\"}\n"
           "{\"event\":\"done\"}\n",
           (int)getpid(), id, len);
    fflush(stdout);
}

static void hang(void) {
    for (;;) pause();
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "echo";
    long only = argc > 2 ? atol(argv[2]) : 0;
    const char *start_ms = getenv("AGENT_TGT_START_MS");
    if (start_ms) usleep((useconds_t)atol(start_ms) * 1000);
    if (!strcmp(mode, "early")) { /* answer after the first bytes of a request, read no more */
        char buf[100];
        for (;;) {
            if (read(0, buf, sizeof buf) <= 0) return 0;
            out("{\"event\":\"done\"}\n");
            pause();
        }
    }
    if (!strcmp(mode, "noread")) { /* exit without reading: flare's write fails (EPIPE) */
        usleep(30000);
        return 5;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    for (long k = 1; (len = getline(&line, &cap, stdin)) > 0; k++) {
        if (only && k != only) {
            echo(line, (size_t)len);
            continue;
        }
        if (!strcmp(mode, "done")) {
            out("{\"event\":\"done\"}\n");
        } else if (!strcmp(mode, "echo")) {
            echo(line, (size_t)len);
        } else if (!strcmp(mode, "crash")) {
            out("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"x\"}\n");
            abort();
        } else if (!strcmp(mode, "exit") || !strcmp(mode, "exit0")) {
            out("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"x\"}\n");
            exit(mode[4] ? 0 : 3);
        } else if (!strcmp(mode, "hang")) {
            out("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"x\"}\n");
            hang();
        } else if (!strcmp(mode, "silent")) {
            continue;
        } else if (!strcmp(mode, "noterm")) {
            signal(SIGTERM, SIG_IGN);
            hang();
        } else if (!strcmp(mode, "garbage")) {
            out("this is not json\n"
                "{\"event\":\"message\",\"from\":\"Master\",\"content\":\"no to\"}\n"
                "{\"event\":\"output\",\"content\":\"fine\"}\n"
                "{\"event\":\"done\"}\n"
                "{\"event\":\"output\",\"content\":\"too late\"}\n");
        } else if (!strcmp(mode, "flood") || !strcmp(mode, "floodline")) {
            static char buf[65536];
            for (size_t i = 0; i < sizeof buf; i++) buf[i] = i % 64 == 63 && mode[5] != 'l' ? '\n' : 'x';
            for (;;)
                if (fwrite(buf, 1, sizeof buf, stdout) != sizeof buf) return 1;
        } else if (!strcmp(mode, "afterdone")) {
            out("{\"event\":\"done\"}\n");
            usleep(20000);
            out("{\"event\":\"output\",\"content\":\"late\"}\n");
        } else if (!strcmp(mode, "env")) {
            const char *tp = getenv("TRACEPARENT"), *id = getenv("FLARE_CASE_ID");
            printf("{\"event\":\"output\",\"content\":\"%s|%s\"}\n{\"event\":\"done\"}\n",
                   tp ? tp : "-", id ? id : "-");
            return 0;
        } else if (!strcmp(mode, "traceback")) {
            out("{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"hi\"}\n");
            fprintf(stderr, "Traceback (most recent call last):\n  File \"agent.py\", line %zd, in main\n"
                            "    plan()\n  File \"agent.py\", line %zd, in plan\n    x = 1 / 0\n"
                            "ZeroDivisionError: division by zero (request of %zd bytes)\n", len, len + 7, len);
            fflush(stderr);
            exit(1);
        } else if (!strcmp(mode, "stderr")) {
            for (int i = 0; i < 2000; i++)
                fprintf(stderr, "%099d\n", i);
            echo(line, (size_t)len);
        } else if (!strcmp(mode, "spawn")) {
            pid_t g = fork();
            if (g == 0) hang();
            printf("{\"event\":\"output\",\"content\":\"%d\"}\n", (int)g);
            fflush(stdout);
            hang();
        } else if (!strcmp(mode, "memhog")) {
            size_t n = (size_t)256 << 20;
            char *m = malloc(n);
            if (m) memset(m, 1, n);
            printf("{\"event\":\"output\",\"content\":\"%s\"}\n{\"event\":\"done\"}\n",
                   m ? "ok" : "nomem");
            fflush(stdout);
            free(m);
        } else if (!strcmp(mode, "bigout")) {
            out("{\"event\":\"output\",\"content\":\"");
            for (int i = 0; i < 300; i++) fputs(memset((char[1025]){0}, 'y', 1024), stdout);
            out("\"}\n{\"event\":\"done\"}\n");
        } else {
            fprintf(stderr, "agent_tgt: unknown mode %s\n", mode);
            return 2;
        }
    }
    free(line);
    return 0;
}
