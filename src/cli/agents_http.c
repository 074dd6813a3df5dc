/* --target URL and its companions, shared by the agents commands: the HTTP target options
 * (include/flare/http_target.h) from the flags, or NULL when the target is a command. */
#include "cli/cli.h"
#include "flare/http_target.h"

const fl_http_opts *cli_http_target(const cli_opts *o, fl_http_opts *h) {
    if (!o->set[F_target]) return NULL;
    fl_http_opts_default(h);
    h->url = o->target;
    h->body_template = o->set[F_body_template] ? o->body_template : NULL;
    h->response = o->response;
    return h;
}
