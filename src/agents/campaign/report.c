/* report.md and report.html: what a campaign did, rebuilt from the files of its output folder
 * (fuzzer_stats, plot_data, failures/, hangs/) so that a report can be written at the end of
 * a campaign, after a crash of flare itself, or for a folder copied from elsewhere.
 *
 * Markdown holds the summary, a coverage timeline (plot_data sampled to a dozen rows) and the
 * findings table; HTML (report_html.c) adds SVG plots and is self-contained: no script, no
 * style sheet or font from the network, so it opens the same in a CI artifact viewer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/campaign/report_int.h"

/* Markdown table cell: '|' escaped, newlines as spaces, backticks kept out of code spans. */
static void md_cell(fl_sb *b, const char *s) {
    for (; s && *s; s++) {
        if (*s == '|') fl_sb_printf(b, "\\|");
        else if (*s == '\n' || *s == '\r') fl_sb_printf(b, " ");
        else if (*s == '<') fl_sb_printf(b, "&lt;");
        else fl_sb_printf(b, "%c", *s);
    }
}

static void md_link(fl_sb *b, const char *rel) {
    fl_sb_printf(b, "[%s](", rel);
    for (const char *s = rel; *s; s++) /* a link target with ':' or ' ' still works */
        fl_sb_printf(b, (*s == ' ' || *s == '(' || *s == ')') ? "%%%02X" : "%c", (unsigned char)*s);
    fl_sb_printf(b, ")");
}

/* ---- Markdown --------------------------------------------------------------------------------- */
static void write_md(const rp_data *d, fl_sb *b) {
    fl_sb_printf(b, "# flare agents: campaign report\n\n");
    fl_sb_printf(b, "| | |\n|---|---|\n");
    for (size_t i = 0; i < RP_SUMMARY_ROWS; i++) {
        fl_sb_printf(b, "| %s | ", rp_summary[i][0]);
        md_cell(b, rp_stat(d, rp_summary[i][1]));
        fl_sb_printf(b, " |\n");
    }
    for (int i = 0; i < d->stats.n; i++)
        if (!strncmp(d->stats.key[i], "findings_", 9))
            fl_sb_printf(b, "| findings: %s | %s |\n", d->stats.key[i] + 9, d->stats.val[i]);

    fl_sb_printf(b, "\n## Coverage over time\n\n");
    if (!d->n_rows) fl_sb_printf(b, "(plot_data holds no rows yet)\n");
    else {
        fl_sb_printf(b, "| time (s) | execs | corpus | features | edges | inter-agent | "
                     "intra-agent | findings |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        int step = d->n_rows > 12 ? (d->n_rows + 10) / 11 : 1;
        for (int i = 0; i < d->n_rows; i += step) {
            int r = i + step >= d->n_rows ? d->n_rows - 1 : i; /* always end on the last row */
            const double *x = d->rows[r];
            fl_sb_printf(b, "| %.0f | %.0f | %.0f | %.0f | %.0f/%.0f | %.1f%% | %.1f%% | %.0f |\n",
                      x[PD_TIME], x[PD_EXECS], x[PD_CORPUS], x[PD_FEATURES], x[PD_EDGES],
                      x[PD_EDGES_ALLOWED], 100 * x[PD_INTER], 100 * x[PD_INTRA], x[PD_FINDINGS]);
            if (r == d->n_rows - 1) break;
        }
    }
    fl_sb_printf(b, "\nThe plots are in report.html.\n\n## Findings (%d)\n\n", d->n_find);
    if (!d->n_find) {
        fl_sb_printf(b, "No finding.\n");
        return;
    }
    fl_sb_printf(b, "| # | kind | MAST | signature | found at exec | example input | case |\n"
                 "|---:|---|---|---|---:|---|---|\n");
    static const rp_markup md = {"|", "\n", " ", " ", " |", "`", "`", md_cell, md_link};
    rp_finding_rows(b, d, &md);
    for (int i = 0; i < d->n_find; i++) {
        const rp_finding *f = &d->find[i];
        if (!f->s.message) continue;
        if (i == 0 || !d->find[i - 1].s.message) fl_sb_printf(b, "\n### Messages\n\n");
        fl_sb_printf(b, "%d. ", i + 1);
        md_cell(b, f->s.message);
        fl_sb_printf(b, "\n");
    }
}

fl_status fl_report_print(const char *out_dir, FILE *f, fl_err *e) {
    rp_data d = {.out_dir = out_dir};
    rp_read_findings(&d);
    if (!d.n_find) fprintf(f, "no findings\n");
    else fprintf(f, "%-3s %-16s %-7s %-16s %-40s %s\n", "#", "kind", "MAST", "signature",
                 "example input", "file (in the output folder)");
    for (int i = 0; i < d.n_find; i++) {
        const rp_finding *x = &d.find[i];
        char in[44];
        snprintf(in, sizeof in, "%.43s", x->input);
        if (strlen(in) == sizeof in - 1) { /* cut: "..." at a code-point start */
            size_t k = sizeof in - 4;
            while (k > 0 && ((unsigned char)in[k] & 0xC0) == 0x80) k--;
            memcpy(in + k, "...", 4);
        }
        for (char *p = in; *p; p++) /* one line per finding */
            if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
        int pad = 40; /* columns, not bytes: multi-byte characters take one column or two */
        for (const char *p = in; *p; p++) pad -= ((unsigned char)*p & 0xC0) != 0x80;
        fprintf(f, "%-3d %-16s %-7s %-16s %s%*s %s\n", i + 1, x->s.kind ? x->s.kind : "?",
                x->s.mast ? x->s.mast : "-", x->s.signature ? x->s.signature : "?", in,
                pad > 0 ? pad : 0, "", x->rel);
    }
    rp_free(&d);
    return ferror(f) ? fl_fail(e, FL_ERR_IO, "cannot write the findings table") : FL_OK;
}

fl_status fl_report_write(const char *out_dir, fl_err *e) {
    rp_data d = {.out_dir = out_dir};
    char path[4096];
    fl_status st = od_path(path, sizeof path, out_dir, "report.html", e);
    if (st) return st;
    rp_read(&d);
    fl_sb b = {0};
    write_md(&d, &b);
    if (b.oom) st = fl_fail(e, FL_ERR_NOMEM, "report: out of memory");
    if (!st) st = od_path(path, sizeof path, out_dir, "report.md", e);
    if (!st) st = fl_file_write_atomic(path, b.p ? b.p : "", b.n, e);
    b.n = 0;
    if (!st) st = rp_write_html(&d, &b);
    if (!st && b.oom) st = fl_fail(e, FL_ERR_NOMEM, "report: out of memory");
    if (!st) st = od_path(path, sizeof path, out_dir, "report.html", e);
    if (!st) st = fl_file_write_atomic(path, b.p ? b.p : "", b.n, e);
    free(b.p);
    rp_free(&d);
    return st;
}
