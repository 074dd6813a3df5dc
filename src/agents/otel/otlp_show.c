/* flare agents spans: how captured spans map to flare's events, for when coverage looks wrong
 * (afl-showmap's role). For each trace: its span tree with each span's role and the convention
 * that matched it, then the events the mapping derives, marked against a spec when one is
 * given. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flare/agents/otlp.h"
#include "flare/agents/spec.h"

typedef struct spanbuf {
    fl_otlp_span *v;
    int n, cap;
} spanbuf;

static fl_status push(spanbuf *b, fl_otlp_span *sp, int n, fl_err *e) {
    if (!n) return free(sp), FL_OK;
    if (b->n + n > b->cap) {
        int cap = b->cap ? b->cap : 64;
        while (cap < b->n + n) cap *= 2;
        fl_otlp_span *nv = realloc(b->v, (size_t)cap * sizeof *nv);
        if (!nv) return fl_fail(e, FL_ERR_NOMEM, "spans: out of memory");
        b->v = nv, b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, sp, (size_t)n * sizeof *sp);
    b->n += n;
    free(sp);
    return FL_OK;
}

/* One file: a single OTLP/JSON request (.json), or one request per line (anything else, as
 * the Collector's file exporter and `--otlp-file` write them). Blank lines are skipped. */
static fl_status read_spans(const char *path, spanbuf *b, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st) return st;
    size_t pl = strlen(path);
    int whole = pl > 5 && !strcmp(path + pl - 5, ".json");
    char src[1100];
    long line = 0;
    for (size_t p = 0; p < len && !st;) {
        size_t q = p;
        if (whole) q = len;
        else while (q < len && buf[q] != '\n') q++;
        line++;
        size_t a = p;
        while (a < q && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\r')) a++;
        if (a < q) {
            if (whole) snprintf(src, sizeof src, "%s", path);
            else snprintf(src, sizeof src, "%s:%ld", path, line);
            fl_otlp_span *sp;
            int n;
            st = fl_otlp_parse((const char *)buf + p, q - p, src, &sp, &n, e);
            if (!st) st = push(b, sp, n, e);
        }
        p = q + 1;
    }
    free(buf);
    return st;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* path: a file, or a folder whose *.json / *.jsonl files are read in name order. */
static fl_status collect(const char *path, spanbuf *b, int *n_files, fl_err *e) {
    struct stat sb;
    if (stat(path, &sb)) return fl_fail(e, FL_ERR_IO, "%s: no such file or folder", path);
    if (!S_ISDIR(sb.st_mode)) return ++*n_files, read_spans(path, b, e);
    DIR *d = opendir(path);
    if (!d) return fl_fail(e, FL_ERR_IO, "%s: cannot open the folder", path);
    char **names = NULL;
    int n = 0, cap = 0;
    fl_status st = FL_OK;
    struct dirent *de;
    while ((de = readdir(d)) && !st) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || !((l > 5 && !strcmp(de->d_name + l - 5, ".json")) ||
                                      (l > 6 && !strcmp(de->d_name + l - 6, ".jsonl"))))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) { st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path); break; }
            names = nn;
        }
        char full[4096];
        if ((st = fl_path_join(full, sizeof full, path, de->d_name, e))) break;
        if (!(names[n] = strdup(full))) st = fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
        else n++;
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, name_cmp);
    for (int i = 0; i < n; i++) {
        if (!st) ++*n_files, st = read_spans(names[i], b, e);
        free(names[i]);
    }
    free(names);
    return st;
}

static int trace_cmp(const void *a, const void *b) {
    const fl_otlp_span *x = a, *y = b;
    int c = strcmp(x->trace_id, y->trace_id);
    if (c) return c;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int depth_of(const fl_otlp_span *sp, int n, int i) {
    int d = 0;
    for (const char *p = sp[i].parent_id; p[0] && d < 32; d++) {
        int k = 0;
        while (k < n && strcmp(sp[k].span_id, p)) k++;
        if (k == n) break;
        p = sp[k].parent_id;
    }
    return d;
}

static const char *clip(const char *s, char *buf, size_t n) {
    if (!s) return "";
    size_t l = strlen(s);
    if (l < n) return s;
    snprintf(buf, n, "%.*s...", (int)(n - 4), s);
    return buf;
}

static const char *mark(const fl_spec *sp, const fl_event *ev) {
    if (!sp) return "";
    /* "user" (FL_SPEC_USER) is no undeclared agent: only FL_SPEC_NONE is */
    int a = ev->agent ? fl_spec_agent_find(sp, ev->agent) : FL_SPEC_NONE;
    switch (ev->kind) {
    case FL_EV_MESSAGE: {
        int t = fl_spec_agent_find(sp, ev->to);
        if (a == FL_SPEC_NONE && t == FL_SPEC_NONE) return "   <- both agents undeclared";
        if (a == FL_SPEC_NONE) return "   <- undeclared agent (from)";
        if (t == FL_SPEC_NONE) return "   <- undeclared agent (to)";
        return fl_spec_edge_find(sp, a, t) < 0 ? "   <- undeclared edge" : "";
    }
    case FL_EV_TOOL_CALL:
        if (a == FL_SPEC_NONE) return "   <- undeclared agent";
        return fl_spec_tool_find(sp, a, ev->tool) < 0 ? "   <- undeclared tool" : "";
    case FL_EV_BRANCH: {
        int ch, p = a >= 0 ? fl_spec_point_find(sp, a, ev->point, ev->choice, &ch) : -1;
        if (a == FL_SPEC_NONE) return "   <- undeclared agent";
        if (p < 0) return strcmp(ev->point, FL_POINT_LLM_TOOL_CHOICE) ? "   <- undeclared point" : "";
        return ch < 0 ? "   <- undeclared choice" : "";
    }
    default: return "";
    }
}

static void show_events(FILE *out, const fl_trace *t, const fl_spec *spec) {
    char c1[100], c2[100];
    static const char *const kinds[] = {"message", "tool_call", "tool_result", "branch", "error", "output", "done"};
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        fprintf(out, "  %9.3f ms  %-11s ", ev->t_ms, kinds[ev->kind]);
        switch (ev->kind) {
        case FL_EV_MESSAGE: fprintf(out, "%s -> %s \"%s\"", ev->agent, ev->to, clip(ev->content, c1, 60)); break;
        case FL_EV_TOOL_CALL: fprintf(out, "%s: %s %s", ev->agent, ev->tool, clip(ev->arguments, c1, 60)); break;
        case FL_EV_TOOL_RESULT:
            fprintf(out, "%s: %s %s \"%s\"", ev->agent, ev->tool, ev->ok ? "ok" : "FAILED", clip(ev->content, c1, 60));
            break;
        case FL_EV_BRANCH: fprintf(out, "%s: %s = %s", ev->agent, ev->point, ev->choice); break;
        case FL_EV_ERROR: fprintf(out, "%s: \"%s\"", ev->agent, clip(ev->content, c1, 60)); break;
        default: fprintf(out, "\"%s\"", clip(ev->content, c2, 80)); break;
        }
        fprintf(out, "%s\n", mark(spec, ev));
    }
    if (t->tokens_in || t->tokens_out)
        fprintf(out, "  tokens: %lld in, %lld out\n", (long long)t->tokens_in, (long long)t->tokens_out);
}

static fl_status show_trace(FILE *out, const fl_otlp_span *sp, int n, const fl_spec *spec, fl_err *e) {
    fprintf(out, "trace %s: %d span%s\n", sp[0].trace_id, n, n == 1 ? "" : "s");
    fl_otlp_role *roles = calloc((size_t)n, sizeof *roles);
    if (!roles) return fl_fail(e, FL_ERR_NOMEM, "spans: out of memory");
    fl_status st = fl_otlp_roles(sp, n, roles, e);
    for (int i = 0; !st && i < n; i++) {
        const char *conv = NULL;
        fl_otlp_classify_conv(&sp[i], &conv);
        fl_otlp_role r = roles[i];
        const char *a = fl_otlp_agent_name(&sp[i]), *t = r == FL_OTLP_TOOL ? fl_otlp_tool_name(&sp[i]) : NULL;
        int d = depth_of(sp, n, i);
        fprintf(out, "  %*s%-*s %-12s %-13s%s%s%s%s\n", 2 * d, "", 40 - 2 * (d < 15 ? d : 15), sp[i].name,
                fl_otlp_role_name(r), conv ? conv : r ? "derived" : "-", a ? " agent=" : "", a ? a : "", t ? " tool=" : "",
                t ? t : "");
    }
    free(roles);
    if (st) return st;
    fl_trace *tr = fl_trace_new();
    if (!tr) return fl_fail(e, FL_ERR_NOMEM, "spans: out of memory");
    st = fl_otlp_map(sp, n, tr, e);
    if (!st) {
        fprintf(out, " events:\n");
        show_events(out, tr, spec);
    }
    fl_trace_free(tr);
    return st;
}

fl_status fl_otlp_show(const char *path, const char *spec_path, FILE *out, fl_err *e) {
    spanbuf b = {0};
    fl_spec *spec = NULL;
    int n_files = 0;
    fl_status st = spec_path ? fl_spec_load(spec_path, &spec, e) : FL_OK;
    if (!st) st = collect(path, &b, &n_files, e);
    if (!st && !n_files) st = fl_fail(e, FL_ERR_ARG, "%s: no *.json or *.jsonl files in the folder", path);
    if (!st && !b.n) st = fl_fail(e, FL_ERR_FORMAT, "%s: no spans", path);
    if (!st) qsort(b.v, (size_t)b.n, sizeof *b.v, trace_cmp);
    for (int i = 0; !st && i < b.n;) {
        int j = i;
        while (j < b.n && !strcmp(b.v[j].trace_id, b.v[i].trace_id)) j++;
        st = show_trace(out, b.v + i, j - i, spec, e);
        i = j;
    }
    fl_otlp_spans_free(b.v, b.n);
    fl_spec_free(spec);
    return st;
}
