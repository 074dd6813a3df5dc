/* Internals shared by the coverage sources (not part of the public API). */
#ifndef FLARE_COVER_INT_H
#define FLARE_COVER_INT_H

#include <string.h>

#include "flare/cover.h"

/* FL_ERR_NAN naming input, layer and neuron when v[n, total] holds a NaN or Inf; `what` starts
 * the message ("neuron value"). In finite.c. */
fl_status fl_cover__check_finite(const float *v, int n, int64_t total, char *const *names,
                                 const int64_t *offset, int n_layers, const char *what,
                                 fl_err *e);

/* FL_ERR_ARG when b lacks what `needs` asks for; FL_ERR_NAN on a non-finite value. */
fl_status fl_cover__check_batch(const fl_layerset *ls, const fl_cover_batch *b, unsigned needs,
                                const char *who, fl_err *e);

/* update without the argument and NaN checks (the caller has done them). */
fl_status fl_cover__update(fl_cover *c, const fl_cover_batch *b, uint8_t *added, int *any,
                           fl_err *e);

/* Split a criterion's argument ("0.5:deepxplore") at ':' into at most max parts (pointers
 * into buf, a copy of arg of size buf_len). Fails naming c->spec and ops->usage when there
 * are more. *n = 0 for a NULL arg. */
fl_status fl_cover__args(const fl_cover *c, const char *arg, char *buf, size_t buf_len,
                         char **parts, int max, int *n, fl_err *e);
/* A finite number in [lo, hi] / an integer in [lo, hi], or FL_ERR_ARG naming c->spec. */
fl_status fl_cover__num(const fl_cover *c, const char *s, double lo, double hi, double *out,
                        fl_err *e);
fl_status fl_cover__int(const fl_cover *c, const char *s, int64_t lo, int64_t hi, int64_t *out,
                        fl_err *e);
/* The layer set's names as an array for fl_cover_layout. */
#define FL_LAYER_NAMES(ls) ((const char *const *)(ls)->name)

/* Top-k lists of a batch (see fl_cover_batch.topk): length per input, the fill's scratch (in
 * floats, for one thread), and the fill. m (may be NULL) lets dense Relu layers reuse their
 * input's list. */
int64_t fl_cover__topk_len(const fl_layerset *ls, int64_t k);
int64_t fl_cover__topk_scratch(int64_t k);
void fl_cover__topk_fill(const fl_layerset *ls, const fl_model *m, const float *mean, int n,
                         int64_t k, int32_t *out, float *scratch);

/* The coverage bits of items [item, item + n) as the low n bits, 1 <= n <= 56 (the bitmap
 * carries zero padding, so the 8-byte load stays inside it). */
static inline uint64_t fl_cover__bits(const fl_cover *c, int64_t item, int n) {
    uint64_t w;
    memcpy(&w, c->hit + (item >> 3), sizeof w);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w); /* byte i / 8 holds item i's bit: the first byte is the lowest */
#endif
    return (w >> (item & 7)) & ((1ull << n) - 1);
}

/* Built-in criteria. */
extern const fl_cover_ops fl_cover_nc, fl_cover_kmnc, fl_cover_nbc, fl_cover_snac,
    fl_cover_tknc, fl_cover_tknp;

#endif
