/* report.html: the Markdown report's content plus SVG line plots of plot_data, in one file
 * with no external resource (inline CSS and SVG, no script). */
#include <math.h>
#include <string.h>

#include "agents/campaign/report_int.h"

/* s escaped for HTML text and attributes. */
static void rp_html(fl_sb *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fl_sb_printf(b, "&lt;"); break;
        case '>': fl_sb_printf(b, "&gt;"); break;
        case '&': fl_sb_printf(b, "&amp;"); break;
        case '"': fl_sb_printf(b, "&quot;"); break;
        case '\'': fl_sb_printf(b, "&#39;"); break;
        default: fl_sb_printf(b, "%c", *s);
        }
    }
}

static void html_link(fl_sb *b, const char *rel) {
    fl_sb_printf(b, "<a href=\"");
    for (const char *s = rel; *s; s++) /* "failures/loop/x.json": ':' / ' ' safe */
        fl_sb_printf(b, (*s == ' ' || *s == '"' || *s == '#' || *s == '?' || *s == '%')
                         ? "%%%02X" : "%c", (unsigned char)*s);
    fl_sb_printf(b, "\">");
    rp_html(b, rel);
    fl_sb_printf(b, "</a>");
}

/* A "nice" axis maximum: 1, 2, 2.5 or 5 times a power of ten, at least v. */
static double nice_max(double v) {
    if (!(v > 0)) return 1;
    double p = pow(10, floor(log10(v)));
    static const double m[] = {1, 2, 2.5, 5, 10};
    for (int i = 0; i < 5; i++)
        if (m[i] * p >= v * (1 - 1e-9)) return m[i] * p;
    return 10 * p;
}

static void fmt_num(char *buf, size_t n, double v, int percent) {
    if (percent) snprintf(buf, n, "%g%%", 100 * v);
    else if (v >= 1e6) snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e4) snprintf(buf, n, "%gk", v / 1e3);
    else snprintf(buf, n, "%g", v);
}

typedef struct series {
    int col;
    const char *name, *color;
} series;

/* One plot: x = relative time, one or more series of plot_data sharing the y axis (the counts
 * are drawn as steps: they change only when something is found). */
static void svg_plot(fl_sb *b, const rp_data *d, const char *title, int n_ser,
                     const series *ser, int percent) {
    const double W = 640, H = 240, L = 56, R = 16, T = 28, B = 36;
    double xmax = 0, ymax = 0;
    for (int i = 0; i < d->n_rows; i++) {
        if (d->rows[i][PD_TIME] > xmax) xmax = d->rows[i][PD_TIME];
        for (int s = 0; s < n_ser; s++)
            if (d->rows[i][ser[s].col] > ymax) ymax = d->rows[i][ser[s].col];
    }
    xmax = nice_max(xmax);
    ymax = percent ? 1 : nice_max(ymax);
    double pw = W - L - R, ph = H - T - B;
    fl_sb_printf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" role=\"img\"><title>", W, H, W, H);
    rp_html(b, title);
    fl_sb_printf(b, "</title><text x=\"%.0f\" y=\"18\" class=\"t\">", L);
    rp_html(b, title);
    fl_sb_printf(b, "</text>\n");
    for (int k = 0; k <= 4; k++) { /* grid and tick labels */
        double y = T + ph - ph * k / 4, x = L + pw * k / 4;
        char ly[32], lx[32];
        fmt_num(ly, sizeof ly, ymax * k / 4, percent);
        fmt_num(lx, sizeof lx, xmax * k / 4, 0);
        fl_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"g\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" class=\"yl\">%s</text>"
                     "<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">%s</text>\n",
                  L, y, L + pw, y, L - 6, y + 4, ly, x, T + ph + 16, lx);
    }
    fl_sb_printf(b, "<text x=\"%.1f\" y=\"%.0f\" class=\"xl\">seconds</text>\n", L + pw / 2, H - 4);
    fl_sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" class=\"f\"/>\n", L,
              T, pw, ph);
    for (int s = 0; s < n_ser; s++) {
        fl_sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                  ser[s].color);
        double prev_y = -1;
        for (int i = 0; i < d->n_rows; i++) {
            double x = L + pw * d->rows[i][PD_TIME] / xmax;
            double y = T + ph - ph * d->rows[i][ser[s].col] / ymax;
            if (prev_y >= 0 && y != prev_y) fl_sb_printf(b, "%.1f,%.1f ", x, prev_y);
            fl_sb_printf(b, "%.1f,%.1f ", x, y);
            prev_y = y;
        }
        /* legend in the title row, right-aligned, so it never hides a line */
        fl_sb_printf(b, "\"/>\n<text x=\"%.0f\" y=\"18\" fill=\"%s\" class=\"lg\">",
                  L + pw - 120 * s, ser[s].color);
        rp_html(b, ser[s].name);
        fl_sb_printf(b, "</text>\n");
    }
    fl_sb_printf(b, "</svg></figure>\n");
}

fl_status rp_write_html(const rp_data *d, fl_sb *b) {
    fl_sb_printf(b,
              "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<title>flare agents: campaign report</title>\n<style>\n"
              "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;"
              "color:#222}\n"
              "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
              "padding:3px 8px;text-align:left;vertical-align:top}\n"
              "td.n{text-align:right}code{font-size:12px}\n"
              "figure{display:inline-block;margin:0 1em 1em 0}\n"
              ".g{stroke:#e4e4e4}.f{fill:none;stroke:#999}.t{font-weight:bold;font-size:13px}\n"
              ".yl{font-size:11px;text-anchor:end}.xl{font-size:11px;text-anchor:middle}\n"
              ".lg{font-size:12px;text-anchor:end}\n</style></head><body>\n"
              "<h1>flare agents: campaign report</h1>\n<table>\n");
    for (size_t i = 0; i < RP_SUMMARY_ROWS; i++) {
        fl_sb_printf(b, "<tr><th>%s</th><td>", rp_summary[i][0]);
        rp_html(b, rp_stat(d, rp_summary[i][1]));
        fl_sb_printf(b, "</td></tr>\n");
    }
    for (int i = 0; i < d->stats.n; i++)
        if (!strncmp(d->stats.key[i], "findings_", 9)) {
            fl_sb_printf(b, "<tr><th>findings: ");
            rp_html(b, d->stats.key[i] + 9);
            fl_sb_printf(b, "</th><td>");
            rp_html(b, d->stats.val[i]);
            fl_sb_printf(b, "</td></tr>\n");
        }
    fl_sb_printf(b, "</table>\n<h2>Coverage over time</h2>\n");
    if (!d->n_rows) fl_sb_printf(b, "<p>plot_data holds no rows yet.</p>\n");
    else {
        series feat[] = {{PD_FEATURES, "features", "#1f77b4"}, {PD_CORPUS, "corpus", "#999"}};
        series cov[] = {{PD_INTER, "inter-agent", "#2ca02c"}, {PD_INTRA, "intra-agent", "#ff7f0e"}};
        series find[] = {{PD_FINDINGS, "distinct findings", "#d62728"}};
        svg_plot(b, d, "coverage features and corpus size", 2, feat, 0);
        svg_plot(b, d, "inter- and intra-agent coverage", 2, cov, 1);
        svg_plot(b, d, "findings", 1, find, 0);
    }
    fl_sb_printf(b, "<h2>Findings (%d)</h2>\n", d->n_find);
    if (!d->n_find) fl_sb_printf(b, "<p>No finding.</p>\n");
    else {
        fl_sb_printf(b, "<table><tr><th>#</th><th>kind</th><th>MAST</th><th>signature</th>"
                     "<th>found at exec</th><th>example input</th><th>message</th>"
                     "<th>case</th></tr>\n");
        static const rp_markup html = {"<tr>", "</tr>\n", "<td>", "<td class=\"n\">", "</td>",
                                       "<code>", "</code>", 1, rp_html, html_link};
        rp_finding_rows(b, d, &html);
        fl_sb_printf(b, "</table>\n");
    }
    fl_sb_printf(b, "<p>Generated by flare %s from the files of this folder "
                 "(fuzzer_stats, plot_data, failures/, hangs/).</p>\n</body></html>\n",
              FLARE_VERSION);
    return FL_OK;
}
