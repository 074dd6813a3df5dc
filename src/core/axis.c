/* Tick steps for the reports' plots (axis.h). */
#include <math.h>

#include "core/axis.h"

double fl_axis_step(double hi, int integer) {
    double raw = (hi > 0 ? hi : 1) / 5, p = pow(10, floor(log10(raw)));
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    return integer && step < 1 ? 1 : step;
}
