/* Winograd convolution for 3x3 stride-1 Conv in inference (see op_conv.h for the algebra and
 * the choices). Per block of output tiles (flattened over the batch, so that small maps of
 * several images share a block and a large map of one image splits over the threads):
 *
 *     V[xi][c][j]  = (B^T d_j B)[xi]      input tile j of channel c, d_j [a, a]
 *     P[xi]        = U[xi] · V[xi]         [M, C] x [C, nt]: one GEMM per xi = 0..a*a-1
 *     y_j[m]       = A^T P[.][m][j] A      + bias[m], clipped at the ragged edges
 *
 * with U[xi][m][c] = (G w[m][c] G^T)[xi] made once per weight change. V and P are a thread's
 * scratch, sized for one block so that they stay near the cache. */
#include <string.h>

#include "core/simd.h"
#include "flare/model.h"
#include "nn/op_conv.h"

int fl_conv_wino_force = -1;

/* ---- 1-D transforms (applied to columns, then to rows) ----------------------------------------
 * F(2,3): points 0, 1, -1 (and infinity); F(4,3): 0, +-1, +-2 (and infinity), the matrices of
 * Lavin & Gray (2015). Each takes `a` inputs s apart and writes to d, t apart. T is float (the
 * weights, once per change) or v8f: eight tiles side by side, one per lane, so that a
 * transform is a few dozen vector operations for eight tiles. */
typedef float v8f __attribute__((vector_size(32)));

#define BT4(T)                                                                              \
    T x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s];                                   \
    d[0] = x0 - x2;                                                                         \
    d[t] = x1 + x2;                                                                         \
    d[2 * t] = x2 - x1;                                                                     \
    d[3 * t] = x1 - x3;
#define AT4(T)                                                                              \
    T x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s];                                   \
    d[0] = x0 + x1 + x2;                                                                    \
    d[t] = x1 - x2 - x3;
#define BT6(T)                                                                              \
    T x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s], x4 = x[4 * s], x5 = x[5 * s];     \
    T a13 = x1 - x3, p12 = x1 + x2, m12 = x1 - x2;                                          \
    d[0] = 4.0f * x0 - 5.0f * x2 + x4;                                                      \
    d[t] = x3 + x4 - 4.0f * p12;                                                            \
    d[2 * t] = 4.0f * m12 - x3 + x4;                                                        \
    d[3 * t] = x4 - x2 - 2.0f * a13;                                                        \
    d[4 * t] = x4 - x2 + 2.0f * a13;                                                        \
    d[5 * t] = 4.0f * x1 - 5.0f * x3 + x5;
#define AT6(T)                                                                              \
    T x0 = x[0], x1 = x[s], x2 = x[2 * s], x3 = x[3 * s], x4 = x[4 * s], x5 = x[5 * s];     \
    T p12 = x1 + x2, m12 = x1 - x2, p34 = x3 + x4, m34 = x3 - x4;                           \
    d[0] = x0 + p12 + p34;                                                                  \
    d[t] = m12 + 2.0f * m34;                                                                \
    d[2 * t] = p12 + 4.0f * p34;                                                            \
    d[3 * t] = m12 + 8.0f * m34 + x5;

#define DEF1D(name, T, body)                                                                \
    static inline __attribute__((always_inline)) void name(const T *x, int s, T *d, int t) { \
        body(T)                                                                             \
    }
DEF1D(bt4v, v8f, BT4)
DEF1D(at4v, v8f, AT4)
DEF1D(bt6v, v8f, BT6)
DEF1D(at6v, v8f, AT6)

static inline __attribute__((always_inline)) void g4(const float *x, int s, float *d, int t) {
    float x0 = x[0], x1 = x[s], x2 = x[2 * s];
    d[0] = x0;
    d[t] = 0.5f * (x0 + x1 + x2);
    d[2 * t] = 0.5f * (x0 - x1 + x2);
    d[3 * t] = x2;
}

static inline __attribute__((always_inline)) void g6(const float *x, int s, float *d, int t) {
    float x0 = x[0], x1 = x[s], x2 = x[2 * s];
    d[0] = 0.25f * x0;
    d[t] = -(x0 + x1 + x2) / 6.0f;
    d[2 * t] = -(x0 - x1 + x2) / 6.0f;
    d[3 * t] = x0 / 24.0f + x1 / 12.0f + x2 / 6.0f;
    d[4 * t] = x0 / 24.0f - x1 / 12.0f + x2 / 6.0f;
    d[5 * t] = x2;
}

/* ---- planning ------------------------------------------------------------------------------ */

/* The 3x3 convolutions this path computes: one group, stride 1, dilation 1, any pads. */
static int wino_fits(const fl_lowered *L) {
    const fl_conv2d_geom *g = &L->g;
    return L->group == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
           g->dw == 1 && g->oh >= 2 && g->ow >= 2;
}

/* Tiles of side m over the batch. */
static int64_t tiles_of(const fl_lowered *L, int m) {
    return (int64_t)L->n * ((L->g.oh + m - 1) / m) * ((L->g.ow + m - 1) / m);
}

int fl_conv_wino_pick(const fl_lowered *L, int training) {
    if (training || !wino_fits(L)) return 0;
    if (fl_conv_wino_force >= 0) return fl_conv_wino_force;
    /* Measured per shape (docs/onnx.md, ResNet and VGG layers): the a*a GEMMs have one column
     * per tile, and below a few dozen columns per thread OpenBLAS's per-call packing eats
     * what the multiplies save, so F(4,3) where each thread gets enough 6x6 tiles, F(2,3)
     * (4x as many tiles) where it does not but gets enough 4x4 ones (ResNet's 256 channels
     * at 14x14, batch 1), else im2col. Under 16 channels either way the GEMMs are too thin. */
    int threads = fl_parallel_slots();
    if (L->g.c < 16 || L->zc < 16) return 0;
    if (tiles_of(L, 4) >= (int64_t)FL_WINO_MIN_TILES * threads) return 4;
    if (tiles_of(L, 2) >= (int64_t)FL_WINO_MIN_TILES * threads) return 2;
    return 0;
}

static fl_status grow(float **buf, size_t *cap, size_t need) {
    if (need <= *cap) return FL_OK;
    fl_free(*buf);
    *buf = fl_alloc(need * sizeof(float));
    *cap = *buf ? need : 0;
    return *buf ? FL_OK : FL_ERR_NOMEM;
}

/* Floats of V + P per thread that a block aims for: a few hundred KiB, near L2. */
size_t fl_conv_wino_budget = (size_t)1 << 20;
int fl_conv_wino_min_block = 64;

fl_status fl_wino_plan(fl_wino *Z, const fl_lowered *L, int m, const fl_node *node, fl_err *e) {
    Z->m = m;
    Z->ready = 0;
    if (!m) return FL_OK;
    const fl_conv2d_geom *g = &L->g;
    int a = m + 2, aa = a * a, C = g->c, M = L->zc;
    Z->th = (g->oh + m - 1) / m;
    Z->tw = (g->ow + m - 1) / m;
    Z->tiles = Z->th * Z->tw;
    int64_t total = tiles_of(L, m);
    int threads = fl_parallel_slots();
    size_t per_tile = (size_t)aa * (C + M);
    int64_t bl = (int64_t)(fl_conv_wino_budget / per_tile);
    bl = bl < fl_conv_wino_min_block ? fl_conv_wino_min_block : bl / 8 * 8;
    /* every thread gets work: at most a thread's share of the tiles */
    int64_t share = (total + threads - 1) / threads;
    if (bl > share) bl = share;
    if (bl < 1) bl = 1;
    Z->block = (int)bl;
    Z->ld = (int)((bl + 7) / 8 * 8);
    Z->blocks = (int)((total + bl - 1) / bl);
    fl_status st = grow(&Z->U, &Z->u_cap, (size_t)aa * M * C);
    if (st == FL_OK) st = grow(&Z->wcopy, &Z->w_cap, (size_t)M * C * 9);
    if (st == FL_OK && Z->slots < threads) {
        float **ns = fl_alloc(sizeof *ns * (size_t)threads);
        size_t *nc = fl_alloc(sizeof *nc * (size_t)threads);
        if (!ns || !nc) {
            fl_free(ns);
            fl_free(nc);
            st = FL_ERR_NOMEM;
        } else {
            for (int t = 0; t < threads; t++) {
                ns[t] = t < Z->slots ? Z->scratch[t] : NULL;
                nc[t] = t < Z->slots ? Z->scratch_cap[t] : 0;
            }
            fl_free(Z->scratch);
            fl_free(Z->scratch_cap);
            Z->scratch = ns;
            Z->scratch_cap = nc;
            Z->slots = threads;
        }
    }
    for (int t = 0; t < Z->slots && st == FL_OK; t++)
        st = grow(&Z->scratch[t], &Z->scratch_cap[t], per_tile * (size_t)Z->ld);
    if (st != FL_OK)
        return fl_fail(e, st, "node '%s' (Conv): out of memory for Winograd buffers", node->name);
    return FL_OK;
}

void fl_wino_free(fl_wino *Z) {
    fl_free(Z->U);
    fl_free(Z->wcopy);
    for (int t = 0; t < Z->slots; t++) fl_free(Z->scratch[t]);
    fl_free(Z->scratch);
    fl_free(Z->scratch_cap);
    memset(Z, 0, sizeof *Z);
}

/* ---- the weight transform: U[xi][m][c] = (G w[m][c] G^T)[xi] ---------------------------------- */
typedef struct wino_job {
    fl_wino *Z;
    const fl_lowered *L;
    const float *W, *bias, *X;
    float *Y;
} wino_job;

static inline __attribute__((always_inline)) void weights_rows(const wino_job *J, int64_t lo,
                                                               int64_t hi, int a) {
    const int C = J->L->g.c, M = J->L->zc;
    const size_t plane = (size_t)M * C;
    for (int64_t mo = lo; mo < hi; mo++)
        for (int c = 0; c < C; c++) {
            const float *w = J->W + ((size_t)mo * C + c) * 9;
            float t[6 * 3], u[36];
            for (int k = 0; k < 3; k++) { /* t = G w: column k of w */
                if (a == 4) g4(w + k, 3, t + k, 3);
                else g6(w + k, 3, t + k, 3);
            }
            for (int r = 0; r < a; r++) { /* u = t G^T: row r of t */
                if (a == 4) g4(t + 3 * r, 1, u + a * r, 1);
                else g6(t + 3 * r, 1, u + a * r, 1);
            }
            float *U = J->Z->U + (size_t)mo * C + c;
            for (int xi = 0; xi < a * a; xi++) U[xi * plane] = u[xi];
        }
}

static void weights_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const wino_job *J = ctx;
    if (J->Z->m == 2) weights_rows(J, lo, hi, 4);
    else weights_rows(J, lo, hi, 6);
}

/* ---- tiles --------------------------------------------------------------------------------- */

/* Tiles [t0, t0 + nt) of the batch (tile t: image t / tiles, row (t % tiles) / tw, column
 * (t % tiles) % tw): V, then the a*a GEMMs into P, then the outputs. Eight tiles at a time, one
 * per lane; a short last group repeats its last tile in the spare lanes (V's rows are ld >= nt
 * rounded up to 8 floats long), which are computed and never stored. */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define STORE8(p, v) memcpy((p), &(v), sizeof(v8f))

static inline __attribute__((always_inline)) void block_run(const wino_job *J, float *buf,
                                                            int64_t t0, int nt, int m) {
    const fl_wino *Z = J->Z;
    const fl_conv2d_geom *g = &J->L->g;
    const int a = m + 2, aa = a * a, C = g->c, M = J->L->zc, H = g->h, Wd = g->w;
    const int ld = Z->ld;
    float *V = buf, *P = buf + (size_t)aa * C * ld; /* V [aa][C][ld], P [aa][M][ld] */
    const size_t vstep = (size_t)C * ld, pstep = (size_t)M * ld;
    for (int j = 0; j < nt; j += 8) {
        /* where each lane's tile starts in the input (image offset, row, column) */
        size_t xoff[8];
        int iy0[8], ix0[8], inside = 1;
        for (int k = 0; k < 8; k++) {
            int64_t t = t0 + (j + k < nt ? j + k : nt - 1);
            int img = (int)(t / Z->tiles), r = (int)(t % Z->tiles);
            iy0[k] = r / Z->tw * m - g->pt;
            ix0[k] = r % Z->tw * m - g->pl;
            xoff[k] = (size_t)img * C * H * Wd;
            inside &= iy0[k] >= 0 && ix0[k] >= 0 && iy0[k] + a <= H && ix0[k] + a <= Wd;
        }
        for (int c = 0; c < C; c++) {
            const size_t plane = (size_t)c * H * Wd;
            float d[36][8];
            v8f s[36], v[36];
            if (inside) {
                for (int k = 0; k < 8; k++) {
                    const float *x = J->X + xoff[k] + plane + (size_t)iy0[k] * Wd + ix0[k];
                    for (int y = 0; y < a; y++)
                        for (int q = 0; q < a; q++) d[y * a + q][k] = x[(size_t)y * Wd + q];
                }
            } else {
                for (int k = 0; k < 8; k++) {
                    const float *x = J->X + xoff[k] + plane;
                    for (int y = 0; y < a; y++)
                        for (int q = 0; q < a; q++) {
                            int iy = iy0[k] + y, ix = ix0[k] + q;
                            d[y * a + q][k] = iy >= 0 && iy < H && ix >= 0 && ix < Wd
                                                  ? x[(size_t)iy * Wd + ix] : 0.0f;
                        }
                }
            }
            for (int i = 0; i < aa; i++) LOAD8(v[i], d[i]);
            for (int q = 0; q < a; q++) { /* s = B^T d: columns */
                if (m == 2) bt4v(v + q, a, s + q, a);
                else bt6v(v + q, a, s + q, a);
            }
            for (int y = 0; y < a; y++) { /* v = s B: rows */
                if (m == 2) bt4v(s + y * a, 1, v + y * a, 1);
                else bt6v(s + y * a, 1, v + y * a, 1);
            }
            float *dst = V + (size_t)c * ld + j;
            for (int xi = 0; xi < aa; xi++) STORE8(dst + xi * vstep, v[xi]);
        }
    }
    /* one GEMM per transformed tap (inline: we are inside a parallel range) */
    for (int xi = 0; xi < aa; xi++)
        fl_sgemm(0, 0, M, nt, C, 1.0f, Z->U + (size_t)xi * M * C, C, V + xi * vstep, ld, 0.0f,
                 P + xi * pstep, ld);
    /* output transform */
    for (int j = 0; j < nt; j += 8) {
        int lanes = nt - j < 8 ? nt - j : 8;
        size_t yoff[8];
        int hh[8], ww[8];
        for (int k = 0; k < lanes; k++) {
            int64_t t = t0 + j + k;
            int img = (int)(t / Z->tiles), r = (int)(t % Z->tiles);
            int oy0 = r / Z->tw * m, ox0 = r % Z->tw * m;
            hh[k] = g->oh - oy0 < m ? g->oh - oy0 : m;
            ww[k] = g->ow - ox0 < m ? g->ow - ox0 : m;
            yoff[k] = ((size_t)img * M * g->oh + oy0) * g->ow + ox0;
        }
        for (int mo = 0; mo < M; mo++) {
            const float *p = P + (size_t)mo * ld + j;
            v8f q[36], s[24], o[16];
            /* lanes past nt read columns the GEMM did not write: computed, never stored */
            for (int xi = 0; xi < aa; xi++) LOAD8(q[xi], p + xi * pstep);
            for (int x = 0; x < a; x++) { /* s = A^T q: columns */
                if (m == 2) at4v(q + x, a, s + x, a);
                else at6v(q + x, a, s + x, a);
            }
            for (int y = 0; y < m; y++) { /* o = s A: rows */
                if (m == 2) at4v(s + y * a, 1, o + y * m, 1);
                else at6v(s + y * a, 1, o + y * m, 1);
            }
            float b = J->bias ? J->bias[mo] : 0.0f, out[16][8];
            for (int i = 0; i < m * m; i++) STORE8(out[i], o[i]);
            float *y = J->Y + (size_t)mo * g->oh * g->ow;
            for (int k = 0; k < lanes; k++) {
                float *yk = y + yoff[k];
                if (hh[k] == m && ww[k] == m) {
                    for (int u = 0; u < m; u++)
                        for (int w = 0; w < m; w++) yk[(size_t)u * g->ow + w] = out[u * m + w][k] + b;
                } else {
                    for (int u = 0; u < hh[k]; u++)
                        for (int w = 0; w < ww[k]; w++)
                            yk[(size_t)u * g->ow + w] = out[u * m + w][k] + b;
                }
            }
        }
    }
}

FL_HOT_CLONES
static void tiles_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    const wino_job *J = ctx;
    const fl_wino *Z = J->Z;
    int64_t total = (int64_t)J->L->n * Z->tiles;
    for (int64_t b = lo; b < hi; b++) {
        int64_t t0 = b * Z->block;
        int nt = (int)(total - t0 < Z->block ? total - t0 : Z->block);
        if (Z->m == 2) block_run(J, Z->scratch[tid], t0, nt, 2);
        else block_run(J, Z->scratch[tid], t0, nt, 4);
    }
}

void fl_wino_forward(fl_wino *Z, const fl_lowered *L, const float *W, const float *bias,
                     const float *X, float *Y) {
    size_t wn = (size_t)L->zc * L->g.c * 9;
    wino_job J = {.Z = Z, .L = L, .W = W, .bias = bias, .X = X, .Y = Y};
    /* the weights may have been edited since the last pass (fl_model_value, a mutation):
     * comparing with the copy U was made from reads 2x the weights, a few percent of the
     * convolution's time where this path is picked, and is exact */
    if (!Z->ready || memcmp(Z->wcopy, W, wn * sizeof(float)) != 0) {
        memcpy(Z->wcopy, W, wn * sizeof(float));
        fl_parallel_for(L->zc, weights_range, &J);
        Z->ready = 1;
    }
    fl_parallel_for(Z->blocks, tiles_range, &J);
}
