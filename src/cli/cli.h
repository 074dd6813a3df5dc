/* cli.h — the `flare` command line: commands, options and the flag parser generated from
 * flags.def.
 *
 * Exit statuses (docs/cli.md): 0 success, 1 runtime failure (the library's message, as
 * "flare: <msg>"), 2 usage error (unknown flag, bad or missing value: the message names the
 * flag and the command).
 */
#ifndef FLARE_CLI_H
#define FLARE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "flare/flare.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INTERRUPTED = 130 /* 128 + SIGINT */ };

/* ---- commands ------------------------------------------------------------------------------ */
typedef enum cli_cmd_id {
#define COMMAND(ID, group, verb, handler, summary) CMD_##ID,
#include "cli/flags.def"
    CMD_COUNT_
} cli_cmd_id;

/* Command-set bits for the first column of FLAG(). */
enum {
#define COMMAND(ID, group, verb, handler, summary) C_##ID = 1u << CMD_##ID,
#include "cli/flags.def"
    C_ALL = (1u << CMD_COUNT_) - 1,
    C_NN = C_NN_TRAIN | C_NN_EVAL | C_NN_RUN | C_NN_INFO | C_NN_RETRAIN,
};

/* ---- options ------------------------------------------------------------------------------- */
typedef struct cli_list {
    int n;
    const char **v; /* points into argv; array malloc'd, released by cli_opts_free */
} cli_list;

/* The C type of each TYPE of flags.def. */
#define CTYPE_INT(lo, hi) int64_t
#define CTYPE_FLOAT(lo, hi) double
#define CTYPE_UINT64 uint64_t
#define CTYPE_STRING(metavar) const char *
#define CTYPE_CHOICE(words) const char *
#define CTYPE_BOOL int
#define CTYPE_LIST(metavar) cli_list

typedef enum cli_flag_id {
#define FLAG(cmds, FIELD, name, short, TYPE, dflt, help) F_##FIELD,
#include "cli/flags.def"
    F_COUNT_
} cli_flag_id;

/* Every flag of every command. A command reads only the fields of its own flags; set[F_x]
 * is 1 when flag x has a value (given, or from its default). */
typedef struct cli_opts {
#define FLAG(cmds, FIELD, name, short, TYPE, dflt, help) CTYPE_##TYPE FIELD;
#include "cli/flags.def"
    uint8_t set[F_COUNT_];
    uint8_t given[F_COUNT_]; /* on the command line, not from the default */
    int n_trailing;          /* words after `--` (commands with a TRAILING entry) */
    char **trailing;         /* points into argv; trailing[n_trailing] == NULL */
    cli_cmd_id cmd;
} cli_opts;

typedef int (*cli_handler)(const cli_opts *o);

typedef struct cli_command {
    const char *group, *verb, *summary;
    cli_handler run;
} cli_command;

extern const cli_command cli_commands[CMD_COUNT_];

/* Parse argv (the flags after `flare GROUP VERB`, argv[argc] == NULL as main's) for command
 * `cmd` into o: flags, the command's POSITIONAL bare argument, and `-- CMD ARGS...` for
 * commands with a TRAILING entry. Returns CLI_OK,
 * or CLI_USAGE after printing a message naming the flag and the command. A -h/--help among
 * the flags prints the command's help and returns -1. */
int cli_parse(cli_cmd_id cmd, int argc, char **argv, cli_opts *o);
void cli_opts_free(cli_opts *o);

/* Help texts, generated from flags.def. */
void cli_help_main(FILE *f);
void cli_help_group(FILE *f, const char *group);
void cli_help_command(FILE *f, cli_cmd_id cmd);
int cli_group_exists(const char *group);
/* The command GROUP VERB, or -1. */
int cli_find_command(const char *group, const char *verb);

/* ---- reporting ----------------------------------------------------------------------------- */
/* "flare: <msg>" on stderr; returns CLI_FAIL. */
int cli_fail(const fl_err *e);
/* "flare GROUP VERB: <msg>" + a hint to --help on stderr; returns CLI_USAGE. */
int cli_usage(cli_cmd_id cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Usage errors for a --layers value naming a layer the model lacks: each name of spec (NAME,
 * NAME; "all" and "conv+dense" pass) is looked up in m, and the first unknown one is reported
 * as "--FLAG NAME: MODEL has no layer of that name; did you mean ...?" (suggest.c). Returns
 * CLI_OK or CLI_USAGE. */
struct fl_model;
int cli_layers_check(cli_cmd_id cmd, const char *flag, const char *model_path,
                     struct fl_model *m, const char *spec);

/* "Did you mean": feed candidates to cli_suggest_add; best is the closest one that is close
 * enough to be a typo of word, or NULL (suggest.c). */
typedef struct cli_suggest {
    const char *word, *best;
    int score;
} cli_suggest;
void cli_suggest_init(cli_suggest *s, const char *word);
void cli_suggest_add(cli_suggest *s, const char *cand);
int cli_edit_distance(const char *a, const char *b);

/* The files a command writes (outputs.c): cli_outs_check before any work says, naming the
 * path as typed, why one cannot be written; cli_outs_written marks one written (path: the
 * same pointer as added); cli_outs_undo removes the written ones when the command fails
 * later, so that a failed command leaves no partial outputs. */
enum { CLI_MAX_OUTS = 8 };
typedef struct cli_outs {
    int n;
    const char *path[CLI_MAX_OUTS];
    int written[CLI_MAX_OUTS];
} cli_outs;
void cli_outs_add(cli_outs *w, const char *path); /* NULL: nothing */
fl_status cli_outs_check(const cli_outs *w, fl_err *e);
void cli_outs_written(cli_outs *w, const char *path);
void cli_outs_undo(const cli_outs *w);

/* Informational output on stderr, silenced by --quiet. */
extern int cli_quiet;
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A seed nobody chose (AFL++ style): from the OS, to be printed so the run can be repeated. */
uint64_t cli_fresh_seed(void);

/* ---- agents ---- */
/* The HTTP target of --target / --body-template / --response in h, or NULL without --target
 * (agents_http.c). */
struct fl_http_opts;
const struct fl_http_opts *cli_http_target(const cli_opts *o, struct fl_http_opts *h);
/* The target of replay and min from the flags: -- CMD ARGS... or --target (whose options go
 * in h, which must outlive ts), --timeout, --fresh, --mem-limit and the --otlp-* flags. */
struct fl_target_setup;
void cli_target_setup(const cli_opts *o, struct fl_target_setup *ts, struct fl_http_opts *h);
/* Without -T: the timeout recorded by the campaign that path belongs to, when there is one
 * (agents min and replay). */
void cli_recorded_timeout(const cli_opts *o, const char *path, struct fl_target_setup *ts);

/* ---- handlers (one file per group) ---------------------------------------------------------- */
#define COMMAND(ID, group, verb, handler, summary) int handler(const cli_opts *o);
#include "cli/flags.def"

#endif
