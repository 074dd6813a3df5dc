/* The target flags shared by the agents commands: --target URL and its companions (the HTTP
 * target options of include/flare/agents/http_target.h, or NULL when the target is a command), and
 * the whole "how to run the target" of replay and min (fl_target_setup, campaign.h). */
#include "cli/cli.h"
#include "flare/agents/campaign.h"
#include "flare/agents/http_target.h"

const fl_http_opts *cli_http_target(const cli_opts *o, fl_http_opts *h) {
    if (!o->set[F_target]) return NULL;
    fl_http_opts_default(h);
    h->url = o->target;
    h->body_template = o->set[F_body_template] ? o->body_template : NULL;
    h->response = o->response;
    return h;
}

void cli_target_setup(const cli_opts *o, fl_target_setup *ts, fl_http_opts *h) {
    *ts = (fl_target_setup){
        .argv = o->trailing,
        .http = cli_http_target(o, h),
        .timeout_ms = (int)o->timeout_ms,
        .fresh = o->fresh,
        .mem_limit_mb = (int)o->mem_limit,
        .otlp = {.listen = o->set[F_otlp_listen] ? o->otlp_listen : NULL,
                 .file = o->set[F_otlp_file] ? o->otlp_file : NULL,
                 .grace_ms = (int)o->otlp_grace},
    };
}

void cli_recorded_timeout(const cli_opts *o, const char *path, fl_target_setup *ts) {
    int ms = o->given[F_timeout_ms] ? 0 : fl_campaign_recorded_timeout(path);
    if (ms > 0) ts->timeout_ms = ms;
}
