/* The target runner's cost per case. Prints one JSON object per line:
 *   agents_persistent  a trivial persistent target (answers {"event":"done"}): wall time per
 *                      case (request, target, reply, parse) and flare's own CPU time per case
 *   agents_echo        the same with a six-event answer (JSON parsing of events included)
 *   agents_fresh       the trivial target started for each case (--fresh): wall time per case
 *   agents_fresh_vs_persistent   the ratio of the two (target: >= 20)
 *   agents_flood       a target that floods stdout, 8 cases at the 4 MiB cap: flare's RSS
 *                      growth after the first case (target: flat)
 * The target is tests/targets/agent_tgt.c, compiled with cc into the bench binary's folder.
 * Usage: bench_agents_target [persistent_cases]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "flare/agents/target.h"

static fl_err err;

static void die(const char *what) {
    fprintf(stderr, "bench_agents_target: %s: %s\n", what, err.msg);
    exit(1);
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static long rss_kb(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    if (f) fclose(f);
    return res * 4;
}

/* n cases against `tgt mode`; wall and flare-CPU microseconds per case. */
static void run(const char *tgt, const char *mode, int fresh, int n, double *wall_us, double *cpu_us) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.fresh = fresh;
    char *argv[] = {(char *)tgt, (char *)mode, NULL};
    fl_target *t;
    if (fl_target_new(argv, &o, &t, &err) != FL_OK) die("fl_target_new");
    const char *turns[] = {"Plan a three-day trip to Kyoto and compute the budget in EUR."};
    fl_case *c = fl_case_new(1, turns);
    fl_trace *tr = fl_trace_new();
    fl_rng r;
    fl_rng_seed(&r, 1);
    int warm = n / 20 + 1;
    double t0 = 0, c0 = 0;
    for (int i = 0; i < n + warm; i++) {
        if (i == warm) t0 = fl_now(), c0 = cpu_s();
        snprintf(c->id, sizeof c->id, "%06d", i);
        fl_case_new_trace(c, &r);
        if (fl_target_run(t, c, tr, &err) != FL_OK) die("fl_target_run");
        if (tr->exit != FL_EXIT_DONE) {
            fprintf(stderr, "bench_agents_target: case %d ended %s\n", i, fl_exit_kind_name(tr->exit));
            exit(1);
        }
    }
    *wall_us = 1e6 * (fl_now() - t0) / n;
    *cpu_us = 1e6 * (cpu_s() - c0) / n;
    fl_trace_free(tr);
    fl_case_free(c);
    fl_target_free(t);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (n < 100) n = 100;
    /* the target: next to this binary, built from the test target's source */
    char dir[512], tgt[600], cmd[1400];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    snprintf(tgt, sizeof tgt, "%s/agent_tgt", dir);
    char src[512];
    snprintf(src, sizeof src, "%s", __FILE__);
    slash = strrchr(src, '/');
    snprintf(slash ? slash + 1 : src, sizeof src - (size_t)(slash ? slash + 1 - src : 0),
             "../tests/targets/agent_tgt.c");
    snprintf(cmd, sizeof cmd, "cc -O2 -o %s %s", tgt, src);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_agents_target: cannot compile %s\n", src);
        return 1;
    }

    double pw, pc, ew, ec, fw, fc;
    run(tgt, "done", 0, n, &pw, &pc);
    printf("{\"name\": \"agents_persistent\", \"cases\": %d, \"us_per_case\": %.2f, "
           "\"flare_cpu_us_per_case\": %.2f}\n", n, pw, pc);
    run(tgt, "echo", 0, n / 4, &ew, &ec);
    printf("{\"name\": \"agents_echo\", \"cases\": %d, \"events_per_case\": 6, \"us_per_case\": %.2f, "
           "\"flare_cpu_us_per_case\": %.2f}\n", n / 4, ew, ec);
    int nf = n / 50 < 200 ? 200 : n / 50;
    run(tgt, "done", 1, nf, &fw, &fc);
    printf("{\"name\": \"agents_fresh\", \"cases\": %d, \"us_per_case\": %.2f, "
           "\"flare_cpu_us_per_case\": %.2f}\n", nf, fw, fc);
    printf("{\"name\": \"agents_fresh_vs_persistent\", \"ratio\": %.1f}\n", fw / pw);
    fflush(stdout);

    /* flood: 8 cases, each read to the default 4 MiB cap then killed and restarted */
    fl_target_opts o;
    fl_target_opts_default(&o);
    char *fargv[] = {tgt, "flood", NULL};
    fl_target *t;
    if (fl_target_new(fargv, &o, &t, &err) != FL_OK) die("fl_target_new");
    const char *turns[] = {"flood"};
    fl_case *c = fl_case_new(1, turns);
    fl_trace *tr = fl_trace_new();
    long first = 0;
    size_t bytes = 0;
    double t0 = fl_now();
    for (int i = 0; i < 8; i++) {
        if (fl_target_run(t, c, tr, &err) != FL_OK) die("fl_target_run");
        if (tr->exit != FL_EXIT_LIMIT) {
            fprintf(stderr, "bench_agents_target: flood case ended %s\n", fl_exit_kind_name(tr->exit));
            return 1;
        }
        bytes += tr->bytes;
        if (i == 0) first = rss_kb();
    }
    printf("{\"name\": \"agents_flood\", \"cases\": 8, \"mb_read\": %.1f, \"mb_per_s\": %.0f, "
           "\"rss_kb_after_first\": %ld, \"rss_kb_growth\": %ld}\n",
           (double)bytes / (1 << 20), (double)bytes / (1 << 20) / (fl_now() - t0), first,
           rss_kb() - first);
    fl_trace_free(tr);
    fl_case_free(c);
    fl_target_free(t);
    return 0;
}
