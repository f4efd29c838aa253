// svg: scatter and line plots as SVG text.
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

// The canvas and the plot area inside it, in pixels.
#define S_W 720.0
#define S_H 480.0
#define S_LEFT 90.0
#define S_RIGHT 30.0
#define S_TOP 50.0
#define S_BOTTOM 70.0
#define S_MAX_TICKS 10

typedef struct {
    double *x, *y;
    size_t n;
    cgq_svg_style_t style;
    char *color, *legend;
} s_series_t;

struct cgq_svg_plot_s {
    char *title, *xlabel, *ylabel;
    bool x_integer; // x counts things: no tick between two whole numbers
    s_series_t *s;
    size_t ns;
};

cgq_svg_plot_t *
cgq_svg_plot_new (const char *title, const char *xlabel, const char *ylabel)
{
    cgq_svg_plot_t *self = cgq_xcalloc (1, sizeof *self);
    self->title = cgq_xstrdup (title ? title : "");
    self->xlabel = cgq_xstrdup (xlabel ? xlabel : "");
    self->ylabel = cgq_xstrdup (ylabel ? ylabel : "");
    return self;
}

void
cgq_svg_plot_destroy (cgq_svg_plot_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cgq_svg_plot_t *self = *self_p;
    for (size_t i = 0; i < self->ns; i++) {
        free (self->s[i].x);
        free (self->s[i].y);
        free (self->s[i].color);
        free (self->s[i].legend);
    }
    free (self->s);
    free (self->title);
    free (self->xlabel);
    free (self->ylabel);
    free (self);
    *self_p = NULL;
}

void
cgq_svg_plot_integer_x (cgq_svg_plot_t *self)
{
    self->x_integer = true;
}

void
cgq_svg_plot_series (cgq_svg_plot_t *self, const double *x, const double *y, size_t n,
                     cgq_svg_style_t style, const char *color, const char *legend)
{
    self->s = cgq_xrealloc (self->s, (self->ns + 1) * sizeof *self->s);
    s_series_t *s = &self->s[self->ns++];
    memset (s, 0, sizeof *s);
    s->x = cgq_xcalloc (n ? n : 1, sizeof *s->x);
    s->y = cgq_xcalloc (n ? n : 1, sizeof *s->y);
    for (size_t i = 0; i < n; i++)
        if (isfinite (x[i]) && isfinite (y[i])) {
            s->x[s->n] = x[i];
            s->y[s->n] = y[i];
            s->n++;
        }
    s->style = style;
    s->color = cgq_xstrdup (color ? color : "black");
    s->legend = legend ? cgq_xstrdup (legend) : NULL;
}

size_t
cgq_svg_ticks (double lo, double hi, size_t max, double *ticks)
{
    if (max < 2)
        return 0;
    if (!(hi > lo)) {
        double pad = lo != 0 ? fabs (lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / (double) (max - 1);
    double mag = pow (10, floor (log10 (raw)));
    double step = mag;
    const double mult[] = {1, 2, 5, 10, 20, 50};
    for (size_t i = 0; i < 6; i++) {
        step = mult[i] * mag;
        if (floor (lo / step) * step + step * (double) (max - 1) >= hi)
            break;
    }
    double first = floor (lo / step) * step;
    size_t n = 0;
    for (double v = first; n < max; v = first + step * (double) n) {
        ticks[n++] = fabs (v) < step * 1e-9 ? 0 : v;
        if (v >= hi)
            break;
    }
    return n;
}

// s_text writes s XML-escaped.
static void
s_text (FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs ("&lt;", f); break;
        case '>': fputs ("&gt;", f); break;
        case '&': fputs ("&amp;", f); break;
        case '"': fputs ("&quot;", f); break;
        default: fputc (*s, f);
        }
    }
}

// s_axis_range sets [lo, hi] to the span of every finite point's coordinate
// (y when use_y), 0..1 when there is none.
static void
s_axis_range (const cgq_svg_plot_t *self, bool use_y, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < self->ns; i++)
        for (size_t k = 0; k < self->s[i].n; k++) {
            double v = use_y ? self->s[i].y[k] : self->s[i].x[k];
            if (v < *lo)
                *lo = v;
            if (v > *hi)
                *hi = v;
        }
    if (!isfinite (*lo)) {
        *lo = 0;
        *hi = 1;
    }
}

// s_write writes one plot: a whole document, or (nested) an <svg> element
// placed y pixels down in a document of several.
static void
s_write (const cgq_svg_plot_t *self, FILE *f, bool nested, double y)
{
    double xlo, xhi, ylo, yhi, xt[S_MAX_TICKS], yt[S_MAX_TICKS];
    s_axis_range (self, false, &xlo, &xhi);
    s_axis_range (self, true, &ylo, &yhi);
    size_t nx = cgq_svg_ticks (xlo, xhi, 7, xt), ny = cgq_svg_ticks (ylo, yhi, 7, yt);
    if (self->x_integer && nx > 1 && xt[1] - xt[0] < 1) {
        // a step below 1 means a span of a few units: one tick per whole number
        nx = 0;
        for (double v = floor (xlo); v <= ceil (xhi) && nx < S_MAX_TICKS; v++)
            xt[nx++] = v;
        if (nx < 2)
            xt[nx++] = xt[0] + 1;
    }
    xlo = xt[0];
    xhi = xt[nx - 1];
    ylo = yt[0];
    yhi = yt[ny - 1];
    const double pw = S_W - S_LEFT - S_RIGHT, ph = S_H - S_TOP - S_BOTTOM;
#define S_PX(v) (S_LEFT + ((v) - xlo) / (xhi - xlo) * pw)
#define S_PY(v) (S_TOP + ph - ((v) - ylo) / (yhi - ylo) * ph)
    if (nested)
        fprintf (f,
                 "<svg class=\"plot\" x=\"0\" y=\"%g\" width=\"%g\" height=\"%g\" "
                 "viewBox=\"0 0 %g %g\">\n",
                 y, S_W, S_H, S_W, S_H);
    else
        fprintf (f,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                 "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n",
                 S_W, S_H, S_W, S_H);
    fputs ("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf (f, "<text class=\"title\" x=\"%g\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">",
             S_W / 2);
    s_text (f, self->title);
    fputs ("</text>\n<g class=\"axes\" stroke=\"#999\" stroke-width=\"1\">\n", f);
    for (size_t i = 0; i < nx; i++)
        fprintf (f, "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"#eee\"/>\n",
                 S_PX (xt[i]), S_TOP, S_PX (xt[i]), S_TOP + ph);
    for (size_t i = 0; i < ny; i++)
        fprintf (f, "<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"#eee\"/>\n", S_LEFT,
                 S_PY (yt[i]), S_LEFT + pw, S_PY (yt[i]));
    fprintf (f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\"/>\n</g>\n", S_LEFT,
             S_TOP, pw, ph);
    fputs ("<g class=\"ticks\" fill=\"#333\">\n", f);
    for (size_t i = 0; i < nx; i++)
        fprintf (f, "<text x=\"%.2f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", S_PX (xt[i]),
                 S_TOP + ph + 18, xt[i]);
    for (size_t i = 0; i < ny; i++)
        fprintf (f, "<text x=\"%g\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n", S_LEFT - 8,
                 S_PY (yt[i]) + 4, yt[i]);
    fputs ("</g>\n", f);
    fprintf (f, "<text class=\"xlabel\" x=\"%g\" y=\"%g\" text-anchor=\"middle\">",
             S_LEFT + pw / 2, S_H - 25);
    s_text (f, self->xlabel);
    fprintf (f,
             "</text>\n<text class=\"ylabel\" x=\"20\" y=\"%g\" text-anchor=\"middle\" "
             "transform=\"rotate(-90 20 %g)\">",
             S_TOP + ph / 2, S_TOP + ph / 2);
    s_text (f, self->ylabel);
    fputs ("</text>\n", f);
    for (size_t i = 0; i < self->ns; i++) {
        const s_series_t *s = &self->s[i];
        fputs ("<g class=\"series\" data-name=\"", f);
        s_text (f, s->legend ? s->legend : "");
        fputs ("\">\n", f);
        if (s->style == CGQ_SVG_MARKERS) {
            for (size_t k = 0; k < s->n; k++) {
                fprintf (f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"4\" fill=\"", S_PX (s->x[k]),
                         S_PY (s->y[k]));
                s_text (f, s->color);
                fputs ("\" fill-opacity=\"0.8\"/>\n", f);
            }
        }
        else if (s->n) {
            fputs ("<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"", f);
            s_text (f, s->color);
            fputs ("\" points=\"", f);
            for (size_t k = 0; k < s->n; k++) {
                if (k && s->style == CGQ_SVG_STEPS)
                    fprintf (f, "%.2f,%.2f ", S_PX (s->x[k]), S_PY (s->y[k - 1]));
                fprintf (f, "%.2f,%.2f ", S_PX (s->x[k]), S_PY (s->y[k]));
            }
            fputs ("\"/>\n", f);
        }
        fputs ("</g>\n", f);
    }
    // The legend, in the corner of the plot area that covers the fewest
    // points (top right on a tie), on a white ground.
    size_t nl = 0;
    for (size_t i = 0; i < self->ns; i++)
        nl += self->s[i].legend != NULL;
    const double bw = 176, bh = 18 * (double) nl + 6;
    const double corners[4][2] = {{S_LEFT + pw - bw - 4, S_TOP + 4},
                                  {S_LEFT + 4, S_TOP + 4},
                                  {S_LEFT + pw - bw - 4, S_TOP + ph - bh - 4},
                                  {S_LEFT + 4, S_TOP + ph - bh - 4}};
    size_t best = 0, best_n = SIZE_MAX;
    for (size_t c = 0; c < 4 && nl; c++) {
        size_t n = 0;
        for (size_t i = 0; i < self->ns; i++)
            for (size_t k = 0; k < self->s[i].n; k++) {
                double px = S_PX (self->s[i].x[k]), py = S_PY (self->s[i].y[k]);
                n += px >= corners[c][0] - 4 && px <= corners[c][0] + bw + 4
                     && py >= corners[c][1] - 4 && py <= corners[c][1] + bh + 4;
            }
        if (n < best_n) {
            best = c;
            best_n = n;
        }
    }
    if (nl)
        fprintf (f,
                 "<rect class=\"legend\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                 "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ddd\"/>\n",
                 corners[best][0], corners[best][1], bw, bh);
    double lx = corners[best][0] + 6, ly = corners[best][1] + 16;
    for (size_t i = 0; i < self->ns; i++) {
        const s_series_t *s = &self->s[i];
        if (!s->legend)
            continue;
        if (s->style == CGQ_SVG_MARKERS)
            fprintf (f, "<circle cx=\"%g\" cy=\"%g\" r=\"4\" fill=\"", lx + 8, ly - 4);
        else
            fprintf (f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke-width=\"1.5\" stroke=\"",
                     lx, ly - 4, lx + 16, ly - 4);
        s_text (f, s->color);
        fprintf (f, "\"/>\n<text class=\"legend\" x=\"%g\" y=\"%g\">", lx + 22, ly);
        s_text (f, s->legend);
        fputs ("</text>\n", f);
        ly += 18;
    }
    fputs ("</svg>\n", f);
#undef S_PX
#undef S_PY
}

void
cgq_svg_plot_write (const cgq_svg_plot_t *self, FILE *f)
{
    s_write (self, f, false, 0);
}

void
cgq_svg_plots_write (cgq_svg_plot_t *const *plots, size_t n, FILE *f)
{
    fprintf (f,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
             "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n",
             S_W, S_H * (double) n, S_W, S_H * (double) n);
    for (size_t i = 0; i < n; i++)
        s_write (plots[i], f, true, S_H * (double) i);
    fputs ("</svg>\n", f);
}

int
cgq_svg_plots_save (cgq_svg_plot_t *const *plots, size_t n, const char *path, char *err,
                    size_t errlen)
{
    FILE *f = fopen (path, "w");
    if (!f) {
        snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
        return -1;
    }
    cgq_svg_plots_write (plots, n, f);
    if (fclose (f) != 0) {
        snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
        return -1;
    }
    return 0;
}

int
cgq_svg_plot_save (const cgq_svg_plot_t *self, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen (path, "w");
    if (!f) {
        snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
        return -1;
    }
    cgq_svg_plot_write (self, f);
    if (fclose (f) != 0) {
        snprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
        return -1;
    }
    return 0;
}
