/* report.html of a network campaign, from the output folder alone (so it can be written at
 * any time, also for a campaign that was killed): the stats, coverage / corpus / failures
 * over time as SVG, the confusion matrix of the distinct failures, and per class pair the
 * seed next to its mutant. Images are inlined as data: URIs; nothing is fetched.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/axis.h"
#include "fuzz/fuzz_int.h"

enum { MAX_PER_PAIR = 24, MAX_IMAGES = 400 };

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void base64(FILE *f, const uint8_t *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        fputc(t[v >> 18 & 63], f);
        fputc(t[v >> 12 & 63], f);
        fputc(i + 1 < n ? t[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? t[v & 63] : '=', f);
    }
}

static int inline_png(FILE *f, const char *path) {
    uint8_t *buf;
    size_t len;
    if (fl_file_read(path, &buf, &len, NULL)) return 0;
    fputs("<img src=\"data:image/png;base64,", f);
    base64(f, buf, len);
    fputs("\">", f);
    free(buf);
    return 1;
}

/* ---- plot_data ---------------------------------------------------------------------------- */
typedef struct series {
    int n, cap;
    double *v; /* rows x 9 columns */
} series;

static void read_plot(const char *out_dir, series *s) {
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s/plot_data", out_dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || !strchr(line, '\n')) continue; /* header, torn last line */
        double r[9];
        if (sscanf(line, "%lf, %lf, %lf, %lf, %lf, %lf, %lf, %lf, %lf", &r[0], &r[1], &r[2], &r[3],
                   &r[4], &r[5], &r[6], &r[7], &r[8]) != 9)
            continue;
        if (s->n == s->cap) {
            int c = s->cap ? s->cap * 2 : 256;
            double *p = realloc(s->v, sizeof(double) * 9 * (size_t)c);
            if (!p) break;
            s->v = p;
            s->cap = c;
        }
        memcpy(s->v + 9 * s->n++, r, sizeof r);
    }
    if (f) fclose(f);
}

/* One SVG: x = time (to the last row), columns cols[] of the rows on one y axis. */
static void plot(FILE *f, const series *s, const char *title, int n_cols, const int *cols,
                 const char *const *names, int percent) {
    static const char *const colour[] = {"#1f77b4", "#d62728", "#2ca02c"};
    const double W = 560, H = 220, L = 60, R = 10, T = 24, B = 30;
    double xmax = s->v[9 * (s->n - 1)], ymax = 0;
    for (int i = 0; i < s->n; i++)
        for (int c = 0; c < n_cols; c++)
            if (s->v[9 * i + cols[c]] > ymax) ymax = s->v[9 * i + cols[c]];
    if (percent) ymax = ymax > 0 ? ymax : 1;
    else ymax = ymax >= 1 ? ymax : 1;
    if (xmax <= 0) xmax = 1;
    double ys = fl_axis_step(ymax, !percent), xs = fl_axis_step(xmax, 0);
    double ytop = ceil(ymax / ys) * ys;
    fprintf(f, "<svg viewBox=\"0 0 %.0f %.0f\" style=\"max-width:100%%;width:%.0fpx\">"
               "<text x=\"%.0f\" y=\"16\" font-size=\"13\">", W, H, W, L);
    esc(f, title);
    fputs("</text>", f);
    for (double y = 0; y <= ytop + 1e-9; y += ys) {
        double py = T + (H - T - B) * (1 - y / ytop);
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">",
                L, W - R, py, py, L - 4, py + 3);
        if (percent) fprintf(f, "%g%%", y);
        else fprintf(f, "%.0f", y);
        fputs("</text>", f);
    }
    for (double x = 0; x <= xmax + 1e-9; x += xs) {
        double px = L + (W - L - R) * x / xmax;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%gs</text>",
                px, H - B + 14, x);
    }
    for (int c = 0; c < n_cols; c++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour[c % 3]);
        for (int i = 0; i < s->n; i++)
            fprintf(f, "%.1f,%.1f ", L + (W - L - R) * s->v[9 * i] / xmax,
                    T + (H - T - B) * (1 - s->v[9 * i + cols[c]] / ytop));
        fprintf(f, "\"/><text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"%s\">", L + 10 + 150 * c,
                H - 4, colour[c % 3]);
        esc(f, names[c]);
        fputs("</text>", f);
    }
    fputs("</svg>\n", f);
}

/* ---- failures ----------------------------------------------------------------------------- */
typedef struct pair_dir {
    char name[64];
    int count; /* distinct findings (first files) */
} pair_dir;

static int by_count(const void *a, const void *b) {
    const pair_dir *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .json names of a folder, sorted (malloc'd list). */
static int list_json(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    char **v = NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t k = strlen(de->d_name);
        if (k < 6 || strcmp(de->d_name + k - 5, ".json") || strstr(de->d_name, ".tmp.")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(v, sizeof *v * (size_t)cap);
            if (!p) break;
            v = p;
        }
        if ((v[n] = strdup(de->d_name))) n++;
    }
    if (d) closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_name);
    *out = v;
    return n;
}

static const char *jstr(const cJSON *j, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}
static double jnum(const cJSON *j, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static void failures(FILE *f, const char *out_dir) {
    char top[4096], sub[4096 + 64], path[8192 + 256];
    snprintf(top, sizeof top, "%s/failures", out_dir);
    DIR *d = opendir(top);
    pair_dir *pd = NULL;
    int np = 0, cap = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof pd->name) continue;
        if (np == cap) {
            cap = cap ? cap * 2 : 64;
            pair_dir *p = realloc(pd, sizeof *pd * (size_t)cap);
            if (!p) break;
            pd = p;
        }
        size_t nl = strlen(de->d_name);
        memcpy(pd[np].name, de->d_name, nl + 1); /* nl < 64: checked above */
        snprintf(sub, sizeof sub, "%s/%s", top, pd[np].name);
        char **names;
        int nj = list_json(sub, &names);
        pd[np].count = 0;
        for (int i = 0; i < nj; i++) {
            pd[np].count += strstr(names[i], ",first.json") != NULL;
            free(names[i]);
        }
        free(names);
        np++;
    }
    if (d) closedir(d);
    if (!np) {
        fputs("<p>No failures found (yet).</p>\n", f);
        free(pd);
        return;
    }
    qsort(pd, (size_t)np, sizeof *pd, by_count);

    /* confusion matrix of distinct misclassifications: rows true, columns predicted */
    int K = 0;
    static int64_t conf[64][64];
    memset(conf, 0, sizeof conf);
    char *names_of[64] = {0};
    for (int p = 0; p < np; p++) {
        int t, q;
        char rest;
        if (sscanf(pd[p].name, "%d-%d%c", &t, &q, &rest) != 2 || t < 0 || q < 0 || t >= 64 || q >= 64)
            continue;
        conf[t][q] += pd[p].count;
        if (t + 1 > K) K = t + 1;
        if (q + 1 > K) K = q + 1;
        char **names;
        snprintf(sub, sizeof sub, "%s/%s", top, pd[p].name);
        int nj = list_json(sub, &names);
        if (nj) {
            snprintf(path, sizeof path, "%s/%s", sub, names[0]);
            cJSON *j = fz_json_read(path, NULL);
            if (j && !names_of[t]) names_of[t] = strdup(jstr(j, "label_name"));
            if (j && !names_of[q]) names_of[q] = strdup(jstr(j, "pred_name"));
            cJSON_Delete(j);
        }
        for (int i = 0; i < nj; i++) free(names[i]);
        free(names);
    }
    if (K) {
        fputs("<h2>Confusion matrix of the distinct failures</h2>\n<table class=\"cm\"><tr><th>true \\ predicted</th>", f);
        for (int q = 0; q < K; q++) {
            fprintf(f, "<th>%d ", q);
            esc(f, names_of[q]);
            fputs("</th>", f);
        }
        fputs("</tr>\n", f);
        for (int t = 0; t < K; t++) {
            fprintf(f, "<tr><th>%d ", t);
            esc(f, names_of[t]);
            fputs("</th>", f);
            for (int q = 0; q < K; q++)
                fprintf(f, conf[t][q] ? "<td class=\"hit\">%lld</td>" : "<td>%lld</td>",
                        (long long)conf[t][q]);
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    for (int k = 0; k < 64; k++) free(names_of[k]);

    fputs("<h2>Failures by class pair (seed next to mutant)</h2>\n", f);
    int shown = 0, left = 0;
    for (int p = 0; p < np; p++) {
        snprintf(sub, sizeof sub, "%s/%s", top, pd[p].name);
        char **names;
        int nj = list_json(sub, &names);
        fprintf(f, "<h3>");
        esc(f, pd[p].name);
        fprintf(f, " &mdash; %d distinct</h3>\n<div class=\"grid\">", pd[p].count);
        int here = 0;
        for (int i = 0; i < nj; i++) {
            snprintf(path, sizeof path, "%s/%s", sub, names[i]);
            cJSON *j = fz_json_read(path, NULL);
            if (!j) {
                fputs("<figure><figcaption>unreadable: ", f);
                esc(f, names[i]);
                fputs("</figcaption></figure>", f);
            } else if (here >= MAX_PER_PAIR || shown >= MAX_IMAGES) {
                left++;
            } else {
                size_t k = strlen(path);
                snprintf(path + k - 5, sizeof path - k + 5, ".pair.png");
                fputs("<figure>", f);
                if (inline_png(f, path)) here++, shown++;
                fprintf(f, "<figcaption>%s root %.0f: ", jstr(j, "kind"), jnum(j, "root"));
                esc(f, jstr(j, "label_name"));
                fputs(" &rarr; ", f);
                esc(f, jstr(j, "pred_name"));
                fprintf(f, " (%.2f, ", jnum(j, "confidence"));
                esc(f, jstr(j, "oracle"));
                fprintf(f, ")<br>L0 %.0f L2 %.3f Linf %.3f<br>", jnum(j, "l0"), jnum(j, "l2"),
                        jnum(j, "linf"));
                const cJSON *ops = cJSON_GetObjectItemCaseSensitive(j, "ops"), *op;
                cJSON_ArrayForEach(op, ops) if (cJSON_IsString(op)) {
                    esc(f, op->valuestring);
                    fputc(' ', f);
                }
                fputs("</figcaption></figure>", f);
            }
            cJSON_Delete(j);
            free(names[i]);
        }
        free(names);
        fputs("</div>\n", f);
    }
    if (left) fprintf(f, "<p>%d more examples are in the failures/ folder.</p>\n", left);
    free(pd);
}

fl_status fl_fuzz_report_write(const char *out_dir, fl_err *e) {
    DIR *d = opendir(out_dir);
    if (!d) return fl_fail(e, FL_ERR_NOTFOUND, "%s: no such campaign folder", out_dir);
    closedir(d);
    char *b = NULL, path[4096], line[4096];
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    if (!f) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>flare nn fuzz</title>"
          "<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
          "font-size:13px}.cm td{text-align:right}.hit{background:#fdd}.grid{display:flex;"
          "flex-wrap:wrap;gap:8px}figure{margin:0;font-size:11px;max-width:180px}"
          "figure img{image-rendering:pixelated;width:170px}</style></head><body>\n"
          "<h1>flare nn fuzz</h1>\n<table>\n", f);
    snprintf(path, sizeof path, "%s/fuzzer_stats", out_dir);
    FILE *s = fopen(path, "r");
    if (!s) fputs("<tr><td>fuzzer_stats is missing</td></tr>\n", f);
    while (s && fgets(line, sizeof line, s)) {
        char *v = strchr(line, ':');
        if (!v) continue;
        *v++ = 0;
        v[strcspn(v, "\n")] = 0;
        fputs("<tr><th>", f);
        esc(f, line);
        fputs("</th><td>", f);
        esc(f, v);
        fputs("</td></tr>\n", f);
    }
    if (s) fclose(s);
    fputs("</table>\n<h2>Over time</h2>\n", f);
    series ser = {0};
    read_plot(out_dir, &ser);
    if (!ser.n) {
        fputs("<p>plot_data holds no rows yet.</p>\n", f);
    } else {
        int has_total = ser.v[4] > 0;
        plot(f, &ser, has_total ? "coverage" : "items covered", 1, (int[]){has_total ? 5 : 3},
             (const char *[]){has_total ? "coverage %" : "covered"}, has_total);
        plot(f, &ser, "corpus", 1, (int[]){2}, (const char *[]){"queue entries"}, 0);
        plot(f, &ser, "failures", 2, (int[]){6, 7},
             (const char *[]){"distinct", "failing mutants"}, 0);
    }
    free(ser.v);
    failures(f, out_dir);
    fputs("</body></html>\n", f);
    fclose(f);
    fl_status st = fz_path(path, sizeof path, out_dir, "report.html", e);
    if (!st) st = fl_file_write_atomic(path, b, len, e);
    free(b);
    return st;
}
