/* The gradient strategies' objectives (as seeds of the backward pass) and steps.
 *
 * Objectives, each maximised (docs/nn-fuzz.md has the sources and the departures):
 *   dlfuzz      0.5 (z[top2] + z[top3] + z[top4] + z[top5]) - z[orig] + lambda sum_j s_j n_j
 *               on the logits z (DLFuzz's 'before_softmax'), n_j the selected neurons' channel
 *               means, s_j their sign (+1; -1 for "threshold"'s neurons below the threshold)
 *   deepxplore  -w_diff z_1[orig] + sum_{other models m} z_m[orig] + lambda sum_m n_m
 *               (model 1, the model under test, is pushed away from the agreed class)
 *   deepsa      p[top2..top5] - p[orig] on the softmax p, + lambda SAv(x) (exact mode; the
 *               released code's SA decides acceptance only)
 *   fgsm, pgd   the cross-entropy of the root's label
 *
 * Steps on the [0,1] image scale:
 *   dlfuzz, deepsa   x += step * g / rms(g)           (deepsa: step times U[0.5, 1.5))
 *   deepxplore       x += step * C(g / rms(g)), C the domain constraint
 *   fgsm             x = x0 + eps sign(g)
 *   pgd              x = P(x + step sign(g)), P the projection on the eps-ball around x0
 * and every image is clipped to [0,1] (the released DLFuzz and DeepXplore codes do not clip
 * while stepping; they clip when saving).
 */
#include <math.h>
#include <string.h>

#include "fuzz/grad.h"

static void softmax(const float *z, int K, double *p) {
    double mx = z[0], s = 0;
    for (int k = 1; k < K; k++) mx = z[k] > mx ? z[k] : mx;
    for (int k = 0; k < K; k++) s += p[k] = exp((double)z[k] - mx);
    for (int k = 0; k < K; k++) p[k] /= s;
}

void fz_obj_logits(const fz_grad *g, const fz_campaign *cp, const fz_lane *l, int model,
                   const float *z, int K, float *seed) {
    memset(seed, 0, sizeof(float) * (size_t)K);
    double p[4096];
    if (K > 4096) return; /* refused at setup */
    switch (cp->o->strategy) {
    case FL_FUZZ_FGSM:
    case FL_FUZZ_PGD: { /* d CE / d z = p - onehot(label) */
        const int32_t y = cp->q.e[l->entry].label;
        softmax(z, K, p);
        for (int k = 0; k < K; k++) seed[k] = (float)(p[k] - (k == y));
        break;
    }
    case FL_FUZZ_DLFUZZ:
        seed[l->orig] = -1;
        for (int i = 0; i < 4; i++)
            if (l->top[i] >= 0) seed[l->top[i]] += 0.5f;
        break;
    case FL_FUZZ_DEEPXPLORE: seed[l->orig] = model == 0 ? (float)-g->w_diff : 1.0f; break;
    case FL_FUZZ_DEEPSA: { /* d p_k / d z_j = p_k (delta_kj - p_j) */
        double c[4096] = {0}, cp_ = 0;
        softmax(z, K, p);
        c[l->orig] = -1;
        for (int i = 0; i < 4; i++)
            if (l->top[i] >= 0) c[l->top[i]] += 1;
        for (int k = 0; k < K; k++) cp_ += c[k] * p[k];
        for (int j = 0; j < K; j++) seed[j] = (float)(p[j] * (c[j] - cp_));
        break;
    }
    default: break;
    }
}

fl_status fz_obj_neuron(fz_ntab *t, const fl_layerset *ls, int r, int64_t idx, float w,
                        fl_err *e) {
    int l = 0;
    while (l + 1 < ls->n && idx >= ls->offset[l + 1]) l++;
    const int64_t j = idx - ls->offset[l];
    fl_tensor *s = fz_seed_get(&t->seeds, t->m, ls->value[l]);
    if (!s) return fl_fail(e, FL_ERR_NOMEM, "out of memory (seeds of the backward pass)");
    /* the neuron is a mean over outer x inner positions (neurons.h): d/dh = 1 / (T H W) at
     * each of them */
    fl_neuron_shape ns;
    if (!fl_neuron_shape_of(s, &ns))
        return fl_fail(e, FL_ERR_UNSUPPORTED, "layer '%s' has no neurons", ls->name[l]);
    const int64_t C = ns.width, S = ns.inner, T = ns.outer;
    const float d = w / (float)(S * T);
    for (int64_t o = 0; o < T; o++) {
        float *p = s->data + (((int64_t)r * T + o) * C + j) * S;
        for (int64_t k = 0; k < S; k++) p[k] += d;
    }
    return FL_OK;
}

static float rms(const float *v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return (float)sqrt(s / (double)n);
}

static float clip01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* DeepXplore's domain constraints on the normalised gradient d [c, h, w] (in place). */
static void constrain(const fz_campaign *cp, float *d, fl_rng *r) {
    const int C = cp->c, H = cp->h, W = cp->w;
    const int64_t n = cp->n;
    switch (cp->o->dx_constraint) {
    case FL_DX_LIGHT: { /* one brightness change for the whole image */
        double m = 0;
        for (int64_t i = 0; i < n; i++) m += d[i];
        const float v = m > 0 ? 1.0f : m < 0 ? -1.0f : 0.0f;
        for (int64_t i = 0; i < n; i++) d[i] = v;
        break;
    }
    case FL_DX_OCCLUSION: {
        const int *rc = cp->o->dx_rect;
        int x0 = rc[2] ? rc[0] : 0, y0 = rc[2] ? rc[1] : 0, w = rc[2] ? rc[2] : 10,
            h = rc[2] ? rc[3] : 10;
        for (int ch = 0; ch < C; ch++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    if (x < x0 || x >= x0 + w || y < y0 || y >= y0 + h) d[((int64_t)ch * H + y) * W + x] = 0;
        break;
    }
    case FL_DX_BLACKOUT: { /* a random square, darkened when the gradient there says darker */
        int P = cp->o->dx_patch > 0 ? cp->o->dx_patch : 10;
        if (P > H) P = H;
        if (P > W) P = W;
        int py = (int)fl_rng_below(r, (uint32_t)(H - P + 1)), px = (int)fl_rng_below(r, (uint32_t)(W - P + 1));
        double m = 0;
        for (int ch = 0; ch < C; ch++)
            for (int y = py; y < py + P; y++)
                for (int x = px; x < px + P; x++) m += d[((int64_t)ch * H + y) * W + x];
        for (int ch = 0; ch < C; ch++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int in = y >= py && y < py + P && x >= px && x < px + P;
                    d[((int64_t)ch * H + y) * W + x] = in && m < 0 ? -1.0f : 0.0f;
                }
        break;
    }
    default: break;
    }
}

void fz_obj_step(const fz_grad *g, const fz_campaign *cp, fz_lane *l, float *gr, fl_rng *r) {
    const int64_t n = cp->n;
    const uint8_t *x0 = cp->q.e[cp->q.e[l->entry].root].px;
    float *x = l->x;
    switch (cp->o->strategy) {
    case FL_FUZZ_FGSM:
        for (int64_t i = 0; i < n; i++) {
            float s = gr[i] > 0 ? 1.0f : gr[i] < 0 ? -1.0f : 0.0f;
            x[i] = clip01(x[i] + (float)g->eps * s);
        }
        break;
    case FL_FUZZ_PGD:
        for (int64_t i = 0; i < n; i++) {
            float s = gr[i] > 0 ? 1.0f : gr[i] < 0 ? -1.0f : 0.0f;
            float v = x[i] + (float)g->step * s, c = x0[i] / 255.0f;
            v = v < c - (float)g->eps ? c - (float)g->eps : v > c + (float)g->eps ? c + (float)g->eps : v;
            x[i] = clip01(v);
        }
        break;
    case FL_FUZZ_DLFUZZ:
    case FL_FUZZ_DEEPSA:
    case FL_FUZZ_DEEPXPLORE: {
        float k = 1.0f / (rms(gr, n) + 1e-5f);
        float s = (float)g->step;
        if (cp->o->strategy == FL_FUZZ_DEEPSA) s *= 0.5f + fl_rng_uniform(r);
        if (cp->o->strategy == FL_FUZZ_DEEPXPLORE) { /* constrained in place */
            for (int64_t i = 0; i < n; i++) gr[i] *= k;
            constrain(cp, gr, r);
            for (int64_t i = 0; i < n; i++) x[i] = clip01(x[i] + s * gr[i]);
        } else {
            for (int64_t i = 0; i < n; i++) x[i] = clip01(x[i] + s * k * gr[i]);
        }
        break;
    }
    default: break;
    }
    for (int64_t i = 0; i < n; i++) l->px[i] = (uint8_t)lrintf(x[i] * 255.0f);
}
