/* flare agents min: shrink a failing case (fl_minimize) and say by how much. */
#include <stdio.h>

#include "cli/cli.h"
#include "flare/agents/campaign.h"
#include "flare/agents/http_target.h"

int cmd_agents_min(const cli_opts *o) {
    fl_err e = {0};
    fl_http_opts ho;
    fl_min_opts mo = {
        .spec_path = o->set[F_spec] ? o->spec : NULL,
        .signature = o->set[F_signature] ? o->signature : NULL,
        .out_path = o->set[F_min_output] ? o->min_output : NULL,
        .max_runs = (int)o->max_runs,
        .log = o->quiet ? NULL : stderr,
    };
    cli_target_setup(o, &mo.target, &ho);
    cli_recorded_timeout(o, o->case_file, &mo.target);
    fl_min_result r;
    if (fl_minimize(o->case_file, &mo, &r, &e)) return cli_fail(&e);
    printf("signature %s: %d turn%s, %zu bytes -> %d turn%s, %zu bytes (%d runs)\n",
           r.signature, r.turns_before, r.turns_before == 1 ? "" : "s", r.bytes_before,
           r.turns_after, r.turns_after == 1 ? "" : "s", r.bytes_after, r.runs);
    printf("written: %s\n", r.out_path);
    return CLI_OK;
}
