/* A finding's trace as an SVG sequence diagram: a lifeline per participant (user, the agents in
 * the order they appear, output), a row per event — a message is an arrow between two
 * lifelines, a tool call / result, decision or error a label on its agent's lifeline, the answer
 * an arrow to "output" — and a last row with how the case ended. The finding's event (the
 * file's "event"), or the last row when it names none, is highlighted. */
#include <stdio.h>
#include <string.h>

#include "agents/campaign/report_int.h"
#include "flare/agents/agcov.h"

enum { MAX_PARTS = 16, MAX_ROWS = 120 };

typedef struct parts {
    const char *name[MAX_PARTS];
    int n;
} parts;

/* The lifeline of name (added when new; the last one takes the overflow). */
static int part(parts *p, const char *name) {
    if (!name) name = "?";
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->name[i], name)) return i;
    if (p->n == MAX_PARTS) return MAX_PARTS - 1;
    p->name[p->n] = name;
    return p->n++;
}

static const double W = 1000, GUT = 34, ROW = 20, TOP = 34;

static double col_x(const parts *p, int i) { return GUT + (W - GUT) / p->n * (i + 0.5); }

/* Characters that fit in px pixels of 11 px text. */
static int fit(double px) { return px < 40 ? 6 : (int)(px / 6.4); }

static void arrow(fl_sb *b, double x1, double x2, double y, const char *cls) {
    double d = x2 > x1 ? -7 : 7;
    fl_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"%s\"/>"
                    "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" class=\"%s\"/>",
                 x1, y, x2, y, cls, x2, y, x2 + d, y - 4, x2 + d, y + 4, cls);
}

/* A label beside lifeline x (to its right, up to the diagram's edge). */
static void side(fl_sb *b, double x, double y, const char *cls, const char *a, const char *c) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", a, c && *c ? " " : "", c ? c : "");
    fl_sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" class=\"%s\"/>", x, y, cls);
    rp_svg_text(b, x + 7, y + 4, cls, buf, fit(W - x - 10 > 420 ? 420 : W - x - 10));
}

static void event_row(fl_sb *b, const fl_trace *t, int i, parts *p, double y) {
    const fl_event *ev = &t->events[i];
    char lab[256];
    switch (ev->kind) {
    case FL_EV_MESSAGE: {
        double x1 = col_x(p, part(p, ev->agent)), x2 = col_x(p, part(p, ev->to));
        if (x1 == x2) { side(b, x1, y, "ms", "to itself:", ev->content); break; }
        arrow(b, x1, x2, y, "ms");
        rp_svg_text(b, (x1 < x2 ? x1 : x2) + 6, y - 3, "ml", ev->content ? ev->content : "",
                    fit((x1 < x2 ? x2 - x1 : x1 - x2) - 12));
        break;
    }
    case FL_EV_TOOL_CALL:
        snprintf(lab, sizeof lab, "call %s", ev->tool ? ev->tool : "?");
        side(b, col_x(p, part(p, ev->agent)), y, "tc", lab, ev->arguments);
        break;
    case FL_EV_TOOL_RESULT:
        snprintf(lab, sizeof lab, "%s %s:", ev->ok ? "result" : "FAILED", ev->tool ? ev->tool : "?");
        side(b, col_x(p, part(p, ev->agent)), y, ev->ok ? "tr" : "te", lab, ev->content);
        break;
    case FL_EV_BRANCH:
        snprintf(lab, sizeof lab, "%s = %s", ev->point ? ev->point : "?", ev->choice ? ev->choice : "?");
        side(b, col_x(p, part(p, ev->agent)), y, "br", lab, NULL);
        break;
    case FL_EV_ERROR: side(b, col_x(p, part(p, ev->agent)), y, "te", "error:", ev->content); break;
    case FL_EV_OUTPUT: {
        double x1 = col_x(p, part(p, fl_agtrace_actor(t, i, NULL))), x2 = col_x(p, part(p, "output"));
        arrow(b, x1, x2, y, "op");
        rp_svg_text(b, (x1 < x2 ? x1 : x2) + 6, y - 3, "ml", ev->content ? ev->content : "",
                    fit((x1 < x2 ? x2 - x1 : x1 - x2) - 12));
        break;
    }
    case FL_EV_DONE: fl_sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"br\">done</text>", GUT, y + 4); break;
    }
}

void rp_trace_svg(fl_sb *b, const rp_finding *f) {
    const fl_trace *t = f->s.trace;
    if (!t) {
        fl_sb_puts(b, "<p>The file holds no trace.</p>\n");
        return;
    }
    parts p = {0};
    part(&p, "user");
    for (int i = 0; i < t->n_events; i++) { /* lifelines in the order the agents appear */
        const fl_event *ev = &t->events[i];
        if (ev->kind == FL_EV_MESSAGE) part(&p, ev->agent), part(&p, ev->to);
        else if (ev->kind != FL_EV_OUTPUT && ev->kind != FL_EV_DONE) part(&p, ev->agent);
    }
    for (int i = 0; i < t->n_events; i++)
        if (t->events[i].kind == FL_EV_OUTPUT) { part(&p, "output"); break; }
    int hl = f->s.event < t->n_events ? f->s.event : -1;
    int from = hl >= MAX_ROWS ? hl - MAX_ROWS / 2 : 0, to = from + MAX_ROWS;
    if (to > t->n_events) to = t->n_events;
    int rows = to - from + 1; /* + how it ended */
    double h = TOP + ROW * rows + 8;
    rp_svg_open(b, W, h, "sequence diagram of the finding's trace");
    double hy = hl >= 0 ? TOP + ROW * (hl - from) : TOP + ROW * (rows - 1);
    fl_sb_printf(b, "<rect x=\"0\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" class=\"hl\"/>\n", hy, W, ROW);
    for (int i = 0; i < p.n; i++) {
        double x = col_x(&p, i);
        fl_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ll\"/>", x, TOP - 8, x, h - 4);
        rp_svg_text(b, x, 16, "pn", p.name[i], fit((W - GUT) / p.n - 8));
    }
    fl_sb_puts(b, "\n");
    for (int i = from; i < to; i++) {
        double y = TOP + ROW * (i - from) + ROW / 2;
        fl_sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"ix\">%d</text>", GUT - 6, y + 4, i);
        event_row(b, t, i, &p, y);
        fl_sb_puts(b, "\n");
    }
    char how[256];
    fl_trace_describe_exit(t, how, sizeof how);
    double y = TOP + ROW * (rows - 1) + ROW / 2;
    rp_svg_text(b, GUT, y + 4, t->exit == FL_EXIT_DONE ? "br" : "te", how, fit(W - GUT));
    fl_sb_puts(b, "</svg>\n");
    if (from > 0 || to < t->n_events)
        fl_sb_printf(b, "<p>Events %d to %d of %d shown; the file has them all.</p>\n", from, to - 1, t->n_events);
}
