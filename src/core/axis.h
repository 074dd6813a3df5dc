/* core/axis.h — the axes of the SVG plots in the reports (nn fuzz, agents fuzz): tick steps of
 * 1, 2 or 5 times a power of ten, whole numbers on count axes (internal, not public API). */
#ifndef FLARE_CORE_AXIS_H
#define FLARE_CORE_AXIS_H

/* The step between ticks of an axis from 0 to hi giving at most 5 intervals; with integer
 * (a count axis) at least 1, so that no tick reads 3.75. hi <= 0 is taken as 1. */
double fl_axis_step(double hi, int integer);

#endif
