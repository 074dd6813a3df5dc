/* The NaN / Inf check of neuron values that the coverage sources share (profiles, views, the
 * coverage update): an error names the input, the layer and the neuron. */
#include <math.h>

#include "cover_int.h"

/* The layer of flat neuron index j (for messages). */
static int layer_of(const int64_t *offset, int n_layers, int64_t j) {
    int l = 0;
    while (l + 1 < n_layers && offset[l + 1] <= j) l++;
    return l;
}

/* 1 when some float of v[0..n) is NaN or infinite: the engine's vectorised check of a forward
 * pass's input (every batch of the coverage path goes through this). */
static int any_nonfinite(const float *v, int64_t n) {
    fl_tensor t = {.ndim = 1, .shape = {n}, .size = n, .data = (float *)(uintptr_t)v};
    return fl_tensor_find_nonfinite(&t) >= 0;
}

fl_status fl_cover__check_finite(const float *v, int n, int64_t total, char *const *names,
                                 const int64_t *offset, int n_layers, const char *what,
                                 fl_err *e) {
    if (!any_nonfinite(v, (int64_t)n * total)) return FL_OK;
    for (int i = 0; i < n; i++) {
        const float *r = v + (int64_t)i * total;
        for (int64_t j = 0; j < total; j++) {
            if (isfinite(r[j])) continue;
            int l = layer_of(offset, n_layers, j);
            return fl_fail(e, FL_ERR_NAN, "%s of input %d, layer '%s' neuron %lld is %s", what, i,
                           names[l], (long long)(j - offset[l]), isnan(r[j]) ? "NaN" : "infinite");
        }
    }
    return FL_OK;
}
