/* flare agents replay: re-run saved failure cases (fl_replay_run). Exit status 0 when none
 * fails, 1 when some still fail or fail anew (or flare itself failed), 2 for usage errors and
 * an empty selection (a mistyped or empty folder must not pass CI). */
#include <stdio.h>

#include "cli/cli.h"
#include "flare/agents/campaign.h"
#include "flare/agents/http_target.h"

int cmd_agents_replay(const cli_opts *o) {
    fl_err e = {0};
    fl_http_opts ho;
    fl_replay_opts ro = {
        .spec_path = o->set[F_spec] ? o->spec : NULL,
        .junit_path = o->set[F_junit] ? o->junit : NULL,
        .log = stdout, /* one verdict per case: results, which --quiet keeps */
    };
    cli_target_setup(o, &ro.target, &ho);
    /* the first path's campaign: replaying several campaigns at once takes -T */
    cli_recorded_timeout(o, o->cases.v[0], &ro.target);
    fl_replay_result r;
    if (fl_replay_run(o->cases.v, o->cases.n, &ro, &r, &e)) return cli_fail(&e);
    char what[256];
    snprintf(what, sizeof what, "%s%s", o->cases.v[0], o->cases.n > 1 ? " and the other paths" : "");
    if (r.n_skipped) cli_note("%s: skipped %d file%s: %s\n", what, r.n_skipped, r.n_skipped == 1 ? "" : "s",
                              r.skipped_why);
    if (r.n_cases == 0) { /* a typo or an empty folder must not pass CI */
        fprintf(stderr, "flare: %s: nothing to replay (no *.json cases%s)\n", what,
                r.n_skipped ? ", see the skipped files above" : "");
        return CLI_USAGE;
    }
    printf("%d case%s: %d still fail%s (%d with the saved signature), %d new failure%s, %d fixed, %d passed\n",
           r.n_cases, r.n_cases == 1 ? "" : "s", r.n_still, r.n_still == 1 ? "s" : "", r.n_same, r.n_new,
           r.n_new == 1 ? "" : "s", r.n_fixed, r.n_passed);
    if (ro.junit_path) cli_note("JUnit report: %s\n", ro.junit_path);
    return r.n_failing ? CLI_FAIL : CLI_OK;
}
