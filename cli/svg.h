// svg: a small SVG scatter/line plot writer for the CLI (cgq pareto --plot,
// and later cgq plot). A plot collects series of (x, y) points, then writes
// one self-contained SVG file: axes with round ticks, axis labels, a title,
// the series (markers or a polyline) and a legend. No dependency: the SVG is
// text, every label XML-escaped.
#ifndef CGQ_SVG_H
#define CGQ_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct cgq_svg_plot_s cgq_svg_plot_t;

// cgq_svg_plot_new makes an empty plot; the strings are copied. Free with
// cgq_svg_plot_destroy (NULL-safe; sets *self_p to NULL).
cgq_svg_plot_t *cgq_svg_plot_new (const char *title, const char *xlabel, const char *ylabel);
void cgq_svg_plot_destroy (cgq_svg_plot_t **self_p);

// cgq_svg_plot_integer_x says that x counts things (trials, epochs): the x
// ticks are whole numbers.
void cgq_svg_plot_integer_x (cgq_svg_plot_t *self);

// How a series is drawn.
typedef enum {
    CGQ_SVG_MARKERS, // a circle per point
    CGQ_SVG_LINE,    // a polyline through the points in the given order
    CGQ_SVG_STEPS,   // a staircase: horizontal then vertical from one point to the next
} cgq_svg_style_t;

// cgq_svg_plot_series adds n points (x[i], y[i]; copied) drawn in style with
// color (an SVG color: "#1f77b4", "gray") and named legend in the legend
// (NULL: none). Points that are not finite are skipped.
void cgq_svg_plot_series (cgq_svg_plot_t *self, const double *x, const double *y, size_t n,
                          cgq_svg_style_t style, const char *color, const char *legend);

// cgq_svg_plot_write writes the plot as an SVG document to f. The axes span
// the finite points of every series (a little wider); a plot without points
// gets empty unit axes.
void cgq_svg_plot_write (const cgq_svg_plot_t *self, FILE *f);

// cgq_svg_plot_save writes the plot to path. Returns 0, or -1 with err set
// ("cannot write front.svg: Permission denied").
int cgq_svg_plot_save (const cgq_svg_plot_t *self, const char *path, char *err, size_t errlen);

// cgq_svg_plots_write writes n plots stacked top to bottom as one SVG
// document (each a nested <svg class="plot">); _save writes it to path
// (0, or -1 with err set).
void cgq_svg_plots_write (cgq_svg_plot_t *const *plots, size_t n, FILE *f);
int cgq_svg_plots_save (cgq_svg_plot_t *const *plots, size_t n, const char *path, char *err,
                        size_t errlen);

// cgq_svg_ticks chooses round tick values (1, 2 or 5 times a power of ten)
// covering [lo, hi]: at most max of them into ticks, returns how many; the
// first <= lo and the last >= hi widen the range to them.
size_t cgq_svg_ticks (double lo, double hi, size_t max, double *ticks);

#endif
