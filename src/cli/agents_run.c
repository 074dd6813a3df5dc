/* flare agents run: one case against a target command (placeholder until the target runner
 * lands). */
#include "cli/cli.h"

int cmd_agents_run(const cli_opts *o) {
    fl_err e = {0};
    fl_fail(&e, FL_ERR_UNSUPPORTED, "agents run: not implemented yet");
    return cli_fail(&e);
}
