/* What coverage guidance is worth on the example agent system (examples/agents/): executions
 * until every planted defect is found and every allowed edge of its spec is covered, with
 * `--schedule explore` (coverage-guided) against `--schedule none` (the same mutators, no feedback), median
 * over seeds. Prints one JSON object per line (bench/run.sh turns them into the summary):
 *   agents_guidance_explore / _none  per-seed executions to the goal, the median, how many
 *                                    seeds reached it within the budget, and per goal part
 *   agents_guidance                   ratio = median(none) / median(explore) (> 1: guidance
 *                                    gets there in fewer executions)
 * A campaign that does not reach the goal within the budget counts as the budget (a lower
 * bound, so the ratio is then a lower bound too) and shows in "reached".
 *
 * Usage: bench_agents_guidance TARGET SPEC SEEDS WORKDIR [n_seeds=5] [budget=20000] [timeout_ms=100]
 *
 * A second mode counts defects found within a fixed budget on one of the systems of
 * examples/systems/ (each planted defect there is of its own oracle kind):
 *   bench_agents_guidance defects NAME KEYS TARGET SPEC SEEDS WORKDIR [n_seeds=5]
 *       [budget=3000] [timeout_ms=300]
 * KEYS is a comma list, one per planted defect, of the start of its findings' key
 * (`spec_violation:agent:Admin`; a bare kind, `loop`, where the system has no other way to a
 * finding of that kind). A defect is found when a saved finding's key starts so: a finding
 * of the same kind on another path (a side effect of another defect) does not count. It prints
 *   agents_defects_NAME_explore / _none  per-seed defects found, the median, of how many
 *
 * A third mode measures the time lost to timeouts (issue 15 §1) over a whole budget:
 *   bench_agents_guidance hangs NAME TARGET SPEC SEEDS WORKDIR [n_seeds=5] [budget=3000]
 *       [timeout_ms=0: calibrated]
 * and prints agents_hangs_NAME: per seed the hang share (hang_time / case_time), the median,
 * and on how many seeds a hang was found. A last argument 0 runs the campaigns without their
 * spare target process (--no-spare), to show what it saves.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/campaign.h"
#include "flare/agents/oracle.h"
#include "bench_util.h"

/* The six defects of examples/agents/taskforce.h, as the oracles name them (the defects
 * mode replaces them with its KINDS). */
static fl_finding_kind planted[FL_FIND_COUNT_] = {FL_FIND_LOOP, FL_FIND_SPEC, FL_FIND_TOOL_ERROR,
                                                  FL_FIND_FORBIDDEN, FL_FIND_CRASH, FL_FIND_HANG};
static int N_PLANTED = 6;
static const char *planted_key[FL_FIND_COUNT_]; /* the defects mode: each one's key prefix */

/* Executions to the goal for one schedule and seed (0 when not reached); the parts. */
static fl_campaign_stats last; /* the last run's counters (the hangs mode) */
static int stop_at_goal = 1;
static int no_spare;     /* the hangs mode's last argument: 0 keeps the campaign's spare */

static uint64_t run_one(char *const *argv, const char *spec, const char *seeds, const char *dir,
                        fl_schedule sch, uint64_t seed, uint64_t budget, int timeout_ms,
                        int edges, uint64_t *parts, double *secs) {
    char out[4096];
    snprintf(out, sizeof out, "%s/%s_%llu", dir, fl_schedule_name(sch), (unsigned long long)seed);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd) != 0) exit(1);
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    o.in_dir = seeds;
    o.out_dir = out;
    o.argv = argv;
    o.spec_path = spec;
    o.seed = seed;
    o.schedule = sch;
    o.max_execs = budget;
    o.timeout_ms = timeout_ms;
    o.write_report = 0;
    o.stats_every = 10;
    o.no_spare = no_spare;
    for (int i = 0; i < N_PLANTED; i++) o.goal_kinds |= 1u << planted[i];
    o.goal_edges = edges;
    o.stop_at_goal = stop_at_goal;
    fl_campaign_result r;
    fl_err e = {0};
    double t0 = fl_now();
    if (fl_campaign_run(&o, &r, &e) != FL_OK) {
        fprintf(stderr, "bench_agents_guidance: %s\n", e.msg);
        exit(1);
    }
    *secs = fl_now() - t0;
    last = r.stats;
    for (int i = 0; i < N_PLANTED; i++) parts[i] = r.stats.kind_first_exec[planted[i]];
    parts[N_PLANTED] = r.stats.execs_full_edges;
    return r.stats.execs_goal;
}

/* 1 when a finding file under DIR/SUB has a "key" that starts with PREFIX. */
static int key_found(const char *dir, const char *sub, const char *prefix) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        if (!strstr(de->d_name, ".json")) continue;
        char f[4700];
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        FILE *fp = fopen(f, "rb");
        if (!fp) continue;
        char buf[65536];
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        buf[n] = 0;
        const char *k = strstr(buf, "\"key\":");
        if (!k) continue;
        for (k += 6; *k == ' ' || *k == '\t'; k++) {}
        found = *k == '"' && !strncmp(k + 1, prefix, strlen(prefix));
    }
    closedir(d);
    return found;
}

/* The defects mode: planted kinds found within the budget, per schedule, median over seeds. */
static int defects(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: %s defects NAME KEYS TARGET SPEC SEEDS WORKDIR [n_seeds=5] "
                        "[budget=3000] [timeout_ms=300]\n", argv[0]);
        return 2;
    }
    N_PLANTED = 0;
    char kinds[1024];
    snprintf(kinds, sizeof kinds, "%s", argv[3]);
    for (char *w = strtok(kinds, ","); w; w = strtok(NULL, ",")) {
        char kind[64];
        snprintf(kind, sizeof kind, "%.*s", (int)strcspn(w, ":"), w);
        int k = fl_finding_kind_parse(kind);
        if (k < 0 || N_PLANTED == FL_FIND_COUNT_) {
            fprintf(stderr, "bench_agents_guidance: unknown finding kind '%s'\n", kind);
            return 2;
        }
        planted_key[N_PLANTED] = w;
        planted[N_PLANTED++] = (fl_finding_kind)k;
    }
    stop_at_goal = 0; /* the goal is met by kinds: a same-kind finding on another path would stop it */
    int n = argc > 8 ? atoi(argv[8]) : 5;
    uint64_t budget = argc > 9 ? strtoull(argv[9], NULL, 10) : 3000;
    int timeout_ms = argc > 10 ? atoi(argv[10]) : 300;
    if (n < 1 || n > MAX_SEEDS || budget < 1 || timeout_ms < 1) return 2;
    char *targv[] = {argv[4], NULL};
    static const fl_schedule sch[2] = {FL_SCHED_EXPLORE, FL_SCHED_NONE};
    for (int s = 0; s < 2; s++) {
        uint64_t found[MAX_SEEDS], parts[FL_FIND_COUNT_ + 1];
        double secs = 0;
        printf("{\"name\": \"agents_defects_%s_%s\", \"planted\": %d, \"seeds\": %d, "
               "\"budget\": %llu, \"found\": [", argv[2], fl_schedule_name(sch[s]), N_PLANTED, n,
               (unsigned long long)budget);
        for (int k = 0; k < n; k++) {
            double t;
            run_one(targv, argv[5], argv[6], argv[7], sch[s], (uint64_t)k + 1, budget, timeout_ms,
                    0, parts, &t);
            secs += t;
            char out[4096];
            snprintf(out, sizeof out, "%s/%s_%d", argv[7], fl_schedule_name(sch[s]), k + 1);
            found[k] = 0;
            for (int i = 0; i < N_PLANTED; i++) {
                char sub[128];
                snprintf(sub, sizeof sub, "failures/%s", fl_finding_kind_name(planted[i]));
                found[k] += key_found(out, planted[i] == FL_FIND_HANG ? "hangs" : sub, planted_key[i]);
            }
            printf("%s%llu", k ? ", " : "", (unsigned long long)found[k]);
        }
        printf("], \"median_found\": %.1f, \"seconds\": %.1f}\n", median(found, n), secs);
        fflush(stdout);
    }
    return 0;
}

/* The hangs mode (issue 15 §1): the share of case time lost to timeouts over a whole budget
 * (fuzzer_stats' hang_share), and whether a hang was found, per seed, median. */
static int hangs(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s hangs NAME TARGET SPEC SEEDS WORKDIR [n_seeds=5] "
                        "[budget=3000] [timeout_ms=0: calibrated] [spare=1]\n", argv[0]);
        return 2;
    }
    N_PLANTED = 1, planted[0] = FL_FIND_HANG, stop_at_goal = 0;
    int n = argc > 7 ? atoi(argv[7]) : 5;
    uint64_t budget = argc > 8 ? strtoull(argv[8], NULL, 10) : 3000;
    int timeout_ms = argc > 9 ? atoi(argv[9]) : 0;
    no_spare = argc > 10 && !strcmp(argv[10], "0");
    if (n < 1 || n > MAX_SEEDS || budget < 1 || timeout_ms < 0) return 2;
    char *targv[] = {argv[3], NULL};
    uint64_t share[MAX_SEEDS], parts[2];
    int found = 0;
    double secs = 0;
    printf("{\"name\": \"agents_hangs_%s\", \"seeds\": %d, \"budget\": %llu, \"spare\": %d, "
           "\"runs\": [", argv[2], n, (unsigned long long)budget, !no_spare);
    for (int k = 0; k < n; k++) {
        double t;
        run_one(targv, argv[4], argv[5], argv[6], FL_SCHED_EXPLORE, (uint64_t)k + 1, budget,
                timeout_ms, 0, parts, &t);
        secs += t;
        double sh = last.case_seconds > 0 ? last.hang_seconds / last.case_seconds : 0;
        share[k] = (uint64_t)(sh * 10000 + 0.5); /* basis points, for the median */
        found += parts[0] != 0;
        printf("%s{\"hang_share\": %.4f, \"hangs\": %llu, \"hang_findings\": %d, "
               "\"execs_trim\": %llu, \"timeout_ms\": %d}", k ? ", " : "", sh,
               (unsigned long long)last.hangs, last.kind_count[FL_FIND_HANG],
               (unsigned long long)last.execs_trim, last.timeout_ms);
    }
    printf("], \"median_hang_share\": %.4f, \"hang_found\": %d, \"seconds\": %.1f}\n",
           median(share, n) / 10000, found, secs);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "defects")) return defects(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "hangs")) return hangs(argc, argv);
    if (argc < 5) {
        fprintf(stderr, "usage: %s TARGET SPEC SEEDS WORKDIR [n_seeds=5] [budget=20000] "
                        "[timeout_ms=100]\n", argv[0]);
        return 2;
    }
    int n = argc > 5 ? atoi(argv[5]) : 5;
    uint64_t budget = argc > 6 ? strtoull(argv[6], NULL, 10) : 20000;
    int timeout_ms = argc > 7 ? atoi(argv[7]) : 100;
    if (n < 1 || n > MAX_SEEDS || budget < 1 || timeout_ms < 1) return 2;
    char *targv[] = {argv[1], NULL};
    double med[2];
    static const fl_schedule sch[2] = {FL_SCHED_EXPLORE, FL_SCHED_NONE};
    for (int s = 0; s < 2; s++) {
        uint64_t execs[MAX_SEEDS], parts[MAX_SEEDS][FL_FIND_COUNT_ + 1];
        int reached = 0;
        double secs = 0;
        for (int k = 0; k < n; k++) {
            double t;
            execs[k] = run_one(targv, argv[2], argv[3], argv[4], sch[s], (uint64_t)k + 1, budget,
                               timeout_ms, 1, parts[k], &t);
            secs += t;
            reached += execs[k] != 0;
            if (!execs[k]) execs[k] = budget;
        }
        med[s] = median(execs, n);
        printf("{\"name\": \"agents_guidance_%s\", \"seeds\": %d, \"budget\": %llu, "
               "\"reached\": %d, \"median_execs\": %.1f, \"seconds\": %.1f, \"execs\": [",
               fl_schedule_name(sch[s]), n, (unsigned long long)budget, reached, med[s], secs);
        for (int k = 0; k < n; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)execs[k]);
        printf("], \"median_first\": {");
        for (int i = 0; i <= N_PLANTED; i++) {
            uint64_t v[MAX_SEEDS];
            for (int k = 0; k < n; k++) v[k] = parts[k][i] ? parts[k][i] : budget;
            printf("%s\"%s\": %.1f", i ? ", " : "",
                   i < N_PLANTED ? fl_finding_kind_name(planted[i]) : "all_edges", median(v, n));
        }
        printf("}}\n");
        fflush(stdout);
    }
    printf("{\"name\": \"agents_guidance\", \"explore_median_execs\": %.1f, "
           "\"none_median_execs\": %.1f, \"ratio\": %.3f}\n", med[0], med[1],
           med[0] > 0 ? med[1] / med[0] : 0);
    return 0;
}
