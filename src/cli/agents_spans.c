/* flare agents spans: how captured spans map to flare's events (fl_otlp_show). Exit status 0,
 * 1 when a file cannot be read or holds a bad request, 2 for usage errors. */
#include <stdio.h>

#include "cli/cli.h"
#include "flare/agents/otlp.h"

int cmd_agents_spans(const cli_opts *o) {
    fl_err e = {0};
    if (fl_otlp_show(o->spans_path, o->set[F_spec] ? o->spec : NULL, stdout, &e)) return cli_fail(&e);
    return CLI_OK;
}
