/* What the reports read from an output folder (fuzzer_stats, plot_data, failures/, hangs/),
 * for both writers: Markdown (report.c) and HTML (report_html.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/campaign/report_int.h"

const char *rp_stat(const rp_data *d, const char *key) {
    const char *v = od_kv_get(&d->stats, key);
    return v ? v : "";
}

/* ---- reading the folder ------------------------------------------------------------------- */
static void read_plot(rp_data *d) {
    char path[4096];
    if (od_path(path, sizeof path, d->out_dir, "plot_data", NULL)) return;
    uint8_t *buf;
    size_t len;
    if (fl_file_read(path, &buf, &len, NULL)) return;
    int cap = 0;
    for (char *p = (char *)buf, *end = p + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* a row being written: skipped */
        *nl = 0;
        double row[PD_COLS];
        int k = 0;
        char *s = p;
        while (*s != '#' && k < PD_COLS) {
            char *q;
            row[k] = strtod(s, &q);
            if (q == s) break;
            k++;
            while (*q == ' ' || *q == ',') q++;
            s = q;
        }
        if (k == PD_COLS) {
            if (d->n_rows == cap) {
                cap = cap ? 2 * cap : 256;
                void *r = realloc(d->rows, (size_t)cap * sizeof *d->rows);
                if (!r) break;
                d->rows = r;
            }
            memcpy(d->rows[d->n_rows++], row, sizeof row);
        }
        p = nl + 1;
    }
    free(buf);
}

/* The turns as one line, cut at a code-point boundary. */
static void input_preview(const fl_case *c, char *out, size_t n) {
    size_t k = 0;
    for (int i = 0; i < c->n_turns && k + 1 < n; i++) {
        const char *s = i ? " / " : "";
        for (; *s && k + 1 < n; s++) out[k++] = *s;
        for (s = c->turns[i]; *s && k + 1 < n; s++) out[k++] = *s == '\n' ? ' ' : *s;
    }
    if (k + 1 >= n) { /* cut: back off to a code-point start and mark it */
        k = n > 4 ? n - 4 : 0;
        while (k > 0 && ((unsigned char)out[k] & 0xC0) == 0x80) k--;
        memcpy(out + k, "...", 3), k += 3;
    }
    out[k] = 0;
}

static int cmp_find(const void *a, const void *b) {
    const rp_finding *x = a, *y = b;
    if (x->s.found_exec != y->s.found_exec) return x->s.found_exec < y->s.found_exec ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

void rp_read_findings(rp_data *d) {
    static const char *const sub[] = {"failures", "hangs"};
    for (int s = 0; s < 2; s++) {
        char dir[4096], **paths;
        int n;
        if (od_path(dir, sizeof dir, d->out_dir, sub[s], NULL)) continue;
        if (saved_case_list(dir, &paths, &n, NULL)) continue;
        rp_finding *f = n ? realloc(d->find, (size_t)(d->n_find + n) * sizeof *f) : d->find;
        if (f) {
            d->find = f;
            for (int i = 0; i < n; i++) {
                rp_finding *r = &d->find[d->n_find];
                memset(r, 0, sizeof *r);
                if (saved_case_load(paths[i], &r->s, NULL)) continue;
                size_t skip = strlen(d->out_dir) + 1;
                snprintf(r->rel, sizeof r->rel, "%s", paths[i] + (strlen(paths[i]) > skip ? skip : 0));
                input_preview(r->s.c, r->input, sizeof r->input);
                d->n_find++;
            }
        }
        saved_case_list_free(paths, n);
    }
    if (d->n_find > 1) qsort(d->find, (size_t)d->n_find, sizeof *d->find, cmp_find);
}

void rp_free(rp_data *d) {
    od_kv_free(&d->stats);
    camp_edges_free(&d->edges);
    fl_spec_free(d->spec);
    free(d->rows);
    for (int i = 0; i < d->n_find; i++) saved_case_free(&d->find[i].s);
    free(d->find);
}

const char *const rp_summary[RP_SUMMARY_ROWS][2] = {
    {"target", "target"}, {"command line", "command_line"}, {"seed", "seed"},
    {"power schedule", "schedule"}, {"spec", "spec"}, {"run time (s)", "run_time"},
    {"executions", "execs_done"}, {"executions / s", "execs_per_sec"},
    {"corpus (entries)", "corpus_count"}, {"coverage features", "features"},
    {"inter-agent edges covered", "edges_found"}, {"allowed edges", "edges_allowed"},
    {"inter-agent coverage", "inter_agent_cov"}, {"intra-agent coverage", "intra_agent_cov"},
    {"distinct findings", "saved_findings"}, {"cases that timed out", "total_hangs"},
    {"cases that crashed", "total_crashes"}};


void rp_read(rp_data *d) {
    char path[4096];
    if (od_path(path, sizeof path, d->out_dir, "fuzzer_stats", NULL) == FL_OK)
        od_kv_read(path, &d->stats, NULL); /* a missing file gives an empty summary */
    read_plot(d);
    rp_read_findings(d);
    fl_err e = {0};
    if (od_path(path, sizeof path, d->out_dir, "edges.json", NULL) == FL_OK && access(path, F_OK) == 0 &&
        camp_edges_read(&d->edges, path, &e))
        memcpy(d->note, e.msg, sizeof d->note);
    const char *spec = rp_stat(d, "spec");
    if (*spec && strcmp(spec, "none") && fl_spec_load(spec, &d->spec, &e)) /* moved or deleted */
        memcpy(d->note, e.msg, sizeof d->note);
}
