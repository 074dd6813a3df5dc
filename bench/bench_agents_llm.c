/* What the LLM generator is worth (docs/agents-llm.md): executions until every allowed edge of
 * a system's spec is covered, with the generator on (against the stand-in model of
 * tests/llm_stub.c on loopback: it writes instructions from the words of the one coverage gap
 * the prompt names, and the example inputs) and off, median over seeds. Prints one JSON object
 * per line:
 *   agents_llm_NAME_off / _on   per-seed executions to full edge coverage (the budget when not
 *                               reached), the median, how many seeds reached it, edges covered
 *                               at the end; for _on the LLM calls and the generated cases run,
 *                               kept and finding something
 *   agents_llm_NAME             ratio = median(off) / median(on) (> 1: the generator gets there
 *                               in fewer executions; a lower bound when off did not reach it)
 *
 * Usage: bench_agents_llm NAME TARGET SPEC SEEDS WORKDIR [n_seeds=5] [budget=5000]
 *            [timeout_ms=300] [gen_plateau=200]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/campaign.h"
#include "../tests/llm_stub.c"
#include "bench_util.h"


int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s NAME TARGET SPEC SEEDS WORKDIR [n_seeds=5] [budget=5000] "
                        "[timeout_ms=300] [gen_plateau=200]\n", argv[0]);
        return 2;
    }
    int n = argc > 6 ? atoi(argv[6]) : 5;
    uint64_t budget = argc > 7 ? strtoull(argv[7], NULL, 10) : 5000;
    int timeout_ms = argc > 8 ? atoi(argv[8]) : 300;
    int plateau = argc > 9 ? atoi(argv[9]) : 200;
    if (n < 1 || n > MAX_SEEDS || budget < 1 || timeout_ms < 1 || plateau < 1) return 2;
    char *targv[] = {argv[2], NULL};
    fl_verbosity = 0; /* the campaign's own messages */
    stub *s = stub_start();
    s->fn = stub_model_gen;
    double med[2];
    for (int on = 0; on < 2; on++) {
        uint64_t execs[MAX_SEEDS];
        int reached = 0;
        long long calls = 0, gen = 0, kept = 0, finds = 0;
        double secs = 0;
        printf("{\"name\": \"agents_llm_%s_%s\", \"seeds\": %d, \"budget\": %llu, \"edges\": [",
               argv[1], on ? "on" : "off", n, (unsigned long long)budget);
        for (int k = 0; k < n; k++) {
            char out[4096], cmd[4200];
            snprintf(out, sizeof out, "%s/%s_%s_%d", argv[5], argv[1], on ? "on" : "off", k + 1);
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
            if (system(cmd) != 0) return 1;
            fl_campaign_opts o;
            fl_campaign_opts_default(&o);
            o.in_dir = argv[4], o.out_dir = out, o.argv = targv, o.spec_path = argv[3];
            o.seed = (uint64_t)k + 1, o.max_execs = budget, o.timeout_ms = timeout_ms;
            o.write_report = 0, o.stats_every = 10;
            o.goal_edges = 1, o.stop_at_goal = 1;
            if (on) o.llm_url = s->url, o.llm_model = "stand-in", o.gen_plateau = plateau;
            fl_campaign_result r;
            fl_err e = {0};
            double t0 = fl_now();
            if (fl_campaign_run(&o, &r, &e) != FL_OK) {
                fprintf(stderr, "bench_agents_llm: %s\n", e.msg);
                return 1;
            }
            secs += fl_now() - t0;
            execs[k] = r.stats.execs_full_edges ? r.stats.execs_full_edges : budget;
            reached += r.stats.execs_full_edges != 0;
            calls += r.stats.llm_calls, gen += (long long)r.stats.llm_gen_cases;
            kept += (long long)r.stats.llm_gen_kept, finds += (long long)r.stats.llm_gen_finds;
            printf("%s\"%d/%d\"", k ? ", " : "", r.stats.edges_seen, r.stats.edges_allowed);
        }
        med[on] = median(execs, n);
        printf("], \"reached\": %d, \"median_execs\": %.1f, \"execs\": [", reached, med[on]);
        for (int k = 0; k < n; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)execs[k]);
        printf("], \"seconds\": %.1f", secs);
        if (on)
            printf(", \"llm_calls\": %lld, \"gen_cases\": %lld, \"gen_kept\": %lld, \"gen_finds\": %lld",
                   calls, gen, kept, finds);
        printf("}\n");
        fflush(stdout);
    }
    stub_stop(s);
    printf("{\"name\": \"agents_llm_%s\", \"off_median_execs\": %.1f, \"on_median_execs\": %.1f, "
           "\"ratio\": %.3f}\n", argv[1], med[0], med[1], med[1] > 0 ? med[0] / med[1] : 0);
    return 0;
}
