/* report_int.h — what report_data.c reads from an output folder, for the two writers (Markdown
 * in report.c, HTML in report_html.c), and the HTML report's pieces, each in its file below
 * report_html.c: the SVG and escaping helpers with the time plots (report_svg.c), a finding's
 * trace as a sequence diagram (report_trace.c), the agent graph (report_graph.c). */
#ifndef FLARE_REPORT_INT_H
#define FLARE_REPORT_INT_H

#include "agents/campaign/campaign_int.h"

/* Columns of plot_data (od_plot_header). */
enum { PD_TIME, PD_EXECS, PD_EPS, PD_CORPUS, PD_FEATURES, PD_EDGES, PD_EDGES_ALLOWED, PD_INTER,
       PD_INTRA, PD_FINDINGS, PD_HANGS, PD_COLS };

typedef struct rp_finding {
    saved_case s;
    char rel[512];     /* path relative to the output folder, for links */
    char input[128];   /* the turns, joined by " / " and cut (UTF-8 aware) */
} rp_finding;

typedef struct rp_data {
    const char *out_dir;
    od_kv stats;       /* fuzzer_stats (empty when missing) */
    int n_rows;
    double (*rows)[PD_COLS];
    int n_find;
    rp_finding *find;
    camp_edges edges;  /* edges.json: executions per handoff (empty when missing) */
    fl_spec *spec;     /* the recorded spec, NULL when none or unreadable (note says why) */
    char note[512];    /* why the spec or edges.json could not be read, "" otherwise */
} rp_data;

const char *rp_stat(const rp_data *d, const char *key); /* "" when missing */
/* The summary table both reports open with: {label, fuzzer_stats key} */
enum { RP_SUMMARY_ROWS = 17 };
extern const char *const rp_summary[RP_SUMMARY_ROWS][2];

/* Reading the folder (report_data.c): fuzzer_stats, plot_data and the findings (failures/,
 * hangs/, sorted by the exec that found them); nothing missing is an error. */
void rp_read(rp_data *d);
void rp_read_findings(rp_data *d); /* the findings only */
void rp_free(rp_data *d);

/* The findings table's rows (report_table.c) in a report's markup: each row is row_open,
 * its cells (each num_open or cell_open, the content, cell_close), row_close. */
typedef struct rp_markup {
    const char *row_open, *row_close, *cell_open, *num_open, *cell_close, *code_open, *code_close;
    void (*text)(fl_sb *b, const char *s);     /* s escaped for a cell */
    void (*link)(fl_sb *b, const char *rel);   /* the link to a finding's case file */
} rp_markup;
void rp_finding_rows(fl_sb *b, const rp_data *d, const rp_markup *m);

/* ---- HTML and SVG helpers (report_svg.c) ---- */
void rp_html(fl_sb *b, const char *s);              /* s escaped for HTML text and attributes */
/* s cut to at most max code points ("..." at the end when cut), escaped */
void rp_html_cut(fl_sb *b, const char *s, int max);
/* An SVG text element: class cls, anchored at (x, y); s cut to max code points, and when cut
 * the whole text in a <title> (a tooltip), so no label runs past its room. */
void rp_svg_text(fl_sb *b, double x, double y, const char *cls, const char *s, int max);
void rp_svg_open(fl_sb *b, double w, double h, const char *title); /* <svg ...><title> */
/* A plot of plot_data columns against time: the x axis ends at the last row, count axes get
 * whole-number ticks, percent axes go to 100 %. */
typedef struct rp_series {
    int col;
    const char *name, *color;
} rp_series;
void rp_svg_plot(fl_sb *b, const rp_data *d, const char *title, int n_ser, const rp_series *ser,
                 int percent);

/* A finding's trace as a sequence diagram (report_trace.c): one lifeline per participant
 * (user, the agents in order of appearance, output), one row per event, the finding's event
 * (or, with none, how the case ended) highlighted. */
void rp_trace_svg(fl_sb *b, const rp_finding *f);

/* The agent graph (report_graph.c): the spec's edges seen and unseen and the undeclared
 * edges observed, with their execution counts (edges.json), as SVG and as a table. */
void rp_graph(fl_sb *b, const rp_data *d);

/* The HTML report (report_html.c) into b. */
fl_status rp_write_html(const rp_data *d, fl_sb *b);

#endif
