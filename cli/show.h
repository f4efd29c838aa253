// show: how the CLI prints jobs, trials and nodes: aligned tables for people,
// CSV and JSON for programs. The JSON document of `cgq results --format json`
// (and `cgq run --format json`) is a documented interface:
//
//   {"job": 7, "name": "...", "state": "running|finished|cancelled",
//    "objective": {"metric": "...", "mode": "max|min"} or null,
//    "trials": [{"id": 0, "state": "succeeded", "params": {...},
//                "metrics": {...} or null, "attempts": 1, "node": "..." or null,
//                "started": 1732212345.5 or null, "finished": ... or null,
//                "error": "..." or null, "warning": "..." or null}, ...]}
#ifndef CGQ_SHOW_H
#define CGQ_SHOW_H

#include <stdbool.h>
#include <stdio.h>

#include "store.h"
#include "util.h"
#include "view.h"

// cgq_show_leaderboard prints the given trials (best first) as a table: rank,
// trial, objective value, one column per param, duration.
void cgq_show_leaderboard (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials,
                           size_t n);

// cgq_show_results_table / _csv / _json print every given trial, in order.
// The table shows only the params and metrics named in columns (comma-
// separated; NULL: all) and, when width > 0, leaves out the last of them
// until a line fits width characters, saying how many it left out. Returns
// 0, or -1 with err set (a name in columns that is no param or metric).
int cgq_show_results_table (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials,
                            size_t n, const char *columns, int width, char *err, size_t errlen);
void cgq_show_results_csv (FILE *f, const cgq_job_rec_t *job, cgq_trial_rec_t **trials,
                           size_t n);
// _json also lists, for a job with several objectives, its "objectives" and
// its "front" (trial ids, best first in the first objective), read from
// store (NULL: not listed).
void cgq_show_results_json (FILE *f, cgq_store_t *store, const cgq_job_rec_t *job,
                            cgq_trial_rec_t **trials, size_t n);

// A table for people: a header row, cells added row by row (left to right),
// printed with aligned columns. Cells are cut at 40 code points, control
// characters flattened.
typedef struct {
    size_t ncols;
    char **head;
    bool *right;
    bool *hidden; // columns cgq_table_print leaves out (cgq_table_hide)
    char **cells;
    size_t ncells, cap;
} cgq_table_t;

void cgq_table_init (cgq_table_t *t, size_t ncols);
// cgq_table_head names column col (copied); right aligns it right (numbers).
void cgq_table_head (cgq_table_t *t, size_t col, const char *name, bool right);
// cgq_table_add takes ownership of cell (NULL: empty).
void cgq_table_add (cgq_table_t *t, char *cell);
void cgq_table_addf (cgq_table_t *t, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
// cgq_table_width is column col's printed width (header or widest cell);
// cgq_table_hide leaves it out of what cgq_table_print writes.
size_t cgq_table_width (const cgq_table_t *t, size_t col);
void cgq_table_hide (cgq_table_t *t, size_t col);
// cgq_table_print writes every row, each line starting with indent.
void cgq_table_print (const cgq_table_t *t, FILE *f, const char *indent);
void cgq_table_fini (cgq_table_t *t);

// cgq_show_groups prints, for the succeeded trials grouped by the values of
// the comma-separated params (or metrics) in by, each group's n and the mean,
// sample standard deviation (n - 1), min and max of every numeric metric and
// every numeric param not grouped on (columns, if not NULL: only those
// named, in that order); format is table, csv, json, markdown or latex (the
// last two: mean ± std to the std's two significant digits, for a paper).
// Groups are sorted by their key values. It may reorder trials[] (the caller
// still frees all n). Returns 0, or -1 with err set (no such key or column,
// empty list).
int cgq_show_groups (FILE *f, const char *format, const cgq_job_rec_t *job,
                     cgq_trial_rec_t **trials, size_t n, const char *by, const char *columns,
                     char *err, size_t errlen);

// cgq_show_passes prints the pass-to-pass agreement of a job measured in two
// passes (measure: {passes: 2}; cli/passes.c): over its succeeded trials with
// time_pass1 and time_pass2, acc10, the median |pass_diff| and Spearman's rho
// (common/agree.h); format json: one object {job, n, acc10,
// median_abs_diff, srcc}, null where undefined. Returns 0.
int cgq_show_passes (FILE *f, const char *format, const cgq_job_rec_t *job,
                     cgq_trial_rec_t **trials, size_t n);

// cgq_show_duration writes s seconds as "0.42s", "12.3s", "4m05s" or
// "2h03m" into buf (n bytes). Returns buf.
char *cgq_show_duration (char *buf, size_t n, double s);

// cgq_show_clock writes s seconds as "0:12", "12:34" or "1:02:03". Returns buf.
char *cgq_show_clock (char *buf, size_t n, double s);

// cgq_show_bytes writes v bytes as "512 B", "1.5 KiB", "12.3 MiB". Returns buf.
char *cgq_show_bytes (char *buf, size_t n, double v);

// cgq_show_number writes v with 6 significant digits, for tables. Returns buf.
char *cgq_show_number (char *buf, size_t n, double v);

// Shared by show.c and groups.c (cgq results' formats):
// cgq_show_value_text returns a param or metric value as text (caller
// frees): strings bare, numbers short (table) or exact (csv), the rest as
// JSON. cgq_show_names splits a comma-separated list of names, each trimmed,
// empty ones dropped, pointing into *copy (caller frees both); count in *n.
// cgq_show_keys collects the keys of every trial's params (or metrics) in
// order of first appearance (borrowed). cgq_show_json_str / _num append a
// JSON string or number, or null. cgq_show_csv_field appends s quoted as
// RFC 4180 asks.
char *cgq_show_value_text (const json_t *v, bool exact);
char **cgq_show_names (const char *list, char **copy, size_t *n);
const char **cgq_show_keys (cgq_trial_rec_t **trials, size_t n, bool metrics, size_t *nkeys);
void cgq_show_json_str (cgq_buf_t *b, const char *s);
void cgq_show_json_num (cgq_buf_t *b, bool has, double v);
void cgq_show_csv_field (cgq_buf_t *b, const char *s, bool first);

#endif
