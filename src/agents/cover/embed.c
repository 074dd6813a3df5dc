/* A built-in text embedding for the "semantic cluster of the final output" coverage feature,
 * and the online clustering over it.
 *
 * Why hashed character n-grams: flare must run with nothing installed, and the feature only
 * has to tell "the system answered in a different way" from "the same kind of answer with
 * other details". Character 3-grams capture wording (and work for Chinese, where a character
 * is roughly a morpheme) without a tokenizer or a vocabulary; the hashing trick (Weinberger
 * et al. 2009, "Feature hashing for large scale multitask learning") with a hashed sign keeps
 * the collisions unbiased. Normalising digit runs to "0" makes "the answer is 12" and "the
 * answer is 12345" the same kind of output.
 *
 * Why leader clustering (Hartigan 1975): it is online, one pass, deterministic for a given
 * order, and a cluster, once made, never moves — so a coverage feature seen stays the same
 * feature. Joining the first leader within the radius (Hartigan's rule) rather than the
 * nearest lets the common case stop early: most outputs resemble ones seen early on.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"

/* Decode one UTF-8 code point at s[*i] (i < len); invalid or truncated sequences yield
 * U+FFFD and consume one byte. */
static uint32_t utf8_next(const unsigned char *s, size_t len, size_t *i) {
    unsigned c = s[*i];
    int n;
    uint32_t cp, min;
    if (c < 0x80) return (*i)++, c;
    if ((c & 0xe0) == 0xc0) n = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) n = 2, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) n = 3, cp = c & 0x07, min = 0x10000;
    else return (*i)++, 0xfffd;
    if (*i + (size_t)n >= len) return (*i)++, 0xfffd; /* truncated */
    for (int k = 1; k <= n; k++) {
        unsigned d = s[*i + (size_t)k];
        if ((d & 0xc0) != 0x80) return (*i)++, 0xfffd;
        cp = cp << 6 | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (*i)++, 0xfffd;
    *i += (size_t)n + 1;
    return cp;
}

static int is_space(uint32_t c) {
    return c == ' ' || (c >= 9 && c <= 13) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

static int is_digit(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 0xff10 && c <= 0xff19); }

typedef struct gram_state {
    uint32_t ring[8];
    int n, have, grams, dim;
    float *v;
} gram_state;

static void add_gram(gram_state *g) {
    uint64_t h = FL_AGHASH_INIT;
    for (int k = 0; k < g->n; k++) h = fl_aghash_u64(h, g->ring[(g->have - g->n + k) % 8]);
    h = fl_aghash_final(h);
    g->v[(h >> 32) % (uint64_t)g->dim] += (h & 1) ? -1.0f : 1.0f;
    g->grams++;
}

static void push(gram_state *g, uint32_t c) {
    g->ring[g->have % 8] = c;
    g->have++;
    if (g->have >= g->n) add_gram(g);
}

int fl_embed_text(const char *s, size_t len, int ngram, float *v, int dim) {
    memset(v, 0, (size_t)dim * sizeof *v);
    if (ngram < 1) ngram = 1;
    if (ngram > 8) ngram = 8;
    gram_state g = {.n = ngram, .dim = dim, .v = v};
    const unsigned char *u = (const unsigned char *)s;
    uint32_t last = ' ';
    int content = 0;
    push(&g, ' ');
    for (size_t i = 0; s && i < len;) {
        uint32_t c = utf8_next(u, len, &i);
        if (is_space(c)) c = ' ';
        else if (is_digit(c)) c = '0';
        else if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
        if ((c == ' ' || c == '0') && c == last) continue; /* collapse runs */
        if (c != ' ') content = 1;
        push(&g, c);
        last = c;
    }
    if (!content) {
        memset(v, 0, (size_t)dim * sizeof *v);
        return 0;
    }
    if (last != ' ') push(&g, ' ');
    if (g.grams == 0) { /* shorter than one n-gram: hash what there is */
        g.n = g.have;
        add_gram(&g);
    }
    double ss = 0;
    for (int k = 0; k < dim; k++) ss += (double)v[k] * v[k];
    if (ss > 0) {
        float inv = (float)(1.0 / sqrt(ss));
        for (int k = 0; k < dim; k++) v[k] *= inv;
    }
    return g.grams;
}

struct fl_clusters {
    int dim, n, cap, max;
    float min_cos;
    float *leaders; /* [cap][dim] */
};

fl_clusters *fl_clusters_new(int dim, float min_cos, int max_clusters) {
    fl_clusters *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->dim = dim;
    c->min_cos = min_cos;
    c->max = max_clusters > 0 ? max_clusters : 1;
    return c;
}

void fl_clusters_free(fl_clusters *c) {
    if (!c) return;
    free(c->leaders);
    free(c);
}

int fl_clusters_count(const fl_clusters *c) { return c->n; }

/* <a, b> with 16 independent partial sums in a fixed order: the compiler vectorises it (a
 * plain running sum cannot be reordered without -ffast-math), and the result does not depend
 * on threads or libraries. */
static float dot(const float *a, const float *b, int n) {
    float acc[16] = {0};
    int k = 0;
    for (; k + 16 <= n; k += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[k + j] * b[k + j];
    for (; k < n; k++) acc[k & 15] += a[k] * b[k];
    float s = 0;
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
}

int fl_clusters_nearest(const fl_clusters *c, const float *v, float *cos) {
    int best = -1;
    float bc = -2;
    for (int i = 0; i < c->n; i++) {
        float d = dot(c->leaders + (size_t)i * (size_t)c->dim, v, c->dim);
        if (d > bc) bc = d, best = i; /* strict: ties go to the older cluster */
    }
    if (cos) *cos = bc;
    return best;
}

int fl_clusters_find(const fl_clusters *c, const float *v) {
    /* Hartigan's leader algorithm: the first leader within the radius, so the common case (an
     * output like the ones seen early) stops after a few dot products */
    for (int i = 0; i < c->n; i++)
        if (dot(c->leaders + (size_t)i * (size_t)c->dim, v, c->dim) >= c->min_cos) return i;
    return c->n >= c->max ? fl_clusters_nearest(c, v, NULL) : -1;
}

int fl_clusters_assign(fl_clusters *c, const float *v) {
    int i = fl_clusters_find(c, v);
    if (i >= 0) return i;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        if (cap > c->max) cap = c->max;
        float *p = realloc(c->leaders, (size_t)cap * (size_t)c->dim * sizeof *p);
        if (!p) return -2;
        c->leaders = p;
        c->cap = cap;
    }
    memcpy(c->leaders + (size_t)c->n * (size_t)c->dim, v, (size_t)c->dim * sizeof *v);
    return c->n++;
}
