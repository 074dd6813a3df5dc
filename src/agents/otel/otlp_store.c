/* The span store (spans waiting for their case, by trace id) and --otlp-file polling.
 *
 * The store is small by design: traces in flight are the cases being run (a few, -j N) plus
 * whatever background traces the system emits, which fl_otlp_store_expire drops. So a trace
 * is found by a linear scan; a span is a few hundred bytes and max_spans bounds the memory
 * a flood of spans can take. Taken trace ids are remembered in a ring so a straggler is
 * counted as late rather than waiting forever as unmatched.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flare/agents/otlp.h"

enum { TAKEN_RING = 4096 };

typedef struct trace_bin {
    char id[33];
    fl_otlp_span *spans;
    int n, cap;
    double last; /* fl_now() of the latest span */
} trace_bin;

struct fl_otlp_store {
    pthread_mutex_t mu;
    trace_bin *bins;
    int n_bins, cap_bins;
    char (*taken)[33];
    int n_taken, taken_pos;
    long max_spans;
    fl_otlp_stats st;
};

fl_otlp_store *fl_otlp_store_new(void) {
    fl_otlp_store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->taken = calloc(TAKEN_RING, sizeof *s->taken);
    if (!s->taken) return free(s), NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max_spans = 1000000;
    return s;
}

void fl_otlp_store_free(fl_otlp_store *s) {
    if (!s) return;
    for (int i = 0; i < s->n_bins; i++) fl_otlp_spans_free(s->bins[i].spans, s->bins[i].n);
    free(s->bins);
    free(s->taken);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void fl_otlp_store_set_max(fl_otlp_store *s, long max_spans) {
    pthread_mutex_lock(&s->mu);
    s->max_spans = max_spans;
    pthread_mutex_unlock(&s->mu);
}

static int was_taken(const fl_otlp_store *s, const char *id) {
    for (int i = 0; i < s->n_taken; i++)
        if (!memcmp(s->taken[i], id, 32)) return 1;
    return 0;
}

static trace_bin *bin_find(fl_otlp_store *s, const char *id, int create) {
    for (int i = 0; i < s->n_bins; i++)
        if (!memcmp(s->bins[i].id, id, 32)) return &s->bins[i];
    if (!create) return NULL;
    if (s->n_bins == s->cap_bins) {
        int cap = s->cap_bins ? 2 * s->cap_bins : 16;
        trace_bin *nb = realloc(s->bins, (size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        s->bins = nb;
        s->cap_bins = cap;
    }
    trace_bin *b = &s->bins[s->n_bins++];
    memset(b, 0, sizeof *b);
    memcpy(b->id, id, 33);
    return b;
}

static void bin_remove(fl_otlp_store *s, trace_bin *b) {
    *b = s->bins[--s->n_bins];
}

void fl_otlp_store_add(fl_otlp_store *s, fl_otlp_span *spans, int n) {
    double now = fl_now();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < n; i++) {
        fl_otlp_span *sp = &spans[i];
        s->st.spans_in++;
        trace_bin *b = NULL;
        if (was_taken(s, sp->trace_id)) {
            s->st.late++;
        } else if (s->st.pending < s->max_spans && (b = bin_find(s, sp->trace_id, 1))) {
            if (b->n == b->cap) {
                int cap = b->cap ? 2 * b->cap : 8;
                fl_otlp_span *nv = realloc(b->spans, (size_t)cap * sizeof *nv);
                if (nv) b->spans = nv, b->cap = cap;
            }
        }
        if (b && b->n < b->cap) {
            b->spans[b->n++] = *sp; /* moved: the bin owns its strings now */
            b->last = now;
            s->st.pending++;
            continue;
        }
        if (b && !b->n) bin_remove(s, b);
        if (!was_taken(s, sp->trace_id)) s->st.dropped++;
        fl_otlp_span_clear(sp);
    }
    s->st.traces = s->n_bins;
    pthread_mutex_unlock(&s->mu);
    free(spans);
}

fl_status fl_otlp_store_add_json(fl_otlp_store *s, const char *json, size_t len,
                                 const char *source, fl_err *e) {
    fl_otlp_span *sp;
    int n;
    fl_status st = fl_otlp_parse(json, len, source, &sp, &n, e);
    if (st) {
        pthread_mutex_lock(&s->mu);
        s->st.bad++;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    fl_otlp_store_add(s, sp, n);
    return FL_OK;
}

fl_status fl_otlp_store_take(fl_otlp_store *s, const char *trace_id, fl_otlp_span **spans,
                             int *n) {
    char id[33];
    *spans = NULL;
    *n = 0;
    if (!fl_otlp_hex_id(trace_id, 32)) return FL_OK;
    for (int i = 0; i < 33; i++) id[i] = (char)(trace_id[i] >= 'A' && trace_id[i] <= 'F' ? trace_id[i] + 32 : trace_id[i]);
    pthread_mutex_lock(&s->mu);
    if (!was_taken(s, id)) {
        memcpy(s->taken[s->taken_pos], id, 33);
        s->taken_pos = (s->taken_pos + 1) % TAKEN_RING;
        if (s->n_taken < TAKEN_RING) s->n_taken++;
    }
    trace_bin *b = bin_find(s, id, 0);
    if (b) {
        *spans = b->spans;
        *n = b->n;
        s->st.pending -= b->n;
        bin_remove(s, b);
    }
    s->st.traces = s->n_bins;
    pthread_mutex_unlock(&s->mu);
    return FL_OK;
}

int fl_otlp_store_count(fl_otlp_store *s, const char *trace_id) {
    char id[33];
    if (!fl_otlp_hex_id(trace_id, 32)) return 0;
    for (int i = 0; i < 33; i++) id[i] = (char)(trace_id[i] >= 'A' && trace_id[i] <= 'F' ? trace_id[i] + 32 : trace_id[i]);
    pthread_mutex_lock(&s->mu);
    trace_bin *b = bin_find(s, id, 0);
    int n = b ? b->n : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void fl_otlp_store_expire(fl_otlp_store *s, double max_age_s) {
    double now = fl_now();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_bins;) {
        trace_bin *b = &s->bins[i];
        if (now - b->last > max_age_s) {
            s->st.unmatched += b->n;
            s->st.pending -= b->n;
            fl_otlp_spans_free(b->spans, b->n);
            bin_remove(s, b); /* the last bin moved into i: look at it next */
        } else {
            i++;
        }
    }
    s->st.traces = s->n_bins;
    pthread_mutex_unlock(&s->mu);
}

void fl_otlp_store_stats(fl_otlp_store *s, fl_otlp_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}

/* ---- --otlp-file ------------------------------------------------------------------------------ */
struct fl_otlp_file {
    char *path;
    long long offset; /* bytes consumed: up to the end of the last complete line */
    long lines;
};

fl_status fl_otlp_file_open(const char *path, fl_otlp_file **out, fl_err *e) {
    *out = NULL;
    fl_otlp_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return fl_fail(e, FL_ERR_NOMEM, "--otlp-file %s: out of memory", path);
    }
    *out = f;
    return FL_OK;
}

void fl_otlp_file_free(fl_otlp_file *f) {
    if (!f) return;
    free(f->path);
    free(f);
}

long fl_otlp_file_lines(const fl_otlp_file *f) { return f->lines; }

fl_status fl_otlp_file_poll(fl_otlp_file *f, fl_otlp_store *s, fl_err *e) {
    FILE *fp = fopen(f->path, "rb");
    if (!fp) return FL_OK; /* not there yet: the exporter creates it on its first flush */
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        fclose(fp);
        return fl_fail(e, FL_ERR_IO, "--otlp-file %s: cannot stat", f->path);
    }
    if ((long long)sb.st_size < f->offset) f->offset = 0, f->lines = 0; /* rotated/truncated */
    long long avail = (long long)sb.st_size - f->offset;
    if (avail <= 0) return fclose(fp), FL_OK;
    char *buf = malloc((size_t)avail);
    if (!buf) return fclose(fp), fl_fail(e, FL_ERR_NOMEM, "--otlp-file %s: out of memory", f->path);
    size_t got = 0;
    if (fseeko(fp, (off_t)f->offset, SEEK_SET) == 0) got = fread(buf, 1, (size_t)avail, fp);
    fclose(fp);
    fl_status first = FL_OK;
    size_t pos = 0;
    for (;;) {
        char *nl = memchr(buf + pos, '\n', got - pos);
        if (!nl) break; /* a partial line waits for the rest */
        size_t len = (size_t)(nl - (buf + pos));
        f->lines++;
        size_t lead = 0;
        while (lead < len && (buf[pos + lead] == ' ' || buf[pos + lead] == '\t' || buf[pos + lead] == '\r'))
            lead++;
        if (lead < len) {
            char src[600];
            fl_err e1;
            snprintf(src, sizeof src, "%s:%ld", f->path, f->lines);
            fl_status st = fl_otlp_store_add_json(s, buf + pos, len, src, &e1);
            if (st && !first) {
                first = st;
                if (e) *e = e1;
            }
        }
        pos += len + 1;
    }
    f->offset += (long long)pos;
    free(buf);
    return first;
}
