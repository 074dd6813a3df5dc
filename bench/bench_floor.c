/* The machine's own floor for the agents target runner, measured in the same `make bench` run
 * as bench_agents_target, so that flare's per-case cost is judged against what any program
 * pays on this machine, not against a fixed number of microseconds. Prints JSON lines:
 *   floor_pipe_roundtrip   a bare round trip of a 30-byte line between two processes over two
 *                          pipes (write the line, the other side reads it to its newline and
 *                          writes a 30-byte line back, read that to its newline): wall time
 *                          per trip (the mean over the trips after a warm-up, as
 *                          bench_agents_target measures a case). flare's persistent case does this and
 *                          more (a JSON request, parsing the reply, a timeout).
 *   floor_fork_exec_wait   a bare fork + exec + wait of PROGRAM ARGS... with stdin at /dev/null
 *                          (the target of bench_agents_target exits at end of input): wall time
 *                          per run (mean, as above). flare's --fresh case does this and a
 *                          round trip.
 * No libflare, no stdio on the hot path: read(2) and write(2) only.
 * The run counts match bench_agents_target's: `trips` round trips, max(trips / 50, 200) runs.
 * Usage: bench_floor [trips] [PROGRAM ARGS...]   (default 20000 trips; without PROGRAM, no
 *        fork + exec + wait row) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 30 /* bytes, the newline included */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) die("write");
        p += w, n -= (size_t)w;
    }
}

/* Read from fd until a newline; returns 0 at end of input before any byte. */
static int read_line(int fd, char *buf, size_t cap) {
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) die("read");
        if (r == 0) {
            if (len == 0) return 0;
            fprintf(stderr, "bench_floor: end of input inside a line\n");
            exit(1);
        }
        len += (size_t)r;
        if (memchr(buf + len - (size_t)r, '\n', (size_t)r)) return 1;
        if (len == cap) {
            fprintf(stderr, "bench_floor: line longer than %zu bytes\n", cap);
            exit(1);
        }
    }
}

/* Round trips per second over one pair of pipes: n trips after n/20 warm-up ones. */
static double pipe_us_per_trip(int n) {
    int req[2], rep[2];
    if (pipe(req) || pipe(rep)) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) { /* the other process: answer each line with a line */
        close(req[1]), close(rep[0]);
        char buf[256], answer[LINE];
        memset(answer, 'b', LINE - 1);
        answer[LINE - 1] = '\n';
        while (read_line(req[0], buf, sizeof buf)) write_all(rep[1], answer, LINE);
        _exit(0);
    }
    close(req[0]), close(rep[1]);
    char line[LINE], buf[256];
    memset(line, 'a', LINE - 1);
    line[LINE - 1] = '\n';
    int warm = n / 20 + 1;
    double t0 = 0;
    for (int i = 0; i < n + warm; i++) {
        if (i == warm) t0 = now();
        write_all(req[1], line, LINE);
        if (!read_line(rep[0], buf, sizeof buf)) {
            fprintf(stderr, "bench_floor: the other process ended\n");
            exit(1);
        }
    }
    double us = 1e6 * (now() - t0) / n;
    close(req[1]), close(rep[0]);
    int st;
    waitpid(pid, &st, 0);
    return us;
}

static double fork_exec_us(char **argv, int n) {
    int null = open("/dev/null", O_RDWR);
    if (null < 0) die("/dev/null");
    int warm = n / 20 + 1;
    double t0 = 0;
    for (int i = 0; i < n + warm; i++) {
        if (i == warm) t0 = now();
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            dup2(null, 0), dup2(null, 1);
            execv(argv[0], argv);
            _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid) die("waitpid");
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "bench_floor: %s did not exit 0 (status %d)\n", argv[0], st);
            exit(1);
        }
    }
    double us = 1e6 * (now() - t0) / n;
    close(null);
    return us;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (n < 100) n = 100;
    printf("{\"name\": \"floor_pipe_roundtrip\", \"bytes\": %d, \"trips\": %d, \"us_per_trip\": %.2f}\n",
           LINE, n, pipe_us_per_trip(n));
    fflush(stdout);
    if (argc > 2) {
        int nf = n / 50 < 200 ? 200 : n / 50;
        printf("{\"name\": \"floor_fork_exec_wait\", \"program\": \"%s\", \"runs\": %d, "
               "\"us_per_run\": %.2f}\n", argv[2], nf, fork_exec_us(argv + 2, nf));
    }
    return 0;
}
