// config: one table per program describes every option; defaults, a config
// file (--config FILE, a YAML mapping of option names), environment variables
// and command-line flags fill one struct, in that order of precedence.
//
//   typedef struct { char *redis; int64_t heartbeat_ms; } my_cfg_t;
//   static const cgq_opt_t opts[] = {
//       {"redis", 0, CGQ_OPT_STRING, offsetof (my_cfg_t, redis),
//        "redis://127.0.0.1:6379/0", "CGQ_REDIS", "Redis URL", 0, 0},
//       {"heartbeat", 0, CGQ_OPT_DURATION_MS, offsetof (my_cfg_t, heartbeat_ms),
//        "1s", NULL, "heartbeat interval", 10, 60000},
//       {NULL}};
#ifndef CGQ_CONFIG_H
#define CGQ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    CGQ_OPT_STRING,      // char *      (owned by the struct; cgq_config_free frees it)
    CGQ_OPT_INT,         // int64_t
    CGQ_OPT_DOUBLE,      // double
    CGQ_OPT_BOOL,        // bool        (a flag: --name sets true; =true/false/1/0/yes/no)
    CGQ_OPT_DURATION_MS, // int64_t ms  ("500ms", "2s", "1m"; a bare number is seconds)
    CGQ_OPT_BYTES,       // uint64_t    ("4G", "512M", "1024")
    CGQ_OPT_LIST,        // char *      entries separated by '\n' (owned, as STRING): each
                         //             --flag on the command line adds one; the flags
                         //             replace what a variable or file set (one entry,
                         //             or several separated by newlines)
} cgq_opt_type_t;

typedef struct {
    const char *name;  // long flag without dashes ("redis"); NULL ends the table
    char short_name;   // 'r' for -r, or 0
    cgq_opt_type_t type;
    size_t offset;     // offsetof the field in the config struct
    const char *def;   // default, as text; NULL: no default (string NULL / 0)
    const char *env;   // environment variable, or NULL
    const char *help;  // one line
    double min, max;   // numeric bounds (DURATION_MS in ms); both 0: none
} cgq_opt_t;

// cgq_config_parse fills cfg. usage is the synopsis printed by --help, before
// the table of options with their defaults and variables. Arguments that are not
// options (positional) are moved, in order, to argv[*argi .. argc-1]: on return
// *argi is the index of the first positional argument. Parsing stops at "--".
// Returns 0 on success; 1 when --help or --version was printed (the caller
// exits 0); -1 on a
// bad value, an unknown flag or an unreadable config file, after printing one
// line naming the source (flag, variable, or FILE:LINE:COL) and the expected form
// (the caller exits 2). --config FILE, --help and --version are always accepted.
int cgq_config_parse (const cgq_opt_t *opts, void *cfg, const char *prog, const char *usage,
                      int argc, char **argv, int *argi);

// cgq_config_free frees the strings that cgq_config_parse stored in cfg.
void cgq_config_free (const cgq_opt_t *opts, void *cfg);

// cgq_config_print_help prints usage and the option table to stdout.
void cgq_config_print_help (const cgq_opt_t *opts, const char *prog, const char *usage);

#endif
