/* The agent graph: the nodes are user, the spec's agents, output and any agent the traces
 * named that the spec does not declare; the edges are the spec's allowed handoffs — seen
 * (green) or never seen (grey, dashed) — and the handoffs observed that the spec does not
 * allow (red), each labelled with the executions that took it (edges.json). Without a spec
 * every observed edge is drawn (blue). Drawn on an ellipse, as SVG, then listed as a table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "agents/campaign/report_int.h"

enum { MAX_NODES = 40, MAX_LINKS = 400 };
enum { L_SEEN, L_UNSEEN, L_UNDECLARED, L_OBSERVED };
static const char *const link_class[] = {"es", "eu", "ex", "eo"};
static const char *const link_name[] = {"declared, seen", "declared, never seen", "not declared, observed",
                                        "observed"};

typedef struct graph {
    const char *node[MAX_NODES];
    int n_nodes;
    struct { int from, to, kind; uint64_t execs; } link[MAX_LINKS];
    int n_links;
} graph;

static int node(graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->node[i], name)) return i;
    if (g->n_nodes == MAX_NODES) return -1;
    g->node[g->n_nodes] = name;
    return g->n_nodes++;
}

static void add_link(graph *g, const char *from, const char *to, int kind, uint64_t execs) {
    int a = node(g, from), c = node(g, to);
    if (a < 0 || c < 0 || g->n_links == MAX_LINKS) return;
    g->link[g->n_links].from = a, g->link[g->n_links].to = c;
    g->link[g->n_links].kind = kind, g->link[g->n_links++].execs = execs;
}

static const char *spec_name(const fl_spec *s, int a) {
    return a == FL_SPEC_USER ? "user" : a == FL_SPEC_OUTPUT ? "output" : s->agents[a].name;
}

static uint64_t hits(const rp_data *d, const char *from, const char *to, char *used) {
    for (int i = 0; i < d->edges.n; i++)
        if (!strcmp(d->edges.v[i].from, from) && !strcmp(d->edges.v[i].to, to)) {
            used[i] = 1;
            return d->edges.v[i].execs;
        }
    return 0;
}

static void build(graph *g, const rp_data *d, char *used) {
    const fl_spec *s = d->spec;
    node(g, "user");
    for (int i = 0; s && i < s->n_agents; i++) node(g, s->agents[i].name);
    for (int i = 0; s && i < s->n_edges; i++) {
        const char *f = spec_name(s, s->edges[i].from), *t = spec_name(s, s->edges[i].to);
        uint64_t n = hits(d, f, t, used);
        add_link(g, f, t, n ? L_SEEN : L_UNSEEN, n);
    }
    for (int i = 0; i < d->edges.n; i++)
        if (!used[i] && strcmp(d->edges.v[i].to, "output"))
            add_link(g, d->edges.v[i].from, d->edges.v[i].to, s ? L_UNDECLARED : L_OBSERVED, d->edges.v[i].execs);
    for (int i = 0; i < d->edges.n; i++) /* output last: the ellipse ends beside user */
        if (!used[i] && !strcmp(d->edges.v[i].to, "output"))
            add_link(g, d->edges.v[i].from, "output", s ? L_UNDECLARED : L_OBSERVED, d->edges.v[i].execs);
    if (s) node(g, "output");
}

static void draw(fl_sb *b, const graph *g) {
    const double W = 760, H = 440, RX = 290, RY = 170, CX = W / 2, CY = H / 2 + 6;
    double x[MAX_NODES], y[MAX_NODES];
    for (int i = 0; i < g->n_nodes; i++) { /* user on the left, then clockwise */
        double a = M_PI + 2 * M_PI * i / g->n_nodes;
        x[i] = CX + RX * cos(a), y[i] = CY - RY * sin(a);
    }
    rp_svg_open(b, W, H, "agent graph");
    for (int k = 0; k < g->n_links; k++) {
        int a = g->link[k].from, c = g->link[k].to;
        const char *cls = link_class[g->link[k].kind];
        double dx = x[c] - x[a], dy = y[c] - y[a], len = hypot(dx, dy);
        char lab[32];
        snprintf(lab, sizeof lab, "%llu", (unsigned long long)g->link[k].execs);
        if (len < 1) { /* to itself: a loop above the node */
            fl_sb_printf(b, "<path d=\"M%.1f,%.1f c-30,-46 30,-46 8,0\" class=\"%s\"/>", x[a] - 8, y[a] - 13, cls);
            rp_svg_text(b, x[a], y[a] - 46, "el", lab, 12);
            continue;
        }
        /* a curve bent to the right of its direction, so a->b and b->a stay apart */
        double nx = -dy / len, ny = dx / len, mx = (x[a] + x[c]) / 2 + 26 * nx, my = (y[a] + y[c]) / 2 + 26 * ny;
        double ex = x[c] - mx, ey = y[c] - my, el = hypot(ex, ey);
        double sx = x[a] + (mx - x[a]) * 18 / hypot(mx - x[a], my - y[a]);
        double sy = y[a] + (my - y[a]) * 18 / hypot(mx - x[a], my - y[a]);
        double tx = x[c] - ex / el * 20, ty = y[c] - ey / el * 20, ux = ex / el, uy = ey / el;
        fl_sb_printf(b, "<path d=\"M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f\" class=\"%s\"/>"
                        "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" class=\"%sh\"/>",
                     sx, sy, mx, my, tx, ty, cls, tx, ty, tx - 9 * ux - 4 * uy, ty - 9 * uy + 4 * ux,
                     tx - 9 * ux + 4 * uy, ty - 9 * uy - 4 * ux, cls);
        rp_svg_text(b, (x[a] + x[c]) / 2 + 13 * nx, (y[a] + y[c]) / 2 + 13 * ny + 4, "el", lab, 12);
        fl_sb_puts(b, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        fl_sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"100\" height=\"26\" rx=\"6\" class=\"nd\"/>",
                     x[i] - 50, y[i] - 13);
        rp_svg_text(b, x[i], y[i] + 4, "nl", g->node[i], 14);
    }
    fl_sb_puts(b, "</svg>\n");
}

void rp_graph(fl_sb *b, const rp_data *d) {
    static graph g; /* large; the report is written by one thread */
    char used[4096] = {0};
    memset(&g, 0, sizeof g);
    if (d->edges.n > (int)sizeof used) {
        fl_sb_printf(b, "<p>%d edges: too many to draw.</p>\n", d->edges.n);
        return;
    }
    build(&g, d, used);
    if (!g.n_links) {
        fl_sb_puts(b, "<p>No edge declared or observed (edges.json is missing or empty).</p>\n");
        return;
    }
    fl_sb_puts(b, "<p class=\"key\"><span class=\"k es\">&#9644; declared, seen</span> "
                  "<span class=\"k eu\">&#9644; declared, never seen</span> "
                  "<span class=\"k ex\">&#9644; not declared, observed</span>; the numbers are "
                  "executions that took the edge.</p>\n<figure class=\"wide\">");
    draw(b, &g);
    fl_sb_puts(b, "</figure>\n<table class=\"edges\"><tr><th>from</th><th>to</th><th>edge</th>"
                  "<th>executions</th></tr>\n");
    for (int k = 0; k < g.n_links; k++) {
        fl_sb_puts(b, "<tr><td>");
        rp_html(b, g.node[g.link[k].from]);
        fl_sb_puts(b, "</td><td>");
        rp_html(b, g.node[g.link[k].to]);
        fl_sb_printf(b, "</td><td class=\"%s\">%s</td><td class=\"n\">%llu</td></tr>\n", link_class[g.link[k].kind],
                     link_name[g.link[k].kind], (unsigned long long)g.link[k].execs);
    }
    fl_sb_puts(b, "</table>\n");
}
