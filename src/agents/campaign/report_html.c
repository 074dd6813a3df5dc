/* report.html: the summary, the plots of plot_data, the agent graph and the findings, each of
 * which opens (<details>, no script) into its trace drawn as a sequence diagram. One file with
 * no external resource (inline CSS and SVG, no script), laid out to fit 1280 px without
 * horizontal scrolling: long text wraps, labels in drawings are cut with the whole text in a
 * tooltip, and drawings scale down with the window. */
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/report_int.h"

static void html_link(fl_sb *b, const char *rel) {
    fl_sb_puts(b, "<a href=\"");
    for (const char *s = rel; *s; s++) /* "failures/loop/x.json": ':' / ' ' safe */
        fl_sb_printf(b, (*s == ' ' || *s == '"' || *s == '#' || *s == '?' || *s == '%')
                         ? "%%%02X" : "%c", (unsigned char)*s);
    fl_sb_puts(b, "\">");
    rp_html(b, rel);
    fl_sb_puts(b, "</a>");
}

static const char style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1em auto;max-width:1100px;padding:0 1em;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0;max-width:100%}td,th{border:1px solid #ccc;"
    "padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}\n"
    "td.n{text-align:right}code,pre{font-size:12px}pre{white-space:pre-wrap;overflow-wrap:anywhere;"
    "background:#f6f6f6;padding:6px;max-height:20em;overflow-y:auto}\n"
    "figure{display:inline-block;margin:0 1em 1em 0;width:540px;max-width:100%}figure.wide{width:760px}\n"
    "details.finding{border:1px solid #ccc;margin:4px 0;padding:2px 8px}details.finding[open]{padding-bottom:8px}\n"
    "summary{cursor:pointer;overflow-wrap:anywhere}.kinds{color:#666}\n"
    "svg text{font-size:11px}.g{stroke:#e4e4e4}.f{fill:none;stroke:#999}.t{font-weight:bold;font-size:13px}\n"
    ".yl{text-anchor:end}.xl{text-anchor:middle}.lg{font-size:12px;text-anchor:end}\n"
    ".ll{stroke:#bbb;stroke-dasharray:3 3}.pn{font-weight:bold;text-anchor:middle}.ix{fill:#888;text-anchor:end}\n"
    ".hl{fill:#fde2e2}.ms,.op{stroke:#333;fill:#333}.op{stroke:#7b3fa0;fill:#7b3fa0}.ml{fill:#333}\n"
    ".tc{fill:#1f5fa4;stroke:none}.tr{fill:#2a7a2a;stroke:none}.te{fill:#c0281e;stroke:none}"
    ".br{fill:#777;stroke:none}\n"
    ".nd{fill:#f4f4fb;stroke:#557}.nl{text-anchor:middle}.el{text-anchor:middle;fill:#333}\n"
    "path.es,path.eu,path.ex,path.eo{fill:none;stroke-width:1.6}.es{stroke:#2a8a2a;color:#2a8a2a}"
    ".esh{fill:#2a8a2a}.eu{stroke:#aaa;stroke-dasharray:5 4;color:#888}.euh{fill:#aaa}"
    ".ex{stroke:#d0281e;color:#d0281e}.exh{fill:#d0281e}.eo{stroke:#1f5fa4;color:#1f5fa4}.eoh{fill:#1f5fa4}\n";

/* The summary, "n/a" where a value needs a spec the campaign did not have; kinds with no
 * finding folded into one row. */
static void summary(fl_sb *b, const rp_data *d) {
    fl_sb_puts(b, "<table>\n");
    for (size_t i = 0; i < RP_SUMMARY_ROWS; i++) {
        const char *v = rp_stat(d, rp_summary[i][1]);
        if (!*rp_stat(d, "spec") && (!strcmp(rp_summary[i][1], "spec") || !strcmp(rp_summary[i][1], "edges_allowed")))
            v = "n/a (no spec)";
        fl_sb_printf(b, "<tr><th>%s</th><td>", rp_summary[i][0]);
        rp_html(b, v);
        fl_sb_puts(b, "</td></tr>\n");
    }
    int zero = 0;
    for (int i = 0; i < d->stats.n; i++)
        if (!strncmp(d->stats.key[i], "findings_", 9)) {
            if (atof(d->stats.val[i]) == 0) { zero++; continue; }
            fl_sb_puts(b, "<tr><th>findings: ");
            rp_html(b, d->stats.key[i] + 9);
            fl_sb_puts(b, "</th><td>");
            rp_html(b, d->stats.val[i]);
            fl_sb_puts(b, "</td></tr>\n");
        }
    if (zero) {
        fl_sb_printf(b, "<tr><th>findings: other kinds</th><td><details class=\"kinds\"><summary>none "
                        "of %d kinds</summary>", zero);
        for (int i = 0, k = 0; i < d->stats.n; i++)
            if (!strncmp(d->stats.key[i], "findings_", 9) && atof(d->stats.val[i]) == 0) {
                fl_sb_puts(b, k++ ? ", " : "");
                rp_html(b, d->stats.key[i] + 9);
            }
        fl_sb_puts(b, "</details></td></tr>\n");
    }
    fl_sb_puts(b, "</table>\n");
}

static void plots(fl_sb *b, const rp_data *d) {
    fl_sb_puts(b, "<h2>Coverage over time</h2>\n");
    if (!d->n_rows) {
        fl_sb_puts(b, "<p>plot_data holds no rows yet.</p>\n");
        return;
    }
    rp_series feat[] = {{PD_FEATURES, "features", "#1f77b4"}, {PD_CORPUS, "corpus", "#999"}};
    rp_series cov[2], find[] = {{PD_FINDINGS, "distinct findings", "#d62728"}};
    int n_cov = 0; /* without a spec there is no coverage to draw: n/a, not a line at 0 % */
    if (strcmp(rp_stat(d, "inter_agent_cov"), "n/a")) cov[n_cov++] = (rp_series){PD_INTER, "inter-agent", "#2ca02c"};
    if (strcmp(rp_stat(d, "intra_agent_cov"), "n/a")) cov[n_cov++] = (rp_series){PD_INTRA, "intra-agent", "#ff7f0e"};
    rp_svg_plot(b, d, "coverage features and corpus size", 2, feat, 0);
    if (n_cov) rp_svg_plot(b, d, "inter- and intra-agent coverage", n_cov, cov, 1);
    rp_svg_plot(b, d, "distinct findings", 1, find, 0);
    if (!n_cov)
        fl_sb_puts(b, "<p>Inter- and intra-agent coverage: n/a (the campaign ran without a spec, "
                      "or its spec declares no tools or choices).</p>\n");
}

static void row(fl_sb *b, const char *k, const char *v) {
    if (!v || !*v) return;
    fl_sb_printf(b, "<tr><th>%s</th><td>", k);
    rp_html(b, v);
    fl_sb_puts(b, "</td></tr>");
}

static void finding(fl_sb *b, int i, const rp_finding *f) {
    const saved_case *s = &f->s;
    fl_sb_printf(b, "<details class=\"finding\" id=\"f%d\"><summary><b>#%d</b> ", i + 1, i + 1);
    rp_html(b, s->kind ? s->kind : "?");
    if (s->mast) fl_sb_puts(b, " "), rp_html(b, s->mast);
    fl_sb_puts(b, " <code>");
    rp_html(b, s->signature);
    fl_sb_puts(b, "</code> ");
    rp_html_cut(b, s->message ? s->message : f->input, 110);
    fl_sb_puts(b, "</summary>\n<table>");
    row(b, "message", s->message);
    row(b, "input", f->input);
    if (s->found_exec >= 0) fl_sb_printf(b, "<tr><th>found at exec</th><td>%.0f (%.3f s)</td></tr>", s->found_exec, s->found_time);
    if (s->event >= 0) fl_sb_printf(b, "<tr><th>event</th><td>%d (highlighted)</td></tr>", s->event);
    fl_sb_puts(b, "<tr><th>case</th><td>");
    html_link(b, f->rel);
    fl_sb_puts(b, "</td></tr></table>\n");
    rp_trace_svg(b, f);
    if (s->trace && s->trace->err_len) {
        fl_sb_puts(b, "<p>stderr of the case:</p><pre>");
        rp_html_cut(b, s->trace->err, 4000);
        fl_sb_puts(b, "</pre>\n");
    }
    fl_sb_puts(b, "</details>\n");
}

fl_status rp_write_html(const rp_data *d, fl_sb *b) {
    fl_sb_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width\">"
                    "<title>flare agents: campaign report</title>\n<style>\n%s</style></head><body>\n"
                    "<h1>flare agents: campaign report</h1>\n", style);
    summary(b, d);
    plots(b, d);
    fl_sb_puts(b, "<h2>Agent graph</h2>\n");
    if (!d->spec) fl_sb_puts(b, "<p>No spec: the edges observed, none declared.</p>\n");
    if (d->note[0]) fl_sb_puts(b, "<p>"), rp_html(b, d->note), fl_sb_puts(b, "</p>\n");
    rp_graph(b, d);
    fl_sb_printf(b, "<h2 id=\"findings\">Findings (<span id=\"n-findings\">%d</span>)</h2>\n", d->n_find);
    if (!d->n_find) fl_sb_puts(b, "<p>No finding.</p>\n");
    else fl_sb_puts(b, "<p>Open a finding for its trace: a row per event, the one that shows the "
                       "finding highlighted.</p>\n");
    for (int i = 0; i < d->n_find; i++) finding(b, i, &d->find[i]);
    fl_sb_printf(b, "<p>Generated by flare %s from the files of this folder "
                    "(fuzzer_stats, plot_data, edges.json, failures/, hangs/).</p>\n</body></html>\n",
                 FLARE_VERSION);
    return FL_OK;
}
