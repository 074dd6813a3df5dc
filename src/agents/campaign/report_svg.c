/* The HTML report's lowest layer: escaping, SVG text that never runs past its room, and the
 * plots of plot_data against time (the axes: core/axis.h, shared with nn fuzz's report). */
#include <math.h>
#include <string.h>

#include "agents/campaign/report_int.h"
#include "core/axis.h"

void rp_html(fl_sb *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fl_sb_puts(b, "&lt;"); break;
        case '>': fl_sb_puts(b, "&gt;"); break;
        case '&': fl_sb_puts(b, "&amp;"); break;
        case '"': fl_sb_puts(b, "&quot;"); break;
        case '\'': fl_sb_puts(b, "&#39;"); break;
        case '\n': case '\r': case '\t': fl_sb_putc(b, ' '); break;
        default: fl_sb_putc(b, *s);
        }
    }
}

/* Bytes of s's first max code points (all of s when shorter). */
static size_t cut_at(const char *s, int max) {
    size_t k = 0;
    for (int n = 0; s[k]; k++)
        if (((unsigned char)s[k] & 0xC0) != 0x80 && n++ == max) break;
    return k;
}

void rp_html_cut(fl_sb *b, const char *s, int max) {
    if (!s) return;
    size_t k = cut_at(s, max);
    char buf[4096];
    if (!s[k]) {
        rp_html(b, s);
        return;
    }
    if (k > sizeof buf - 1) k = sizeof buf - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    memcpy(buf, s, k), buf[k] = 0;
    rp_html(b, buf);
    fl_sb_puts(b, "...");
}

void rp_svg_text(fl_sb *b, double x, double y, const char *cls, const char *s, int max) {
    fl_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"%s\">", x, y, cls);
    if (s && s[cut_at(s, max)]) { /* cut: the whole text as a tooltip */
        fl_sb_puts(b, "<title>");
        rp_html_cut(b, s, 1000); /* a tooltip, not the file: that has it all */
        fl_sb_puts(b, "</title>");
    }
    rp_html_cut(b, s, max);
    fl_sb_puts(b, "</text>");
}

void rp_svg_open(fl_sb *b, double w, double h, const char *title) {
    /* width 100% up to w: a narrow window scales the drawing instead of scrolling */
    fl_sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
                    "style=\"width:100%%;max-width:%.0fpx\" role=\"img\"><title>", w, h, w);
    rp_html(b, title);
    fl_sb_puts(b, "</title>\n");
}

static void fmt_num(char *buf, size_t n, double v, int percent) {
    if (percent) snprintf(buf, n, "%g%%", round(100 * v * 1e6) / 1e6);
    else if (v >= 1e6) snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e4) snprintf(buf, n, "%gk", v / 1e3);
    else snprintf(buf, n, "%g", v);
}

/* x: seconds to the last row (the run's length, not a rounder number past it); y: counts up
 * to the next whole tick, fractions (percent) 0 to 1. Counts are drawn as steps: they change
 * only when something is found. */
void rp_svg_plot(fl_sb *b, const rp_data *d, const char *title, int n_ser, const rp_series *ser,
                 int percent) {
    const double W = 540, H = 230, L = 56, R = 16, T = 28, B = 36;
    double xmax = d->rows[d->n_rows - 1][PD_TIME], ymax = 0;
    for (int i = 0; i < d->n_rows; i++)
        for (int s = 0; s < n_ser; s++)
            if (d->rows[i][ser[s].col] > ymax) ymax = d->rows[i][ser[s].col];
    if (!(xmax > 0)) xmax = 1;
    double ys = percent ? 0.2 : fl_axis_step(ymax, 1), xs = fl_axis_step(xmax, 0);
    double ytop = percent ? 1 : fmax(ys, ceil(ymax / ys - 1e-9) * ys);
    double pw = W - L - R, ph = H - T - B;
    fl_sb_puts(b, "<figure>");
    rp_svg_open(b, W, H, title);
    rp_svg_text(b, L, 18, "t", title, 40);
    for (int k = 0; k * ys <= ytop * (1 + 1e-9); k++) {
        double y = T + ph - ph * k * ys / ytop;
        char ly[32];
        fmt_num(ly, sizeof ly, k * ys, percent);
        fl_sb_printf(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"g\"/>"
                        "<text x=\"%.0f\" y=\"%.1f\" class=\"yl\">%s</text>\n",
                     L, y, L + pw, y, L - 6, y + 4, ly);
    }
    for (int k = 0; k * xs <= xmax * (1 + 1e-9); k++) {
        char lx[32];
        fmt_num(lx, sizeof lx, k * xs, 0);
        fl_sb_printf(b, "<text x=\"%.1f\" y=\"%.0f\" class=\"xl\">%s</text>", L + pw * k * xs / xmax,
                     T + ph + 16, lx);
    }
    fl_sb_printf(b, "\n<text x=\"%.1f\" y=\"%.0f\" class=\"xl\">seconds</text>\n", L + pw / 2, H - 4);
    fl_sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" class=\"f\"/>\n", L, T, pw, ph);
    for (int s = 0; s < n_ser; s++) {
        fl_sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", ser[s].color);
        double prev_y = -1;
        for (int i = 0; i < d->n_rows; i++) {
            double x = L + pw * d->rows[i][PD_TIME] / xmax;
            double y = T + ph - ph * d->rows[i][ser[s].col] / ytop;
            if (prev_y >= 0 && y != prev_y) fl_sb_printf(b, "%.1f,%.1f ", x, prev_y);
            fl_sb_printf(b, "%.1f,%.1f ", x, y);
            prev_y = y;
        }
        /* the legend in the title row, right-aligned, so it never hides a line */
        fl_sb_printf(b, "\"/>\n<text x=\"%.0f\" y=\"18\" fill=\"%s\" class=\"lg\">", L + pw - 120 * s,
                     ser[s].color);
        rp_html(b, ser[s].name);
        fl_sb_puts(b, "</text>\n");
    }
    fl_sb_puts(b, "</svg></figure>\n");
}
