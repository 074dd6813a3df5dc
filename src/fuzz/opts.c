/* The campaign's options, the names of its strategies and selections, and the pixels-to-inputs
 * mapping: what every file of the campaign shares, below all of them. */
#include <string.h>

#include "fuzz/fuzz_int.h"

static const char *const strategy_names[] = {"deephunter", "tensorfuzz", "random", "dlfuzz",
                                             "deepxplore", "deepsa",     "fgsm",   "pgd",
                                             "fuzzgan"};
static const char *const select_names[] = {"default",  "uniform", "tensorfuzz",
                                           "deeptest", "prob",    "fifo"};

fl_status fl_fuzz_strategy_parse(const char *s, fl_fuzz_strategy *out, fl_err *e) {
    for (int i = 0; i < FL_FUZZ_STRATEGY_COUNT_; i++)
        if (!strcmp(s, strategy_names[i])) return *out = (fl_fuzz_strategy)i, FL_OK;
    return fl_fail(e, FL_ERR_ARG, "unknown strategy '%s' (deephunter, tensorfuzz, random, dlfuzz, "
                   "deepxplore, deepsa, fgsm, pgd, fuzzgan)", s);
}
const char *fl_fuzz_strategy_name(fl_fuzz_strategy s) {
    return s < FL_FUZZ_STRATEGY_COUNT_ ? strategy_names[s] : "?";
}
fl_status fl_fuzz_select_parse(const char *s, fl_fuzz_select *out, fl_err *e) {
    for (int i = 0; i < FL_QSEL_COUNT_; i++)
        if (!strcmp(s, select_names[i])) return *out = (fl_fuzz_select)i, FL_OK;
    return fl_fail(e, FL_ERR_ARG,
                   "unknown queue selection '%s' (uniform, tensorfuzz, deeptest, prob, fifo)",
                   s);
}
const char *fl_fuzz_select_name(fl_fuzz_select s) {
    return s < FL_QSEL_COUNT_ ? select_names[s] : "?";
}

void fl_fuzz_opts_default(fl_fuzz_opts *o) {
    memset(o, 0, sizeof *o);
    o->criterion = "nc:0.75";
    o->strategy = FL_FUZZ_DEEPHUNTER;
    o->alpha = o->beta = -1;
    o->gamma = 5;
    o->p_min = 0.01;
    o->tf_sigma = 25.5;
    o->tf_bound = 51;
    o->tf_threshold = 0.5;
    o->lambda = o->w_diff = o->nc_threshold = -1; /* the strategy's own */
    o->seed = 1;
}

void fz_to_input(const fz_campaign *cp, const uint8_t *px, int rows, float *x) {
    const int64_t hw = (int64_t)cp->h * cp->w;
    for (int r = 0; r < rows; r++)
        for (int ch = 0; ch < cp->c; ch++) {
            const float *lut = cp->lut[ch];
            const uint8_t *p = px + (int64_t)r * cp->n + ch * hw;
            float *y = x + (int64_t)r * cp->n + ch * hw;
            for (int64_t i = 0; i < hw; i++) y[i] = lut[p[i]];
        }
}

