/* Sets of criteria updated together (fl_coverset): one neuron-value view and one top-k
 * selection per batch, shared by every criterion of the set, which then run side by side on
 * the thread pool. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"

void fl_coverset_free(fl_coverset *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) fl_cover_free(s->c[i]);
    free(s->c);
    free(s->tmp);
    free(s->topk);
    free(s->topv);
    free(s->cost);
    fl_cover_view_free(&s->view);
    free(s);
}

fl_status fl_coverset_new(const fl_cover_ctx *ctx, const char *spec, fl_coverset **out,
                          fl_err *e) {
    *out = NULL;
    fl_coverset *s = calloc(1, sizeof *s);
    char *copy = strdup(spec);
    size_t max = 1;
    for (const char *p = spec; *p; p++) max += *p == ',';
    if (s) s->c = calloc(max, sizeof(fl_cover *)), s->cost = calloc(max, sizeof(double));
    if (!s || !copy || !s->c || !s->cost) {
        free(copy);
        fl_coverset_free(s);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    fl_status st = FL_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && st == FL_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (int i = 0; i < s->n && st == FL_OK; i++)
            if (strcmp(s->c[i]->spec, tok) == 0)
                st = fl_fail(e, FL_ERR_ARG, "criterion '%s' is listed twice in '%s'", tok, spec);
        if (st == FL_OK) st = fl_cover_new(ctx, tok, &s->c[s->n], e);
        if (st == FL_OK) {
            if (s->c[s->n]->topk_k > s->topk_k) s->topk_k = s->c[s->n]->topk_k;
            s->needs |= s->c[s->n++]->needs;
        }
    }
    if (st == FL_OK && s->n == 0)
        st = fl_fail(e, FL_ERR_ARG, "no coverage criterion in '%s'", spec);
    free(copy);
    if (st != FL_OK) {
        fl_coverset_free(s);
        return st;
    }
    *out = s;
    return FL_OK;
}

/* The criteria take very different times (KMNC divides and tests a bitmap per value, SNAC
 * compares), so a fixed split of the list over the threads left one waiting on the other.
 * Each thread instead takes the next criterion from a shared counter, the longest first by
 * the time each took on the previous batch. A criterion's result does not depend on which
 * thread runs it. Each writes its own flags row and status. */
typedef struct {
    fl_coverset *s;
    const fl_cover_batch *b;
    fl_status *st;
    fl_err *err;
    const int *order;
    _Atomic int next;
} update_job;

static void update_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)lo, (void)hi, (void)tid;
    update_job *j = ctx;
    for (int k; (k = atomic_fetch_add(&j->next, 1)) < j->s->n;) {
        int i = j->order[k];
        double t0 = fl_now();
        j->st[i] = fl_cover__update(j->s->c[i], j->b, j->s->tmp + i * j->b->n, NULL, &j->err[i]);
        j->s->cost[i] = fl_now() - t0;
    }
}

/* The shared top-k lists, inputs [lo, hi) on one thread (its own scratch row of topv). */
typedef struct {
    fl_coverset *s;
    const fl_cover_batch *b;
    int64_t len; /* list length per input */
} topk_job;

static void topk_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const topk_job *j = ctx;
    const fl_layerset *ls = j->s->c[0]->ctx.ls;
    fl_cover__topk_fill(ls, j->b->m, j->b->mean + lo * ls->total, (int)(hi - lo), j->s->topk_k,
                        j->s->topk + lo * j->len,
                        j->s->topv + (int64_t)tid * fl_cover__topk_scratch(j->s->topk_k));
}

/* Update every criterion (the batch has been checked): side by side on the thread pool. */
static fl_status update_all(fl_coverset *s, const fl_cover_batch *b, uint8_t *added, fl_err *e) {
    int64_t need = (int64_t)b->n * s->n;
    if (need > s->tmp_cap) {
        uint8_t *t = realloc(s->tmp, (size_t)need);
        if (!t) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        s->tmp = t, s->tmp_cap = need;
    }
    fl_status *st = calloc((size_t)s->n, sizeof *st);
    fl_err *err = calloc((size_t)s->n, sizeof *err);
    int *order = malloc(sizeof(int) * (size_t)s->n);
    if (!st || !err || !order) {
        free(st), free(err), free(order);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    /* TKNC and TKNP share one selection of the largest k, made on all threads */
    fl_cover_batch with_topk;
    if (s->topk_k > 0 && !b->topk && b->n > 0) {
        const fl_layerset *ls = s->c[0]->ctx.ls;
        int64_t per = fl_cover__topk_len(ls, s->topk_k), len = per * b->n;
        int64_t scratch = fl_cover__topk_scratch(s->topk_k) * fl_parallel_slots();
        if (len > s->topk_cap) {
            int32_t *t = realloc(s->topk, sizeof(int32_t) * (size_t)len);
            if (t) s->topk = t, s->topk_cap = len;
        }
        if (scratch > s->topv_cap) {
            float *t = realloc(s->topv, sizeof(float) * (size_t)scratch);
            if (t) s->topv = t, s->topv_cap = scratch;
        }
        if (len > s->topk_cap || scratch > s->topv_cap) {
            free(st), free(err), free(order);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        topk_job tj = {s, b, per};
        fl_parallel_for(b->n, topk_range, &tj);
        with_topk = *b;
        with_topk.topk = s->topk;
        with_topk.topk_k = s->topk_k;
        b = &with_topk;
    }
    for (int i = 0; i < s->n; i++) { /* longest first (insertion sort: a handful of items) */
        int k = i;
        for (; k > 0 && s->cost[order[k - 1]] < s->cost[i]; k--) order[k] = order[k - 1];
        order[k] = i;
    }
    update_job j = {s, b, st, err, order, 0};
    int T = fl_threads_get() < s->n ? fl_threads_get() : s->n;
    fl_parallel_for(T, update_range, &j);
    fl_status r = FL_OK;
    for (int i = 0; i < s->n && r == FL_OK; i++)
        if (st[i] != FL_OK) {
            r = st[i];
            if (e) *e = err[i];
        }
    if (r == FL_OK && added && b->n > 0) {
        memset(added, 0, (size_t)b->n);
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < b->n; k++) added[k] |= s->tmp[(int64_t)i * b->n + k];
    }
    free(st), free(err), free(order);
    return r;
}

fl_status fl_coverset_update(fl_coverset *s, const fl_cover_batch *b, uint8_t *added,
                             fl_err *e) {
    fl_status st = fl_cover__check_batch(s->c[0]->ctx.ls, b, s->needs, "coverage", e);
    return st != FL_OK ? st : update_all(s, b, added, e);
}

fl_status fl_coverset_update_model(fl_coverset *s, const fl_model *m, uint8_t *added,
                                   fl_err *e) {
    fl_status st = fl_cover_view_fill(&s->view, s->c[0]->ctx.ls, m, s->needs, e);
    return st != FL_OK ? st : update_all(s, &s->view.b, added, e);
}

typedef struct {
    fl_coverset *s;
    fl_progress_fn progress;
    void *user;
    int64_t total;
} run_ctx;

static fl_status run_batch(void *user, fl_model *m, const float *neurons, const float *logits,
                           int n_logits, int64_t start, int n, fl_err *e) {
    (void)neurons, (void)logits, (void)n_logits;
    run_ctx *r = user;
    fl_status st = fl_coverset_update_model(r->s, m, NULL, e);
    if (st == FL_OK && r->progress) r->progress(r->user, start + n, r->total);
    return st;
}

fl_status fl_coverset_run(fl_coverset *s, fl_model *m, const fl_dataset *d, int batch,
                          fl_progress_fn progress, void *user, fl_err *e) {
    if (d->n <= 0) return FL_OK;
    run_ctx r = {s, progress, user, d->n};
    return fl_layerset_stream(m, NULL, d, batch, run_batch, &r, e);
}
