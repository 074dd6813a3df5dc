/* The campaign's OpenTelemetry side: one span source (otlp_recv.h) for all workers, started
 * with the campaign, consulted after every case (fl_otlp_src_collect at the two places a case
 * runs: campaign_run.c and campaign_seeds.c), counted in fuzzer_stats (otlp_spans, otlp_late).
 * Everything is a no-op when neither --otlp-listen nor --otlp-file was given. */
#include "agents/campaign/campaign_int.h"

fl_status camp_otlp_start(camp *cp, fl_err *e) {
    const fl_campaign_opts *o = cp->o;
    fl_otlp_src_opts so = {.listen = o->otlp_listen, .file = o->otlp_file,
                           .grace_ms = o->otlp_grace_ms};
    fl_status st = fl_otlp_src_new(&so, &cp->otlp, e);
    cp->st.otlp_on = cp->otlp != NULL;
    return st;
}

void camp_otlp_stats(camp *cp) {
    if (!cp->otlp) return;
    fl_otlp_src_stats s;
    fl_otlp_src_stats_get(cp->otlp, &s);
    cp->st.otlp_spans = s.spans;
    cp->st.otlp_late = s.late;
}
