/* fl_gan_train: ACGAN training with the model under test in the generator's loss (gan.h).
 *
 * One batch, in the order DCGAN's reference loop uses:
 *   1. G makes B fakes from noise, random classes and random target neurons (a layer
 *      uniformly, then a neuron of it: layers differ in width by 100x);
 *   2. D step: real batch (BCE to 1, CE to its labels) and the same fakes (BCE to 0, CE to
 *      their classes), gradients accumulated, one Adam step;
 *   3. G step: the fakes through the updated D (BCE to 1, CE to c) and through the frozen
 *      model under test (L_error on its logits, L_neuron on the target layers' tensors); the
 *      two input gradients, summed, are G's output gradient; one Adam step.
 * The last incomplete batch of an epoch is dropped (drop_last), as GAN loops do.
 *
 * Every random draw of epoch k comes from a stream seeded by (seed, k), so a run resumed
 * after epoch k continues exactly as the uninterrupted run would have.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "flare/onnx.h"
#include "gan/gan_int.h"

#define EVAL_BATCHES 8 /* the per-epoch evaluation: 8 batches of fixed cases */
#define GRID_COLS 10

typedef struct run {
    const fl_gan_opts *o;
    fl_model *mut;
    const fl_dataset *train;
    fz_gan_net g, d;
    fl_layerset *ls;
    int K, c, h, w, B, nz;
    int64_t n, P;            /* values per image; neurons */
    float sa[3], sb[3];      /* the model's scale: input = sa * pixel01 + sb, per channel */
    fl_tensor z, cls, neu;   /* G's inputs [B, nz], [B, K], [B, P] */
    fl_tensor real;          /* [B, c, h, w] real images, pixel / 255 */
    fl_tensor xin;           /* [B, c, h, w] the model's input */
    fl_tensor g_img;         /* [B, c, h, w] G's output gradient */
    fl_tensor s_adv, s_cls;  /* D's seeds [B, 1], [B, K] */
    fl_tensor *s_layer;      /* [ls->n] seeds of the model's layers (allocated when planned) */
    fl_tensor s_logits;      /* [B, K] */
    int32_t *y, *c_idx;      /* [B] real labels, fake classes */
    int64_t *l_idx;          /* [B] target neurons (flat) */
    int *l_layer;            /* [B] their layers */
    float *ones, *zeros;     /* [B] BCE targets */
    int64_t *perm;           /* [n_train] */
    int64_t *perm_eval;      /* [B] real images of the evaluation cases' classes */
    double *raw;             /* [B] mut_terms with act: each target's mean |value|, unscaled */
    int mut_logits;          /* value index of the model's logits */
    fl_rng rng;
    /* running sums of an epoch */
    double s_d, s_gadv, s_gcls, s_err, s_neu;
    int64_t batches;
} run;

void fl_gan_opts_default(fl_gan_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 5;
    o->batch = 128;
    o->lr = 2e-4f;
    o->beta1 = 0.5f;
    o->lambda1 = 0.5;
    o->lambda2 = 1.0;
    o->nz = 64;
    o->seed = 1;
}

/* ---- inputs ------------------------------------------------------------------------------- */
/* Draw B cases: noise, a class, a target neuron (layer uniformly, then a neuron of it). */
static void draw_cases(run *R, fl_rng *r) {
    memset(R->cls.data, 0, sizeof(float) * (size_t)R->cls.size);
    memset(R->neu.data, 0, sizeof(float) * (size_t)R->neu.size);
    for (int64_t i = 0; i < R->z.size; i++) R->z.data[i] = fl_rng_normal(r);
    for (int i = 0; i < R->B; i++) {
        R->c_idx[i] = (int32_t)fl_rng_below(r, (uint32_t)R->K);
        int l = (int)fl_rng_below(r, (uint32_t)R->ls->n);
        R->l_layer[i] = l;
        R->l_idx[i] = R->ls->offset[l] + fl_rng_below(r, (uint32_t)R->ls->width[l]);
        R->cls.data[(int64_t)i * R->K + R->c_idx[i]] = 1;
        R->neu.data[(int64_t)i * R->P + R->l_idx[i]] = 1;
    }
}

static fl_status gen_forward(run *R, fl_err *e) {
    fl_tensor in[3] = {R->z, R->cls, R->neu};
    return fl_model_forward_multi(R->g.m, 3, in, e);
}

static const fl_tensor *g_out(const run *R) { return fl_model_output(R->g.m, 0); }

/* ---- the model under test's losses ------------------------------------------------------------ */
/* The mean |value| of channel j of layer tensor t for sample i ([N, C, H, W] or [N, F]). */
static double mean_abs(const fl_tensor *t, int64_t i, int64_t j, int64_t *hw) {
    int64_t C = t->shape[1], HW = t->size / (t->shape[0] * C);
    const float *p = t->data + (i * C + j) * HW;
    double s = 0;
    for (int64_t k = 0; k < HW; k++) s += fabsf(p[k]);
    if (hw) *hw = HW;
    return s / (double)HW;
}

/* Forward the fakes through the model; seeds of L_error (logits) and L_neuron (the target
 * layers), gradient into the model's input; R->g_img += its pixel gradient. Returns the two
 * losses (means over the batch), and per case whether the model got it wrong and its target's
 * normalised activation (NULL: not wanted). */
static fl_status mut_terms(run *R, const fl_tensor *img, int want_grad, double *l_err,
                           double *l_neu, uint8_t *wrong, double *act, fl_err *e) {
    const int B = R->B;
    for (int64_t i = 0; i < img->size; i++) {
        int ch = (int)((i / ((int64_t)R->h * R->w)) % R->c);
        R->xin.data[i] = R->sa[ch] * img->data[i] + R->sb[ch];
    }
    fl_status st = fl_model_forward(R->mut, &R->xin, e);
    if (st) return st;
    const fl_tensor *lg = fl_model_output(R->mut, 0);
    if (!R->s_logits.data && (st = fl_tensor_alloc(&R->s_logits, 2, lg->shape)))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    /* L_error = -mean_i min(CE_i, ln K): the push stops once the model's probability of c is
     * below 1/K (docs/fuzzgan.md: unbounded, it drowns the realism terms) */
    const double cap = log((double)R->K);
    double sum_err = 0;
    for (int i = 0; i < B; i++) {
        const float *row = lg->data + (int64_t)i * R->K;
        float *g = R->s_logits.data + (int64_t)i * R->K;
        double mx = row[0], z = 0;
        for (int k = 1; k < R->K; k++) mx = row[k] > mx ? row[k] : mx;
        for (int k = 0; k < R->K; k++) z += exp((double)row[k] - mx);
        double ce = log(z) + mx - row[R->c_idx[i]];
        sum_err += ce < cap ? ce : cap;
        for (int k = 0; k < R->K; k++) {
            double p = exp((double)row[k] - mx) / z - (k == R->c_idx[i]);
            g[k] = ce < cap ? (float)(-R->o->lambda1 * p / B) : 0.0f;
        }
    }
    *l_err = -sum_err / B;
    if (wrong)
        for (int i = 0; i < B; i++) {
            const float *row = lg->data + (int64_t)i * R->K;
            int best = 0;
            for (int k = 1; k < R->K; k++)
                if (row[k] > row[best]) best = k;
            wrong[i] = best != R->c_idx[i];
        }
    /* L_neuron: -a_j / max_k a_k per case, the divisor held constant */
    double sum = 0;
    uint8_t used[64] = {0};
    for (int i = 0; i < B; i++) {
        int l = R->l_layer[i];
        const fl_tensor *t = &R->mut->values[R->ls->value[l]].t;
        int64_t j = R->l_idx[i] - R->ls->offset[l], hw, C = t->shape[1];
        double mx = 0, aj = mean_abs(t, i, j, &hw);
        for (int64_t k = 0; k < C; k++) {
            double a = mean_abs(t, i, k, NULL);
            mx = a > mx ? a : mx;
        }
        double v = mx > 0 ? aj / mx : 0;
        sum += v;
        if (act) act[i] = v, R->raw[i] = aj;
        if (!want_grad || mx <= 0) continue;
        fl_tensor *s = &R->s_layer[l];
        if (!s->data) {
            if ((st = fl_tensor_alloc(s, t->ndim, t->shape)))
                return fl_fail(e, FL_ERR_NOMEM, "out of memory");
            memset(s->data, 0, sizeof(float) * (size_t)s->size);
        }
        if (l < 64 && !used[l]) {
            memset(s->data, 0, sizeof(float) * (size_t)s->size);
            used[l] = 1;
        }
        const float *p = t->data + (i * C + j) * hw;
        float *q = s->data + (i * C + j) * hw;
        float gscale = (float)(-R->o->lambda2 / (mx * (double)hw * B));
        for (int64_t k = 0; k < hw; k++) q[k] = p[k] > 0 ? gscale : p[k] < 0 ? -gscale : 0;
    }
    *l_neu = -sum / B;
    if (!want_grad) return FL_OK;
    int idx[65], n = 0;
    fl_tensor seeds[65];
    idx[n] = R->mut_logits, seeds[n++] = R->s_logits;
    for (int l = 0; l < R->ls->n && l < 64; l++)
        if (used[l]) idx[n] = R->ls->value[l], seeds[n++] = R->s_layer[l];
    if ((st = fl_model_backward_idx(R->mut, n, idx, seeds, e))) return st;
    const fl_tensor *dx = fl_model_grad(R->mut, fl_model_input_name(R->mut, 0));
    for (int64_t i = 0; i < R->g_img.size; i++) {
        int ch = (int)((i / ((int64_t)R->h * R->w)) % R->c);
        R->g_img.data[i] += R->sa[ch] * dx->data[i];
    }
    return FL_OK;
}

/* ---- one batch ------------------------------------------------------------------------------ */
/* D on images x against real/fake target t, and (y not NULL: real images) its class head
 * against their labels; backward. Returns the loss. The class head learns from real images
 * only (docs/fuzzgan.md: trained on the fakes' classes too, it learns to agree with whatever G
 * draws, and G's class term stops asking for the class). */
static fl_status d_pass(run *R, const fl_tensor *x, const float *t, const int32_t *y, double *loss,
                        fl_err *e) {
    fl_status st = fl_model_forward(R->d.m, x, e);
    if (st) return st;
    const fl_tensor *adv = fl_model_output(R->d.m, 0), *cls = fl_model_output(R->d.m, 1);
    *loss = fl_loss_bce(R->s_adv.data, adv->data, t, R->B);
    if (y) *loss += fl_loss_ce(R->s_cls.data, cls->data, y, R->B, R->K);
    else memset(R->s_cls.data, 0, sizeof(float) * (size_t)R->s_cls.size);
    int idx[2] = {R->d.m->outputs[0], R->d.m->outputs[1]};
    fl_tensor seeds[2] = {R->s_adv, R->s_cls};
    return fl_model_backward_idx(R->d.m, 2, idx, seeds, e);
}

/* The G step's loss terms for G's current output, and their gradient with respect to it in
 * R->g_img: D's (the fakes through D, BCE to 1 and CE to c) plus the model under test's. */
static fl_status g_image_grad(run *R, double *gadv, double *gcls, double *lerr, double *lneu,
                              fl_err *e) {
    R->d.m->skip_input_grad = 0;
    fl_status st = fl_model_forward(R->d.m, g_out(R), e);
    if (st) return st;
    const fl_tensor *adv = fl_model_output(R->d.m, 0), *cls = fl_model_output(R->d.m, 1);
    *gadv = fl_loss_bce(R->s_adv.data, adv->data, R->ones, R->B);
    *gcls = fl_loss_ce(R->s_cls.data, cls->data, R->c_idx, R->B, R->K);
    int didx[2] = {R->d.m->outputs[0], R->d.m->outputs[1]};
    fl_tensor dseeds[2] = {R->s_adv, R->s_cls};
    if ((st = fl_model_backward_idx(R->d.m, 2, didx, dseeds, e))) return st;
    const fl_tensor *dimg = fl_model_grad(R->d.m, "image");
    memcpy(R->g_img.data, dimg->data, sizeof(float) * (size_t)R->g_img.size);
    return mut_terms(R, g_out(R), 1, lerr, lneu, NULL, NULL, e);
}

static fl_status batch(run *R, const int64_t *idx, fl_err *e) {
    fl_status st = fl_dataset_gather(R->train, idx, R->B, &R->real, R->y, e);
    if (st) return st;
    fl_scale_unapply(&R->train->scale, R->real.data, R->B, R->c, (int64_t)R->h * R->w);
    draw_cases(R, &R->rng);
    if ((st = gen_forward(R, e))) return st;
    /* D step */
    double lr, lf;
    R->d.m->skip_input_grad = 1;
    fl_model_zero_param_grads(R->d.m);
    if ((st = d_pass(R, &R->real, R->ones, R->y, &lr, e)) ||
        (st = d_pass(R, g_out(R), R->zeros, NULL, &lf, e)))
        return st;
    fl_optim_step(R->d.opt);
    double gadv = 0, gcls = 0, lerr = 0, lneu = 0;
    if ((st = g_image_grad(R, &gadv, &gcls, &lerr, &lneu, e))) return st;
    fl_model_zero_param_grads(R->g.m);
    int gidx = R->g.m->outputs[0];
    if ((st = fl_model_backward_idx(R->g.m, 1, &gidx, &R->g_img, e))) return st;
    fl_optim_step(R->g.opt);
    R->s_d += lr + lf;
    R->s_gadv += gadv, R->s_gcls += gcls, R->s_err += lerr, R->s_neu += lneu;
    R->batches++;
    if (!isfinite(lr + lf + gadv + gcls + lerr + lneu))
        return fl_fail(e, FL_ERR_NAN, "the GAN's losses became non-finite (D %g, G %g); try a "
                       "lower learning rate", lr + lf, gadv + gcls);
    return FL_OK;
}

/* ---- per epoch: evaluation, grid, losses, checkpoint ------------------------------------------ */
static fl_status evaluate(run *R, fl_gan_epoch *ep, fl_err *e) {
    fl_rng r;
    fl_rng_seed(&r, R->o->seed ^ 0x5eed0fe7a1ull); /* the same cases every epoch */
    int64_t wrong = 0, dok = 0, n = 0;
    double act = 0, real_act = 0, raw = 0, real_raw = 0, l_err, l_neu;
    uint8_t *w = malloc((size_t)R->B);
    double *a = malloc(sizeof(double) * (size_t)R->B), *ar = malloc(sizeof(double) * (size_t)R->B);
    fl_status st = w && a && ar ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    R->g.m->training = 0;
    for (int b = 0; !st && b < EVAL_BATCHES; b++) {
        draw_cases(R, &r);
        if ((st = gen_forward(R, e)) || (st = mut_terms(R, g_out(R), 0, &l_err, &l_neu, w, a, e)))
            break;
        for (int i = 0; i < R->B; i++) raw += R->raw[i];
        if ((st = fl_model_forward(R->d.m, g_out(R), e))) break;
        const fl_tensor *cls = fl_model_output(R->d.m, 1);
        /* the same target neurons on real images of the same classes: the baseline of the
         * paper's "mean activation of target neurons compared with real images" */
        for (int i = 0; i < R->B; i++) {
            int64_t j;
            do j = (int64_t)(fl_rng_u64(&r) % (uint64_t)R->train->n); /* every class has one */
            while (R->train->y[j] != R->c_idx[i]);
            R->perm_eval[i] = j;
        }
        if ((st = fl_dataset_gather(R->train, R->perm_eval, R->B, &R->real, NULL, e))) break;
        fl_scale_unapply(&R->train->scale, R->real.data, R->B, R->c, (int64_t)R->h * R->w);
        double le2, ln2;
        if ((st = mut_terms(R, &R->real, 0, &le2, &ln2, NULL, ar, e))) break;
        for (int i = 0; i < R->B; i++) real_act += ar[i], real_raw += R->raw[i];
        for (int i = 0; i < R->B; i++) {
            const float *row = cls->data + (int64_t)i * R->K;
            int best = 0;
            for (int k = 1; k < R->K; k++)
                if (row[k] > row[best]) best = k;
            dok += best == R->c_idx[i];
            wrong += w[i];
            act += a[i];
            n++;
        }
    }
    R->g.m->training = 1;
    free(w);
    free(a);
    free(ar);
    if (st) return st;
    ep->misclass = (double)wrong / (double)n;
    ep->d_class_acc = (double)dok / (double)n;
    ep->target_act = act / (double)n;
    ep->real_act = real_act / (double)n;
    ep->target_raw = raw / (double)n;
    ep->real_raw = real_raw / (double)n;
    return FL_OK;
}

/* K rows of GRID_COLS samples of each class, fixed noise and neurons, each labelled with its
 * class and, where the model disagrees, the model's prediction. */
static fl_status write_grid(run *R, const char *path, fl_err *e) {
    int cells = R->K * GRID_COLS;
    float *img = malloc(sizeof(float) * (size_t)(cells * R->n));
    char(*lab)[48] = calloc((size_t)cells, sizeof *lab);
    const char **lp = calloc((size_t)cells, sizeof *lp);
    fl_status st = img && lab && lp ? FL_OK : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_rng r;
    fl_rng_seed(&r, R->o->seed ^ 0x6e1dull);
    R->g.m->training = 0;
    double l_err, l_neu;
    uint8_t *w = malloc((size_t)R->B);
    if (!st && !w) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int done = 0; !st && done < cells; done += R->B) {
        draw_cases(R, &r);
        memset(R->cls.data, 0, sizeof(float) * (size_t)R->cls.size);
        for (int i = 0; i < R->B; i++) {
            R->c_idx[i] = ((done + i) / GRID_COLS) % R->K;
            R->cls.data[(int64_t)i * R->K + R->c_idx[i]] = 1;
        }
        if ((st = gen_forward(R, e)) || (st = mut_terms(R, g_out(R), 0, &l_err, &l_neu, w, NULL, e)))
            break;
        const fl_tensor *lg = fl_model_output(R->mut, 0);
        for (int i = 0; i < R->B && done + i < cells; i++) {
            memcpy(img + (int64_t)(done + i) * R->n, g_out(R)->data + (int64_t)i * R->n,
                   sizeof(float) * (size_t)R->n);
            const float *row = lg->data + (int64_t)i * R->K;
            int best = 0;
            for (int k = 1; k < R->K; k++)
                if (row[k] > row[best]) best = k;
            char *const *names = R->train->class_names;
            if (w[i] && names)
                snprintf(lab[done + i], sizeof lab[0], "%.10s\n>%.10s", names[R->c_idx[i]],
                         names[best]);
            else if (names)
                snprintf(lab[done + i], sizeof lab[0], "%.10s", names[R->c_idx[i]]);
            else
                snprintf(lab[done + i], sizeof lab[0], w[i] ? "%d\n>%d" : "%d", R->c_idx[i], best);
            lp[done + i] = lab[done + i];
        }
    }
    R->g.m->training = 1;
    if (!st) st = fl_image_grid_write(path, img, cells, R->c, R->h, R->w, GRID_COLS, lp, e);
    free(w);
    free(img);
    free(lab);
    free(lp);
    return st;
}

static fl_status append_losses(run *R, const fl_gan_epoch *ep, fl_err *e) {
    char path[4096];
    fl_status st = fl_path_join(path, sizeof path, R->o->work_dir, "losses.jsonl", e);
    if (st) return st;
    /* rewritten whole (atomically) from the lines of earlier epochs plus this one: a killed
     * run never leaves half a line */
    uint8_t *old = NULL;
    size_t len = 0;
    fl_err ignore;
    if (ep->epoch > 1 && fl_file_read(path, &old, &len, &ignore) != FL_OK) old = NULL, len = 0;
    /* keep only the lines of epochs before this one (a resumed run may have logged more) */
    size_t keep = 0;
    for (int lines = 0; keep < len && lines < ep->epoch - 1; keep++)
        if (old[keep] == '\n') lines++;
    char line[512];
    int k = snprintf(line, sizeof line,
                     "{\"epoch\": %d, \"d_loss\": %.6f, \"g_adv\": %.6f, \"g_cls\": %.6f, "
                     "\"g_error\": %.6f, \"g_neuron\": %.6f, \"misclass\": %.4f, "
                     "\"d_class_acc\": %.4f, \"target_act\": %.4f, \"real_act\": %.4f, "
                     "\"target_raw\": %.5g, \"real_raw\": %.5g, \"seconds\": %.2f}\n",
                     ep->epoch, ep->d_loss, ep->g_adv, ep->g_cls, ep->g_error, ep->g_neuron,
                     ep->misclass, ep->d_class_acc, ep->target_act, ep->real_act, ep->target_raw, ep->real_raw, ep->seconds);
    char *all = malloc(keep + (size_t)k);
    if (!all) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    else {
        if (keep) memcpy(all, old, keep);
        memcpy(all + keep, line, (size_t)k);
        st = fl_file_write_atomic(path, all, keep + (size_t)k, e);
    }
    free(all);
    free(old);
    return st;
}

/* ---- set-up ---------------------------------------------------------------------------------- */
static fl_status set_meta(run *R, fl_model *g, fl_err *e) {
    char buf[64], sc[128];
    fl_status st = fl_model_meta_set(g, "flare.gan.format", GAN_FORMAT, e);
    snprintf(buf, sizeof buf, "%d", R->nz);
    if (!st) st = fl_model_meta_set(g, "flare.gan.nz", buf, e);
    snprintf(buf, sizeof buf, "%d", R->K);
    if (!st) st = fl_model_meta_set(g, "flare.gan.classes", buf, e);
    snprintf(buf, sizeof buf, "%lld", (long long)R->P);
    if (!st) st = fl_model_meta_set(g, "flare.gan.neurons", buf, e);
    if (!st) st = fl_model_meta_set(g, "flare.gan.layers", R->o->layers ? R->o->layers : "all", e);
    fl_scale s01 = {0};
    fl_scale_str(R->o->scale ? R->o->scale : &s01, sc, sizeof sc);
    if (!st) st = fl_model_meta_set(g, "flare.gan.scale", sc, e);
    if (!st && R->o->model_path) st = fl_model_meta_set(g, "flare.gan.model", R->o->model_path, e);
    cJSON *names = cJSON_CreateArray();
    for (int k = 0; names && k < R->K; k++) {
        char num[16];
        snprintf(num, sizeof num, "%d", k);
        cJSON_AddItemToArray(names, cJSON_CreateString(R->train->class_names
                                                           ? R->train->class_names[k] : num));
    }
    char *txt = names ? cJSON_PrintUnformatted(names) : NULL;
    cJSON_Delete(names);
    if (!st && !txt) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (!st) st = fl_model_meta_set(g, "flare.gan.class_names", txt, e);
    free(txt);
    return st;
}

static fl_status setup(run *R, fl_model *mut, const fl_dataset *train, const fl_gan_opts *o,
                       fl_err *e) {
    memset(R, 0, sizeof *R);
    R->o = o, R->mut = mut, R->train = train;
    if (!o->work_dir) return fl_fail(e, FL_ERR_ARG, "GAN training needs a work folder");
    if (o->epochs < 1 || o->batch < 2 || !(o->lr > 0) || o->nz < 1 || !(o->lambda1 >= 0) ||
        !(o->lambda2 >= 0))
        return fl_fail(e, FL_ERR_ARG, "GAN training: bad options (epochs %d, batch %d, lr %g, "
                       "nz %d, lambda1 %g, lambda2 %g)", o->epochs, o->batch, (double)o->lr, o->nz,
                       o->lambda1, o->lambda2);
    if (!train->has_labels)
        return fl_fail(e, FL_ERR_ARG, "the training data has no labels: an ACGAN learns classes");
    R->B = o->batch, R->nz = o->nz;
    R->c = train->c, R->h = train->h, R->w = train->w;
    R->n = (int64_t)R->c * R->h * R->w;
    if (train->n < R->B)
        return fl_fail(e, FL_ERR_ARG, "the training data has %lld images, fewer than one batch "
                       "(%d)", (long long)train->n, R->B);
    /* the model under test: its logits and layers */
    fl_tensor x = {0};
    int64_t shape[4] = {R->B, R->c, R->h, R->w};
    fl_status st = fl_tensor_alloc(&R->xin, 4, shape);
    if (st) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int64_t idx0 = 0;
    if ((st = fl_dataset_gather(train, &idx0, 1, &x, NULL, e))) return st;
    st = fl_model_forward(mut, &x, e);
    fl_tensor_free(&x);
    if (st) return st;
    const fl_tensor *lg = fl_model_output(mut, 0);
    if (lg->ndim != 2 || lg->shape[1] < 2)
        return fl_fail(e, FL_ERR_SHAPE, "the model's first output is not [N, classes] logits");
    R->K = (int)lg->shape[1];
    if (train->n_classes != R->K)
        return fl_fail(e, FL_ERR_SHAPE, "the training data has %d classes, the model %d outputs",
                       train->n_classes, R->K);
    /* every class must have images: D's class head learns from them, and each epoch's
     * evaluation draws real images of the cases' classes */
    int64_t *per = calloc((size_t)R->K, sizeof *per);
    if (!per) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < train->n; i++)
        if (train->y[i] >= 0 && train->y[i] < R->K) per[train->y[i]]++;
    int empty = -1;
    for (int k = 0; k < R->K && empty < 0; k++)
        if (!per[k]) empty = k;
    free(per);
    if (empty >= 0)
        return fl_fail(e, FL_ERR_ARG, "class %d has no training images: a conditional GAN cannot "
                       "learn it", empty);
    R->mut_logits = mut->outputs[0];
    if ((st = fl_layerset_make(mut, o->layers ? o->layers : "all", &R->ls, e))) return st;
    if (R->ls->n > 64)
        return fl_fail(e, FL_ERR_UNSUPPORTED, "the layer set has %d layers; FuzzGAN targets at "
                       "most 64 (name them with --layers)", R->ls->n);
    R->P = R->ls->total;
    float lut[256];
    for (int ch = 0; ch < R->c && ch < 3; ch++) {
        fl_scale_lut(o->scale ? o->scale : &train->scale, ch, lut);
        R->sa[ch] = lut[255] - lut[0];
        R->sb[ch] = lut[0];
    }
    if (R->c > 3) return fl_fail(e, FL_ERR_UNSUPPORTED, "images of %d channels", R->c);
    mut->training = 0;
    mut->skip_input_grad = 0;
    /* buffers */
    int64_t sz[2] = {R->B, R->nz}, sc[2] = {R->B, R->K}, sn[2] = {R->B, R->P}, s1[2] = {R->B, 1};
    R->y = calloc((size_t)R->B, sizeof *R->y);
    R->c_idx = calloc((size_t)R->B, sizeof *R->c_idx);
    R->l_idx = calloc((size_t)R->B, sizeof *R->l_idx);
    R->l_layer = calloc((size_t)R->B, sizeof *R->l_layer);
    R->ones = malloc(sizeof(float) * (size_t)R->B);
    R->zeros = calloc((size_t)R->B, sizeof(float));
    R->perm = malloc(sizeof(int64_t) * (size_t)train->n);
    R->perm_eval = malloc(sizeof(int64_t) * (size_t)R->B);
    R->raw = malloc(sizeof(double) * (size_t)R->B);
    R->s_layer = calloc((size_t)R->ls->n, sizeof *R->s_layer);
    if (!R->y || !R->c_idx || !R->l_idx || !R->l_layer || !R->ones || !R->zeros || !R->perm ||
        !R->perm_eval || !R->raw || !R->s_layer || fl_tensor_alloc(&R->z, 2, sz) || fl_tensor_alloc(&R->cls, 2, sc) ||
        fl_tensor_alloc(&R->neu, 2, sn) || fl_tensor_alloc(&R->real, 4, shape) ||
        fl_tensor_alloc(&R->g_img, 4, shape) || fl_tensor_alloc(&R->s_adv, 2, s1) ||
        fl_tensor_alloc(&R->s_cls, 2, sc))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory (batch %d)", R->B);
    for (int i = 0; i < R->B; i++) R->ones[i] = 1;
    return FL_OK;
}

static void teardown(run *R) {
    fl_optim_free(R->g.opt);
    fl_optim_free(R->d.opt);
    fl_model_free(R->d.m);
    if (R->s_layer)
        for (int l = 0; l < R->ls->n; l++) fl_tensor_free(&R->s_layer[l]);
    free(R->s_layer);
    fl_layerset_free(R->ls);
    fl_tensor *ts[] = {&R->z, &R->cls, &R->neu, &R->real, &R->xin, &R->g_img, &R->s_adv,
                       &R->s_cls, &R->s_logits};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) fl_tensor_free(ts[i]);
    free(R->y);
    free(R->c_idx);
    free(R->l_idx);
    free(R->l_layer);
    free(R->ones);
    free(R->zeros);
    free(R->perm);
    free(R->perm_eval);
    free(R->raw);
}

static fl_status make_nets(run *R, fl_optim_opts *oo, fl_err *e) {
    fl_status st = fz_gan_build_g(R->nz, R->K, R->P, R->c, R->h, R->w, R->o->seed, &R->g.m, e);
    if (!st) st = fz_gan_build_d(R->K, R->c, R->h, R->w, R->o->seed + 1, &R->d.m, e);
    if (!st) st = fl_optim_new(R->g.m, oo, &R->g.opt, e);
    if (!st) st = fl_optim_new(R->d.m, oo, &R->d.opt, e);
    return st;
}

static void shuffle(run *R, fl_rng *r) {
    int64_t n = R->train->n;
    for (int64_t i = 0; i < n; i++) R->perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(fl_rng_u64(r) % (uint64_t)(i + 1)), t = R->perm[i];
        R->perm[i] = R->perm[j], R->perm[j] = t;
    }
}

fl_status fl_gan_train(fl_model *mut, const fl_dataset *train, const fl_gan_opts *o,
                       fl_model **gen, fl_err *e) {
    *gen = NULL;
    run R;
    fl_status st = setup(&R, mut, train, o, e);
    fl_optim_opts oo;
    fl_optim_opts_default(&oo, FL_OPTIM_ADAM);
    oo.lr = o->lr, oo.beta1 = o->beta1;
    int done = 0;
    char path[4096];
    if (!st) st = make_nets(&R, &oo, e);
    if (!st && o->resume) st = fz_gan_ckpt_load(o->work_dir, &R.g, &R.d, &oo, o->seed, &done, e);
    if (!st && o->resume) {
        /* the checkpoint must be a generator for this model and these options */
        const fl_model *g = R.g.m;
        const fl_value *zv = &g->values[g->inputs[0]], *nv = &g->values[g->inputs[2 % g->n_inputs]];
        if (g->n_inputs != 3 || zv->decl_shape[1] != R.nz || nv->decl_shape[1] != R.P)
            st = fl_fail(e, FL_ERR_SHAPE, "%s/ckpt/gen.onnx: not a generator for this model's "
                         "%lld neurons with noise size %d", o->work_dir, (long long)R.P, R.nz);
    }
    if (!st) st = fl_path_join(path, sizeof path, o->work_dir, "samples", e);
    if (!st) st = fl_mkdirs(path, e);
    if (!st) st = set_meta(&R, R.g.m, e);
    if (!st) {
        R.g.m->training = R.d.m->training = 1;
        R.g.m->skip_input_grad = 1;
    }
    int64_t per_epoch = st ? 0 : train->n / R.B;
    if (o->max_batches > 0 && per_epoch > o->max_batches) per_epoch = o->max_batches;
    for (int ep = done + 1; !st && ep <= o->epochs; ep++) {
        double t0 = fl_now();
        fl_rng_seed(&R.rng, o->seed + 0x9e3779b97f4a7c15ull * (uint64_t)ep);
        shuffle(&R, &R.rng);
        R.s_d = R.s_gadv = R.s_gcls = R.s_err = R.s_neu = 0;
        R.batches = 0;
        int stopped = 0;
        for (int64_t b = 0; !st && b < per_epoch; b++) {
            if (o->stop && *o->stop) {
                stopped = 1;
                break;
            }
            st = batch(&R, R.perm + b * R.B, e);
            if (!st && o->progress && ((b + 1) % 10 == 0 || b + 1 == per_epoch)) {
                double dt = fl_now() - t0;
                fl_gan_progress p = {ep, o->epochs, (b + 1) * R.B, per_epoch * R.B,
                                     R.s_d / (double)R.batches,
                                     (R.s_gadv + R.s_gcls) / (double)R.batches,
                                     dt > 0 ? (double)((b + 1) * R.B) / dt : 0};
                o->progress(&p, o->user);
            }
        }
        if (st) break;
        if (stopped) {
            /* hand out the last finished epoch's generator, as the checkpoint holds it */
            fz_gan_net g = {0}, d = {0};
            int ep_done = 0;
            if (done > 0 || ep > 1) {
                fl_optim_free(R.g.opt);
                fl_model_free(R.g.m);
                R.g.m = NULL, R.g.opt = NULL;
                st = fz_gan_ckpt_load(o->work_dir, &g, &d, &oo, o->seed, &ep_done, e);
                fl_optim_free(d.opt);
                fl_model_free(d.m);
                R.g = g;
                if (!st) st = set_meta(&R, R.g.m, e);
            } else {
                fl_optim_free(R.g.opt);
                fl_model_free(R.g.m);
                R.g.m = NULL, R.g.opt = NULL;
            }
            break;
        }
        fl_gan_epoch s = {ep, o->epochs, R.s_d / (double)R.batches, R.s_gadv / (double)R.batches,
                          R.s_gcls / (double)R.batches, R.s_err / (double)R.batches,
                          R.s_neu / (double)R.batches, 0, 0, 0, 0, 0, 0, 0, NULL};
        char rel[64];
        snprintf(rel, sizeof rel, "samples/epoch_%03d.png", ep);
        if (!st) st = evaluate(&R, &s, e);
        if (!st) st = fl_path_join(path, sizeof path, o->work_dir, rel, e);
        if (!st) st = write_grid(&R, path, e);
        s.seconds = fl_now() - t0;
        s.grid = path;
        if (!st) st = append_losses(&R, &s, e);
        if (!st) st = fz_gan_ckpt_save(o->work_dir, &R.g, &R.d, ep, o->seed, e);
        if (!st && o->on_epoch) o->on_epoch(&s, o->user);
    }
    fl_model *g = R.g.m;
    if (!st && g) {
        g->training = 0;
        fl_model_want_param_grads(g, 0, NULL);
        fl_optim_free(R.g.opt);
        R.g.opt = NULL;
        R.g.m = NULL;
        *gen = g;
    } else {
        fl_optim_free(R.g.opt);
        R.g.opt = NULL;
        fl_model_free(R.g.m);
    }
    mut->skip_input_grad = 0;
    teardown(&R);
    return st;
}
