/* The coverage object every criterion shares: item bitmaps or key sets, copy / reset / clone,
 * per-input "added" flags, and the argument and NaN checks around a criterion's update. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cover_int.h"

static size_t hit_bytes(const fl_cover *c) { return (size_t)(c->total + 7) / 8; }
/* The bitmap is allocated with 8 more zero bytes than it uses: fl_cover__bits loads 8 bytes
 * at any item (KMNC's gather 4). They are never set, so copy and reset need not touch them. */
#define HIT_PAD 8

static fl_status nomem(fl_err *e, const char *spec) {
    return fl_fail(e, FL_ERR_NOMEM, "out of memory for coverage criterion '%s'", spec);
}

void fl_cover_free(fl_cover *c) {
    if (!c) return;
    if (c->params_ref && --*c->params_ref == 0) {
        if (c->ops->free_params) c->ops->free_params(c->params);
        else free(c->params);
        free(c->params_ref);
    }
    for (int g = 0; g < c->n_groups; g++) free(c->group_name[g]);
    free(c->group_name);
    free(c->group_off);
    free(c->hit);
    fl_index_free(&c->keys);
    free(c->key_store);
    free(c->scratch);
    free(c->spec);
    free(c->detail);
    if (c->view) fl_cover_view_free(c->view);
    free(c->view);
    free(c);
}

/* Copy group names and offsets into c. */
static fl_status set_groups(fl_cover *c, int n, const char *const *names, const int64_t *off,
                            fl_err *e) {
    c->n_groups = n;
    c->group_name = calloc((size_t)n, sizeof(char *));
    c->group_off = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!c->group_name || !c->group_off) return nomem(e, c->spec);
    for (int g = 0; g < n; g++)
        if (!(c->group_name[g] = strdup(names[g]))) return nomem(e, c->spec);
    memcpy(c->group_off, off, sizeof(int64_t) * (size_t)(n + 1));
    return FL_OK;
}

fl_status fl_cover_layout(fl_cover *c, int n_groups, const char *const *names,
                          const int64_t *items, fl_err *e) {
    if (c->group_off || c->keyed || n_groups <= 0)
        return fl_fail(e, FL_ERR_ARG, "%s: layout set twice or with no groups", c->spec);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(n_groups + 1));
    if (!off) return nomem(e, c->spec);
    off[0] = 0;
    for (int g = 0; g < n_groups; g++) off[g + 1] = off[g] + items[g];
    fl_status st = set_groups(c, n_groups, names, off, e);
    c->total = off[n_groups];
    free(off);
    if (st != FL_OK) return st;
    if (c->total <= 0)
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s' has nothing to cover here",
                       c->spec);
    c->hit = calloc(hit_bytes(c) + HIT_PAD, 1);
    return c->hit ? FL_OK : nomem(e, c->spec);
}

fl_status fl_cover_layout_keys(fl_cover *c, size_t key_bytes, const char *group_name,
                               fl_err *e) {
    if (c->group_off || c->keyed || key_bytes == 0)
        return fl_fail(e, FL_ERR_ARG, "%s: layout set twice or with empty keys", c->spec);
    int64_t off[2] = {0, 0};
    fl_status st = set_groups(c, 1, &group_name, off, e);
    if (st != FL_OK) return st;
    c->keyed = 1;
    c->key_bytes = key_bytes;
    return FL_OK;
}

fl_status fl_cover_scratch(fl_cover *c, size_t bytes, fl_err *e) {
    void *p = realloc(c->scratch, bytes ? bytes : 1);
    if (!p) return nomem(e, c->spec);
    c->scratch = p;
    c->scratch_bytes = bytes;
    return FL_OK;
}

/* ---- key sets: open addressing on a 64-bit hash, keys stored in an arena ------------------- */
static uint64_t key_hash(const uint8_t *k, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < n; i++) h = (h ^ k[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return h ? h : 1; /* 0 marks an empty slot */
}

/* Index and arena sized for at least `keys` keys. */
static int key_reserve(fl_cover *c, int64_t keys) {
    if (keys > c->key_store_cap) {
        int64_t cap = c->key_store_cap ? c->key_store_cap : 64;
        while (cap < keys) cap *= 2;
        uint8_t *s = realloc(c->key_store, (size_t)cap * c->key_bytes);
        if (!s) return 0;
        c->key_store = s, c->key_store_cap = cap;
    }
    return fl_index_reserve(&c->keys, keys);
}

typedef struct key_probe {
    const fl_cover *c;
    const void *key;
} key_probe;

static int same_key(const void *ctx, int64_t i) {
    const key_probe *k = ctx;
    return memcmp(k->c->key_store + (size_t)i * k->c->key_bytes, k->key, k->c->key_bytes) == 0;
}

int fl_cover_hit_key(fl_cover *c, const void *key) {
    if (!key_reserve(c, c->covered + 1)) return -1;
    uint64_t h = key_hash(key, c->key_bytes);
    int64_t at;
    if (fl_index_find(&c->keys, h, same_key, &(key_probe){c, key}, &at) >= 0) return 0;
    fl_index_put(&c->keys, at, h, c->covered);
    memcpy(c->key_store + (size_t)c->covered * c->key_bytes, key, c->key_bytes);
    c->covered++;
    return 1;
}

/* ---- construction --------------------------------------------------------------------------- */
fl_status fl_cover_new_ops(const fl_cover_ops *ops, const fl_cover_ctx *ctx, const char *arg,
                           fl_cover **out, fl_err *e) {
    *out = NULL;
    if (!ctx || !ctx->ls || ctx->ls->n <= 0 || ctx->ls->total <= 0)
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s' needs a non-empty layer set",
                       ops->name);
    fl_cover *c = calloc(1, sizeof *c);
    if (!c) return nomem(e, ops->name);
    c->ops = ops;
    c->needs = ops->needs;
    c->ctx = *ctx;
    size_t n = strlen(ops->name) + (arg ? strlen(arg) + 1 : 0) + 1;
    c->spec = malloc(n);
    c->params_ref = malloc(sizeof(int));
    if (!c->spec || !c->params_ref) {
        fl_cover_free(c);
        return nomem(e, ops->name);
    }
    *c->params_ref = 1;
    snprintf(c->spec, n, arg ? "%s:%s" : "%s", ops->name, arg ? arg : "");
    fl_status st = ops->init(c, ctx, arg, e);
    if (st == FL_OK && !c->group_off)
        st = fl_fail(e, FL_ERR_ARG, "coverage criterion '%s' set no layout (bug in its init)",
                     c->spec);
    if (st != FL_OK) {
        fl_cover_free(c);
        return st;
    }
    *out = c;
    return FL_OK;
}

fl_status fl_cover_new(const fl_cover_ctx *ctx, const char *spec, fl_cover **out, fl_err *e) {
    *out = NULL;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    char name[32];
    const fl_cover_ops *ops = NULL;
    if (len > 0 && len < sizeof name) {
        memcpy(name, spec, len);
        name[len] = 0;
        ops = fl_cover_find(name);
    }
    if (!ops) {
        char known[256] = "";
        for (const fl_cover_ops *const *p = fl_cover_all(); *p; p++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                     p == fl_cover_all() ? "" : ", ", (*p)->usage);
        return fl_fail(e, FL_ERR_ARG, "unknown coverage criterion '%.*s' (known: %s)", (int)len,
                       spec, known);
    }
    if (colon && !colon[1])
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': empty parameter after ':' (%s)",
                       spec, ops->usage);
    return fl_cover_new_ops(ops, ctx, colon ? colon + 1 : NULL, out, e);
}

fl_status fl_cover_clone(const fl_cover *src, fl_cover **out, fl_err *e) {
    *out = NULL;
    fl_cover *c = calloc(1, sizeof *c);
    if (!c) return nomem(e, src->spec);
    c->ops = src->ops;
    c->needs = src->needs;
    c->topk_k = src->topk_k;
    c->ctx = src->ctx;
    c->params = src->params;
    c->params_ref = src->params_ref;
    ++*c->params_ref;
    c->spec = strdup(src->spec);
    if (src->detail && !(c->detail = strdup(src->detail))) {
        fl_cover_free(c);
        return nomem(e, src->spec);
    }
    c->total = src->total;
    c->keyed = src->keyed;
    c->key_bytes = src->key_bytes;
    fl_status st = c->spec ? set_groups(c, src->n_groups, (const char *const *)src->group_name,
                                        src->group_off, e)
                           : nomem(e, src->spec);
    if (st == FL_OK && !src->keyed && !(c->hit = calloc(hit_bytes(c) + HIT_PAD, 1)))
        st = nomem(e, src->spec);
    if (st == FL_OK && src->scratch) st = fl_cover_scratch(c, src->scratch_bytes, e);
    if (st == FL_OK) st = fl_cover_copy(c, src, e);
    if (st != FL_OK) {
        fl_cover_free(c);
        return st;
    }
    *out = c;
    return FL_OK;
}

fl_status fl_cover_copy(fl_cover *dst, const fl_cover *src, fl_err *e) {
    if (dst == src) return FL_OK;
    if (dst->ops != src->ops || strcmp(dst->spec, src->spec) != 0 || dst->total != src->total ||
        dst->keyed != src->keyed || dst->key_bytes != src->key_bytes)
        return fl_fail(e, FL_ERR_ARG, "cannot copy coverage '%s' into '%s': different criteria",
                       src->spec, dst->spec);
    if (!src->keyed) {
        memcpy(dst->hit, src->hit, hit_bytes(src));
    } else {
        if (!fl_index_copy(&dst->keys, &src->keys)) return nomem(e, src->spec);
        if (dst->key_store_cap < src->covered) {
            uint8_t *s = realloc(dst->key_store, (size_t)src->key_store_cap * src->key_bytes);
            if (!s) return nomem(e, src->spec);
            dst->key_store = s, dst->key_store_cap = src->key_store_cap;
        }
        if (src->covered)
            memcpy(dst->key_store, src->key_store, (size_t)src->covered * src->key_bytes);
    }
    dst->covered = src->covered;
    return FL_OK;
}

void fl_cover_reset(fl_cover *c) {
    if (c->hit) memset(c->hit, 0, hit_bytes(c));
    fl_index_clear(&c->keys);
    c->covered = 0;
}

void fl_cover_stats(const fl_cover *c, int64_t *covered, int64_t *total) {
    if (covered) *covered = c->covered;
    if (total) *total = c->total;
}

void fl_cover_group_stats(const fl_cover *c, int g, int64_t *covered, int64_t *total) {
    if (c->keyed) {
        fl_cover_stats(c, covered, total);
        return;
    }
    int64_t n = 0;
    for (int64_t i = c->group_off[g]; i < c->group_off[g + 1]; i++) n += fl_cover_is_hit(c, i);
    if (covered) *covered = n;
    if (total) *total = c->group_off[g + 1] - c->group_off[g];
}

/* ---- update ---------------------------------------------------------------------------------- */
fl_status fl_cover__update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int *any,
                           fl_err *e) {
    uint8_t *own = NULL;
    if (!added && b->n > 0) {
        if (!(own = malloc((size_t)b->n))) return nomem(e, c->spec);
        added = own;
    }
    if (b->n > 0) memset(added, 0, (size_t)b->n);
    int64_t before = c->covered;
    fl_status st = b->n > 0 ? c->ops->update(c, b, added, e) : FL_OK;
    if (any) *any = c->covered > before;
    free(own);
    return st;
}

fl_status fl_cover__check_batch(const fl_layerset *ls, const fl_cover_batch *b, unsigned needs,
                                const char *who, fl_err *e) {
    if (b->n < 0 || (b->n > 0 && !b->mean))
        return fl_fail(e, FL_ERR_ARG, "%s: batch of %d inputs without neuron values", who, b->n);
    if ((needs & FL_COVER_NEED_ABSMEAN) && b->n > 0 && !b->absmean)
        return fl_fail(e, FL_ERR_ARG, "%s needs the channel means of |x| (absmean) in the batch",
                       who);
    if ((needs & FL_COVER_NEED_RANGE) && b->n > 0 && (!b->lmin || !b->lmax))
        return fl_fail(e, FL_ERR_ARG, "%s needs each layer's min and max (lmin, lmax) in the batch",
                       who);
    if ((needs & FL_COVER_NEED_MODEL) && b->n > 0 && !b->m)
        return fl_fail(e, FL_ERR_ARG, "%s needs the model after its forward pass in the batch",
                       who);
    fl_status st = fl_cover__check_finite(b->mean, b->n, ls->total, ls->name, ls->offset, ls->n,
                                          "neuron value", e);
    if (st == FL_OK && (needs & FL_COVER_NEED_ABSMEAN))
        st = fl_cover__check_finite(b->absmean, b->n, ls->total, ls->name, ls->offset, ls->n,
                                    "mean |neuron value|", e);
    return st;
}

fl_status fl_cover_update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int *any,
                          fl_err *e) {
    fl_status st = fl_cover__check_batch(c->ctx.ls, b, c->needs, c->spec, e);
    return st != FL_OK ? st : fl_cover__update(c, b, added, any, e);
}

fl_status fl_cover_update_model(fl_cover *c, const fl_model *m, uint8_t *added, int *any,
                                fl_err *e) {
    if (!c->view && !(c->view = calloc(1, sizeof *c->view))) return nomem(e, c->spec);
    fl_status st = fl_cover_view_fill(c->view, c->ctx.ls, m, c->needs, e);
    return st != FL_OK ? st : fl_cover__update(c, &c->view->b, added, any, e);
}

/* ---- argument helpers for criteria ----------------------------------------------------------- */
fl_status fl_cover__args(const fl_cover *c, const char *arg, char *buf, size_t buf_len,
                         char **parts, int max, int *n, fl_err *e) {
    *n = 0;
    if (!arg) return FL_OK;
    if (strlen(arg) >= buf_len)
        return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': parameters too long (%s)", c->spec,
                       c->ops->usage);
    strcpy(buf, arg);
    for (char *p = buf;;) {
        if (*n == max)
            return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': too many parameters (%s)",
                           c->spec, c->ops->usage);
        parts[(*n)++] = p;
        char *colon = strchr(p, ':');
        if (!colon) break;
        *colon = 0;
        p = colon + 1;
    }
    for (int i = 0; i < *n; i++)
        if (!*parts[i])
            return fl_fail(e, FL_ERR_ARG, "coverage criterion '%s': empty parameter (%s)",
                           c->spec, c->ops->usage);
    return FL_OK;
}

fl_status fl_cover__num(const fl_cover *c, const char *s, double lo, double hi, double *out,
                        fl_err *e) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < lo || v > hi)
        return fl_fail(e, FL_ERR_ARG,
                       "coverage criterion '%s': '%s' is not a number in [%g, %g] (%s)", c->spec,
                       s, lo, hi, c->ops->usage);
    *out = v;
    return FL_OK;
}

fl_status fl_cover__int(const fl_cover *c, const char *s, int64_t lo, int64_t hi, int64_t *out,
                        fl_err *e) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return fl_fail(e, FL_ERR_ARG,
                       "coverage criterion '%s': '%s' is not an integer in [%lld, %lld] (%s)",
                       c->spec, s, (long long)lo, (long long)hi, c->ops->usage);
    *out = v;
    return FL_OK;
}
