/* Whole numbers out of JSON. cJSON reads every number as a double, and casting a double that
 * is out of the target type's range (1e79, NaN) to an integer is undefined behaviour: a parser
 * of outside files checks the range first, then casts. */
#include "flare/flare.h"

#include <math.h>

int fl_whole(double v, double lo, double hi) { return v >= lo && v <= hi && v == floor(v); }
