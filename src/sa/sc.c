/* Surprise coverage (LSC, DSC): which of k buckets over [lower, upper] the SA values of a
 * test set hit. FL_SC_SADL reproduces sadl's get_sc bit for bit: the bucket of v is
 * np.digitize(v, np.linspace(lower, upper, k)), with the edges computed as numpy computes
 * them (lower + i * step, the last one exactly upper). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flare/sa.h"

fl_status fl_sc_mode_parse(const char *s, fl_sc_mode *out, fl_err *e) {
    if (!strcmp(s, "sadl")) *out = FL_SC_SADL;
    else if (!strcmp(s, "equal")) *out = FL_SC_EQUAL;
    else return fl_fail(e, FL_ERR_ARG, "unknown surprise coverage bucket mode '%s' (sadl or equal)", s);
    return FL_OK;
}

fl_status fl_sc_new(int k, double lower, double upper, fl_sc_mode mode, fl_sc **out, fl_err *e) {
    *out = NULL;
    if (k < (mode == FL_SC_SADL ? 2 : 1))
        return fl_fail(e, FL_ERR_ARG, "surprise coverage needs at least %d buckets (got %d)",
                       mode == FL_SC_SADL ? 2 : 1, k);
    if (!isfinite(lower) || !isfinite(upper) || !(lower < upper))
        return fl_fail(e, FL_ERR_ARG, "surprise coverage bounds must be finite with lower < "
                       "upper (got [%g, %g])", lower, upper);
    fl_sc *sc = calloc(1, sizeof *sc);
    if (sc) sc->hit = calloc((size_t)k + 1, 1);
    if (!sc || !sc->hit) {
        if (sc) free(sc);
        return fl_fail(e, FL_ERR_NOMEM, "out of memory for %d buckets", k);
    }
    sc->k = k;
    sc->lower = lower;
    sc->upper = upper;
    sc->mode = mode;
    *out = sc;
    return FL_OK;
}

void fl_sc_free(fl_sc *sc) {
    if (!sc) return;
    free(sc->hit);
    free(sc);
}

void fl_sc_reset(fl_sc *sc) {
    memset(sc->hit, 0, (size_t)sc->k + 1);
    sc->covered = 0;
}

/* numpy's linspace(lower, upper, k)[i]. */
static double edge(const fl_sc *sc, int i) {
    if (i == sc->k - 1) return sc->upper;
    double step = (sc->upper - sc->lower) / (double)(sc->k - 1);
    return (double)i * step + sc->lower;
}

int fl_sc_bucket(const fl_sc *sc, double v) {
    if (isnan(v)) return -1;
    int k = sc->k;
    if (sc->mode == FL_SC_EQUAL) {
        if (v < sc->lower || v > sc->upper) return -1;
        double b = floor((v - sc->lower) / (sc->upper - sc->lower) * k);
        return b >= k ? k - 1 : (int)b;
    }
    /* Number of edges <= v: estimate, then settle against the exact edges. */
    if (v < sc->lower) return 0;
    if (v >= sc->upper) return k;
    double est = (v - sc->lower) / (sc->upper - sc->lower) * (k - 1);
    int i = est >= k - 1 ? k - 1 : (int)est; /* guess: edge i <= v < edge i+1 */
    while (i > 0 && edge(sc, i) > v) i--;
    while (i + 1 < k && edge(sc, i + 1) <= v) i++;
    return i + 1;
}

int64_t fl_sc_add(fl_sc *sc, const double *sa, int64_t n) {
    int64_t added = 0;
    for (int64_t i = 0; i < n; i++) {
        int b = fl_sc_bucket(sc, sa[i]);
        if (b >= 0 && !sc->hit[b]) {
            sc->hit[b] = 1;
            sc->covered++;
            added++;
        }
    }
    return added;
}

double fl_sc_coverage(const fl_sc *sc) { return (double)sc->covered / sc->k; }

int fl_sc_bounds(const double *sa, int64_t n, double *lower, double *upper) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(sa[i])) {
            if (sa[i] < lo) lo = sa[i];
            if (sa[i] > hi) hi = sa[i];
        }
    if (lo > hi) return 0;
    *lower = lo;
    *upper = hi > lo ? hi : lo + 1;
    return 1;
}
