/* fl_fuzz_run: checks, the seeds' dry run, then rounds (round.c) until a limit.
 *
 * Order matters for the promise "a failed check leaves nothing behind": every check that can
 * fail on the user's input (shapes of seeds and model2, criterion and profile, the output
 * folder's state, a seed set the model gets entirely wrong) runs before out_dir is created.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/gan.h"
#include "fuzz/fuzz_int.h"
#include "fuzz/grad.h"
#include "fuzz/round.h"

/* The seeds' pixels: 8-bit storage as is, floats mapped back through their scale. */
static fl_status seed_pixels(const fl_dataset *d, int64_t i, uint8_t *px, int64_t n, fl_err *e) {
    if (d->x8) {
        memcpy(px, d->x8 + i * n, (size_t)n);
        return FL_OK;
    }
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    memcpy(f, d->x + i * n, sizeof(float) * (size_t)n);
    fl_scale_unapply(&d->scale, f, 1, d->c, (int64_t)d->h * d->w);
    for (int64_t k = 0; k < n; k++) {
        float v = roundf(f[k] * 255.0f);
        px[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    free(f);
    return FL_OK;
}

/* Run one input through m to check shapes; the number of logits in *k. */
static fl_status probe(fl_model *m, const fl_dataset *d, const char *what, int64_t *k, int64_t *
                       out_shape, int *out_ndim, fl_err *e) {
    fl_tensor x = {0};
    int64_t idx = 0;
    fl_status st = fl_dataset_gather(d, &idx, 1, &x, NULL, e);
    if (!st && (st = fl_model_forward(m, &x, e))) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        fl_fail(e, st, "%s does not take the seeds' images [%d,%d,%d]: %s", what, d->c, d->h,
                d->w, msg);
    }
    fl_tensor_free(&x);
    if (st) return st;
    const fl_tensor *y = fl_model_output(m, 0);
    if (y->ndim != 2 || y->shape[1] < 2)
        return fl_fail(e, FL_ERR_SHAPE, "%s: its first output is not a [N, classes] logits tensor",
                       what);
    *k = y->shape[1];
    *out_ndim = y->ndim;
    memcpy(out_shape, y->shape, sizeof(int64_t) * (size_t)y->ndim);
    return FL_OK;
}

static fl_status check_models(fz_campaign *cp, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    int64_t k, k2, s1[FL_MAX_DIMS], s2[FL_MAX_DIMS];
    int nd1, nd2;
    fl_status st = probe(o->model, o->seeds, o->model_path ? o->model_path : "the model", &k, s1,
                         &nd1, e);
    if (st) return st;
    cp->image_bytes = fl_model_act_bytes(o->model); /* probe ran one image */
    if (o->seeds->has_labels && o->seeds->n_classes > k)
        return fl_fail(e, FL_ERR_SHAPE, "the seeds have %d classes, the model %lld outputs",
                       o->seeds->n_classes, (long long)k);
    cp->n_classes = (int)k;
    if (o->strategy == FL_FUZZ_DEEPXPLORE && !o->model2)
        return fl_fail(e, FL_ERR_ARG,
                       "--strategy deepxplore needs --model2 (and optionally --model3): it looks "
                       "for inputs on which the models disagree");
    if (o->model3 && o->strategy != FL_FUZZ_DEEPXPLORE)
        return fl_fail(e, FL_ERR_ARG, "--model3 is for --strategy deepxplore");
    fl_model *others[2] = {o->model2, o->model3};
    const char *names[2] = {o->model2_path ? o->model2_path : "--model2",
                            o->model3_path ? o->model3_path : "--model3"};
    for (int i = 0; i < 2; i++) {
        if (!others[i]) continue;
        if ((st = probe(others[i], o->seeds, names[i], &k2, s2, &nd2, e))) return st;
        if (k2 != k)
            return fl_fail(e, FL_ERR_SHAPE, "%s has %lld outputs, the model under test %lld",
                           names[i], (long long)k2, (long long)k);
    }
    return FL_OK;
}

static fl_status build_cover(fz_campaign *cp, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    char *from_profile = NULL;
    const char *layers = o->gen ? o->gen->layers : o->layers ? o->layers : "all";
    if (o->gen && o->layers && strcmp(o->layers, o->gen->layers))
        return fl_fail(e, FL_ERR_ARG, "--layers %s: the generator was trained on layer set '%s'",
                       o->layers, o->gen->layers);
    if (!o->layers && o->profile && !(layers = from_profile = fl_profile_layers(o->profile)))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_status st = fl_layerset_make(o->model, layers, &cp->ls, e);
    if (!st && o->profile && (st = fl_profile_match(o->profile, cp->ls, e))) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        fl_fail(e, st, "the profile does not fit the model: %s", msg);
    }
    free(from_profile);
    if (st) return st;
    fl_cover_ctx ctx = {.m = o->model, .ls = cp->ls, .profile = o->profile, .train = o->train,
                        .aux = o->important};
    if ((st = fl_coverset_new(&ctx, o->criterion, &cp->cov, e))) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        fl_fail(e, st, "--criterion %s: %s", o->criterion, msg);
    }
    return st;
}

int fz_fit_batch(int want, int64_t per_image) {
    int64_t fit = per_image > 0 ? FZ_BATCH_BYTES / per_image : want;
    return fit < 1 ? 1 : fit < want ? (int)fit : want;
}

static fl_status setup(fz_campaign *cp, const fl_fuzz_opts *o, fl_err *e) {
    memset(cp, 0, sizeof *cp);
    cp->o = o;
    const int gan = o->strategy == FL_FUZZ_FUZZGAN;
    if (!o->model || (!o->seeds && !gan) || !o->out_dir || !o->criterion)
        return fl_fail(e, FL_ERR_ARG, "a campaign needs a model, seeds, a criterion and -o");
    if (gan && !o->gen) return fl_fail(e, FL_ERR_ARG, "--strategy fuzzgan needs a generator");
    if (!gan && o->seeds->n < 1) return fl_fail(e, FL_ERR_ARG, "the seed set is empty");
    if (o->max_time <= 0 && o->max_execs <= 0 && o->max_suite <= 0 && o->target_cov <= 0 &&
        !o->stop)
        return fl_fail(e, FL_ERR_ARG, "a campaign needs a limit: -V seconds or -E executions");
    const fl_dataset *d = o->seeds;
    cp->c = gan ? o->gen->c : d->c, cp->h = gan ? o->gen->h : d->h, cp->w = gan ? o->gen->w : d->w;
    cp->n = (int64_t)cp->c * cp->h * cp->w;
    cp->scale = gan ? o->gen->scale : d->scale;
    for (int ch = 0; ch < 3; ch++) fl_scale_lut(&cp->scale, ch < cp->c ? ch : 0, cp->lut[ch]);
    const int nlc = o->preset == FL_PRESET_NLC;
    cp->alpha = o->alpha >= 0 ? o->alpha : nlc ? 0.4 : 0.02;
    cp->beta = o->beta >= 0 ? o->beta : nlc ? 0.8 : 0.2;
    cp->try_num = o->try_num > 0 ? o->try_num : 50;
    cp->nonzero = nlc;
    cp->session = 1;
    cp->model_hash = fz_weights_hash(o->model);
    cp->gen_hash = gan ? fz_weights_hash(o->gen->g) : 0;
    fl_status st;
    if (gan) {
        cp->n_classes = o->gen->n_classes;
        if ((st = build_cover(cp, e)) || (st = fz_gan_check(cp, e))) return st;
    } else if ((st = check_models(cp, e)) || (st = build_cover(cp, e))) {
        return st;
    }
    /* K mutants run as one batch (and the gradient strategies keep its gradients too): at
     * 3x224x224 a ResNet-18 image holds ~30 MB of activations, so 64 of them would take
     * 2-4 GB; the default takes fewer where 64 would pass FZ_BATCH_BYTES */
    int64_t per = cp->image_bytes * (fl_fuzz_is_gradient(o->strategy) ? 2 : 1);
    cp->k = o->k > 0 ? o->k : fz_fit_batch(64, per);
    if ((st = fz_out_check(o->out_dir, o->resume, e))) return st;
    if ((st = fl_xform_menu_make(o->preset, &cp->menu, e))) return st;
    fl_fuzz_select sel = o->select;
    if (sel == FL_QSEL_DEFAULT)
        sel = o->strategy == FL_FUZZ_TENSORFUZZ    ? FL_QSEL_TENSORFUZZ
              : o->strategy == FL_FUZZ_RANDOM      ? FL_QSEL_UNIFORM
              : fl_fuzz_is_gradient(o->strategy) ? FL_QSEL_FIFO
                                                   : FL_QSEL_PROB;
    if ((st = fz_queue_init(&cp->q, sel, o->gamma, o->p_min, e))) return st;
    if (o->strategy == FL_FUZZ_TENSORFUZZ) {
        cp->nv_layer = o->tf_layer ? fl_model_find(o->model, o->tf_layer)
                                   : o->model->outputs[0];
        if (cp->nv_layer < 0)
            return fl_fail(e, FL_ERR_NOTFOUND, "--tf-layer %s: no such tensor in the model",
                           o->tf_layer);
    }
    if (gan) {
        cp->class_names = o->gen->class_names;
    } else if (d->class_names && d->n_classes >= cp->n_classes) {
        cp->class_names = d->class_names;
    } else {
        static char names[1000][12];
        if (cp->n_classes > 1000)
            return fl_fail(e, FL_ERR_UNSUPPORTED, "%d classes: at most 1000", cp->n_classes);
        static char *ptrs[1000];
        for (int k = 0; k < cp->n_classes; k++) {
            snprintf(names[k], sizeof names[k], "%d", k);
            ptrs[k] = names[k];
        }
        cp->class_names = ptrs;
    }
    return FL_OK;
}

/* Dry run: predict every seed; the correctly classified ones (all, for unlabelled seeds,
 * whose label becomes the prediction) enter the queue. */
static fl_status load_seeds(fz_campaign *cp, fl_fuzz_result *r, fl_err *e) {
    const fl_dataset *d = cp->o->seeds;
    int batch = cp->o->batch > 0 ? cp->o->batch : fz_fit_batch(256, cp->image_bytes);
    fl_tensor x = {0};
    fl_status st = FL_OK;
    for (int64_t s = 0; !st && s < d->n; s += batch) {
        int64_t nb = d->n - s < batch ? d->n - s : batch;
        fl_tensor_free(&x);
        if ((st = fl_dataset_batch(d, s, nb, &x, e)) || (st = fl_model_forward(cp->o->model, &x, e)))
            break;
        const fl_tensor *y = fl_model_output(cp->o->model, 0);
        for (int64_t i = 0; !st && i < nb; i++) {
            int32_t pred = fz_argmax(y->data + i * y->shape[1], (int)y->shape[1], NULL);
            int32_t label = d->has_labels && d->y[s + i] >= 0 ? d->y[s + i] : pred;
            if (pred != label) {
                r->seeds_dropped++;
                continue;
            }
            fz_entry ent = {.src = -1, .root = cp->q.n, .seed_index = s + i, .label = label};
            ent.px = malloc((size_t)cp->n);
            ent.ops = strdup("");
            if (!ent.px || !ent.ops) {
                free(ent.px);
                free(ent.ops);
                st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
            } else if ((st = seed_pixels(d, s + i, ent.px, cp->n, e)) ||
                       (ent.i0 = ent.px, st = fz_queue_add(&cp->q, &ent, e))) {
                free(ent.px);
                free(ent.ops);
            }
            fz_queue_seal(&cp->q); /* every seed is a batch of its own */
        }
    }
    fl_tensor_free(&x);
    if (st) return st;
    cp->q.n_seeds = cp->q.n;
    if (!cp->q.n)
        return fl_fail(e, FL_ERR_ARG,
                       "the model misclassifies all %lld seeds: nothing to fuzz (DeepHunter "
                       "mutates correctly classified seeds)",
                       (long long)d->n);
    return FL_OK;
}

static void status_now(fz_campaign *cp) {
    fl_fuzz_status *s = &cp->st;
    double now = fl_now();
    s->elapsed = now - cp->t0;
    s->execs = cp->execs;
    s->execs_per_s = s->elapsed > 0 ? (double)(cp->execs - cp->execs_before) / s->elapsed : 0;
    s->corpus = cp->q.n;
    fl_cover_stats(cp->cov->c[0], &s->covered, &s->total);
    s->failures = cp->fs.n;
    s->failures_total = cp->fs.total;
    s->last_new_s = (int64_t)(now - cp->last_new);
}

static fl_status report_now(fz_campaign *cp, int final, fl_err *e) {
    status_now(cp);
    if (cp->o->on_status) cp->o->on_status(&cp->st, cp->o->user);
    fl_status st = fz_findings_flush(cp, e); /* the files first: the stats count them */
    if (!st) st = fz_out_stats(cp, final, e);
    if (!st) st = fz_out_plot_row(cp, e);
    cp->last_stats = fl_now();
    return st;
}

static fl_status write_summary(fz_campaign *cp, const fl_fuzz_result *r, fl_err *e) {
    const fl_fuzz_status *s = &cp->st;
    char buf[2048], path[4096];
    int k = snprintf(buf, sizeof buf,
                     "{\n  \"strategy\": \"%s\",\n  \"criterion\": \"%s\",\n  \"seed\": %llu,\n"
                     "  \"sessions\": %d,\n  \"run_time\": %.1f,\n  \"execs\": %lld,\n"
                     "  \"execs_per_sec\": %.1f,\n  \"seeds\": %lld,\n  \"seeds_dropped\": %lld,\n"
                     "  \"corpus\": %lld,\n  \"covered\": %lld,\n  \"total\": %lld,\n"
                     "  \"coverage\": %.6f,\n  \"failures\": %lld,\n  \"failures_total\": %lld,\n"
                     "  \"misclassification\": %lld,\n  \"disagreement\": %lld,\n"
                     "  \"nonfinite\": %lld\n}\n",
                     fl_fuzz_strategy_name(cp->o->strategy), cp->o->criterion,
                     (unsigned long long)cp->o->seed, cp->session, cp->time_before + s->elapsed,
                     (long long)s->execs, s->execs_per_s, (long long)cp->q.n_seeds,
                     (long long)r->seeds_dropped, (long long)s->corpus, (long long)s->covered,
                     (long long)s->total, s->total ? (double)s->covered / (double)s->total : 0.0,
                     (long long)s->failures, (long long)s->failures_total,
                     (long long)cp->fs.by_oracle[0], (long long)cp->fs.by_oracle[1],
                     (long long)cp->fs.by_oracle[2]);
    fl_status st = fz_path(path, sizeof path, cp->o->out_dir, "summary.json", e);
    return st ? st : fl_file_write_atomic(path, buf, (size_t)k, e);
}

static void teardown(fz_campaign *cp) {
    if (cp->plot) fclose(cp->plot);
    if (cp->grad) fz_grad_free(cp->grad);
    free(cp->grad);
    fz_queue_free(&cp->q);
    fz_findings_free(&cp->fs);
    fz_novelty_free(&cp->nv);
    fl_tensor_free(&cp->gan_img);
    fl_coverset_free(cp->cov);
    fl_layerset_free(cp->ls);
    fl_xform_menu_free(&cp->menu);
}

fl_status fl_fuzz_run(const fl_fuzz_opts *o, fl_fuzz_result *r, fl_err *e) {
    fz_campaign cp;
    memset(r, 0, sizeof *r);
    fl_status st = setup(&cp, o, e);
    if (!st && !o->resume && o->strategy != FL_FUZZ_FUZZGAN) st = load_seeds(&cp, r, e);
    if (!st && o->resume) {
        st = fz_out_resume(&cp, e);
        if (!st) st = fz_findings_load(&cp, e);
    }
    /* the session's own random stream: the seed, moved on per resumed session */
    cp.session_seed = o->seed + 0x9e3779b97f4a7c15ull * (uint64_t)(cp.session - 1);
    fl_rng_seed(&cp.rng, cp.session_seed);
    fz_round rd = {0};
    if (!st) st = fz_round_init(&rd, &cp, e);
    if (!st) st = fz_replay_corpus(&rd, &cp, e); /* coverage (and novelty) of the queue */
    if (!st && fl_fuzz_is_gradient(o->strategy)) { /* its checks too come before out_dir */
        if (!(cp.grad = malloc(sizeof *cp.grad))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        else st = fz_grad_init(cp.grad, &cp, e);
    }
    if (!st) st = fz_out_create(o->out_dir, e);
    fl_file_durable(0);
    for (int64_t i = 0; !st && !o->resume && i < cp.q.n; i++) st = fz_out_entry(&cp, i, NULL, e);
    if (!st) {
        cp.t0 = cp.last_new = fl_now();
        st = report_now(&cp, 0, e);
    }
    int64_t empty = 0;
    while (!st) {
        if (o->stop && *o->stop) break;
        if (o->max_execs > 0 && cp.execs - cp.execs_before >= o->max_execs) break;
        if (o->max_time > 0 && fl_now() - cp.t0 >= o->max_time) break;
        if (o->max_suite > 0 && cp.q.n >= o->max_suite) break;
        if (o->target_cov > 0) {
            int64_t c, t;
            fl_cover_stats(cp.cov->c[0], &c, &t);
            if (t && (double)c >= o->target_cov * (double)t) break;
        }
        int ran = 0;
        fz_queue_seal(&cp.q); /* what this round keeps is one batch */
        st = cp.grad                          ? fz_grad_round(cp.grad, &cp, &ran, e)
             : o->strategy == FL_FUZZ_FUZZGAN ? fz_gan_round(&rd, &cp, &ran, e)
                                              : fz_round_run(&rd, &cp, &ran, e);
        empty = ran ? 0 : empty + 1;
        if (!st && empty >= 10000 && cp.grad)
            st = fl_fail(e, FL_ERR_ARG,
                         "10000 rounds in a row stepped nothing: the models disagree on every "
                         "seed picked (deepxplore starts from seeds they agree on)");
        else if (!st && empty >= 10000)
            st = fl_fail(e, FL_ERR_ARG,
                         "10000 picks in a row gave no valid mutant: the validity constraint "
                         "(alpha %g, beta %g) admits nothing",
                         cp.alpha, cp.beta);
        if (!st && fl_now() - cp.last_stats >= 1.0) st = report_now(&cp, 0, e);
    }
    if (cp.t0 > 0) { /* the campaign ran: close its books even after an error */
        fl_err e2 = {0};
        fl_status st2 = report_now(&cp, 1, &e2);
        if (!st2) st2 = write_summary(&cp, r, &e2);
        if (!st2) st2 = fz_findings_grid(&cp, &e2);
        if (!st2) st2 = fl_fuzz_report_write(o->out_dir, &e2);
        if (!st && st2) {
            st = st2;
            if (e) *e = e2;
        }
    }
    fl_file_durable(1);
    r->last = cp.st;
    r->seeds_used = cp.q.n_seeds;
    memcpy(r->by_oracle, cp.fs.by_oracle, sizeof r->by_oracle);
    fz_round_free(&rd);
    teardown(&cp);
    return st;
}
