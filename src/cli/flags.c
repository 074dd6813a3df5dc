/* The flag parser and the help texts, both generated from flags.def.
 *
 * Each FLAG entry becomes one cli_flag descriptor: its type, range, default and the offset
 * of its field in cli_opts. Parsing a command line is then table-driven: find the
 * descriptor for each "--name[=value]" / "-x [value]" among the flags of the command, convert
 * and range-check the value, store it at the offset. Defaults are written as they would be
 * typed and go through the same conversion, so a default can never disagree with what the
 * parser accepts (a bad default trips an assert on the first run of any command using it).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef enum { FT_INT, FT_FLOAT, FT_UINT64, FT_STRING, FT_CHOICE, FT_BOOL, FT_LIST } cli_ftype;

typedef struct cli_flag {
    unsigned cmds;
    const char *name;
    char shrt;
    cli_ftype type;
    int64_t imin, imax;
    double fmin, fmax;
    const char *metavar; /* what follows the flag in help: N, FILE, a|b|c */
    const char *dflt;    /* NULL: none; cli_required: must be given */
    const char *help;
    size_t off;
} cli_flag;

static const char cli_required[] = "(required)";
#define NONE NULL
#define REQUIRED cli_required

#define DESC_INT(lo, hi) .type = FT_INT, .imin = (lo), .imax = (hi), .metavar = "N"
#define DESC_FLOAT(lo, hi) .type = FT_FLOAT, .fmin = (lo), .fmax = (hi), .metavar = "X"
#define DESC_UINT64 .type = FT_UINT64, .metavar = "N"
#define DESC_STRING(mv) .type = FT_STRING, .metavar = #mv
#define DESC_CHOICE(words) .type = FT_CHOICE, .metavar = words
#define DESC_BOOL .type = FT_BOOL, .metavar = NULL
#define DESC_LIST(mv) .type = FT_LIST, .metavar = #mv

static const cli_flag flags[F_COUNT_] = {
#define FLAG(cmds_, FIELD, name_, short_, TYPE, dflt_, help_)                                  \
    [F_##FIELD] = {.cmds = (cmds_), .name = (name_), .shrt = (short_), DESC_##TYPE,            \
                   .dflt = (dflt_), .help = (help_), .off = offsetof(cli_opts, FIELD)},
#include "cli/flags.def"
};

const cli_command cli_commands[CMD_COUNT_] = {
#define COMMAND(ID, group_, verb_, handler, summary_)                                          \
    [CMD_##ID] = {.group = group_, .verb = verb_, .summary = summary_, .run = handler},
#include "cli/flags.def"
};

/* Bare-argument and `-- CMD ARGS...` declarations; a sentinel keeps the arrays non-empty. */
static const struct {
    unsigned cmds;
    int flag;
} positionals[] = {
#define POSITIONAL(cmds_, FIELD) {(cmds_), F_##FIELD},
#include "cli/flags.def"
    {0, -1},
};

static const struct {
    unsigned cmds;
    const char *metavar, *help;
} trailings[] = {
#define TRAILING(cmds_, metavar_, help_) {(cmds_), (metavar_), (help_)},
#include "cli/flags.def"
    {0, NULL, NULL},
};

/* Other spellings of flags (ALIAS), and the examples closing each --help (EXAMPLE). */
static const struct {
    unsigned cmds;
    int flag;
    const char *name;
    char shrt;
} aliases[] = {
#define ALIAS(cmds_, FIELD, name_, short_) {(cmds_), F_##FIELD, (name_), (short_)},
#include "cli/flags.def"
    {0, -1, NULL, 0},
};

static const struct {
    int cmd;
    const char *args, *comment;
} examples[] = {
#define EXAMPLE(ID, args_, comment_) {CMD_##ID, (args_), (comment_)},
#include "cli/flags.def"
    {-1, NULL, NULL},
};

static const struct {
    const char *name, *summary;
} groups[] = {
#define GROUP(name_, summary_) {name_, summary_},
#include "cli/flags.def"
};
enum { N_GROUPS = sizeof groups / sizeof groups[0] };

/* ---- reporting ---------------------------------------------------------------------------- */
int cli_quiet = 0;

int cli_fail(const fl_err *e) {
    fprintf(stderr, "flare: %s\n", e->msg[0] ? e->msg : fl_strerror(e->status));
    return CLI_FAIL;
}

int cli_usage(cli_cmd_id cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "flare %s %s: ", cli_commands[cmd].group, cli_commands[cmd].verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see: flare %s %s --help)\n", cli_commands[cmd].group,
            cli_commands[cmd].verb);
    return CLI_USAGE;
}

void cli_note(const char *fmt, ...) {
    if (cli_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* ---- lookup ------------------------------------------------------------------------------- */
int cli_group_exists(const char *group) {
    for (int i = 0; i < N_GROUPS; i++)
        if (!strcmp(groups[i].name, group)) return 1;
    return 0;
}

int cli_find_command(const char *group, const char *verb) {
    for (int c = 0; c < CMD_COUNT_; c++)
        if (!strcmp(cli_commands[c].group, group) && !strcmp(cli_commands[c].verb, verb))
            return c;
    return -1;
}

static int takes(const cli_flag *f, cli_cmd_id cmd) { return (f->cmds >> cmd) & 1u; }

/* The flag a bare argument of cmd fills, or -1. */
static int positional_flag(cli_cmd_id cmd) {
    for (int i = 0; positionals[i].flag >= 0; i++)
        if ((positionals[i].cmds >> cmd) & 1u) return positionals[i].flag;
    return -1;
}

/* The TRAILING entry of cmd, or -1. */
static int trailing_of(cli_cmd_id cmd) {
    for (int i = 0; trailings[i].metavar; i++)
        if ((trailings[i].cmds >> cmd) & 1u) return i;
    return -1;
}

static int name_is(const char *have, const char *name, size_t len) {
    return strlen(have) == len && !strncmp(have, name, len);
}

/* The flag of command cmd called `name` (long, len chars) or `shrt` (short form), its
 * aliases included, or -1. */
static int find_flag(cli_cmd_id cmd, const char *name, size_t len, char shrt) {
    for (int i = 0; i < F_COUNT_; i++) {
        const cli_flag *f = &flags[i];
        if (!takes(f, cmd)) continue;
        if (shrt ? f->shrt == shrt : name_is(f->name, name, len)) return i;
    }
    for (int a = 0; aliases[a].name; a++) {
        if (!((aliases[a].cmds >> cmd) & 1u)) continue;
        if (shrt ? aliases[a].shrt == shrt : name_is(aliases[a].name, name, len))
            return aliases[a].flag;
    }
    return -1;
}

/* ---- values ------------------------------------------------------------------------------- */
static int choice_ok(const char *words, const char *v) {
    size_t n = strlen(v);
    for (const char *p = words; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return 1;
        p += len + (bar != NULL);
    }
    return 0;
}

/* Convert v for flag i and store it in o. On error write the reason to why and return -1. */
static int set_value(int i, const char *v, cli_opts *o, char *why, size_t nwhy) {
    const cli_flag *f = &flags[i];
    void *dst = (char *)o + f->off;
    char *end;
    switch (f->type) {
    case FT_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end) return snprintf(why, nwhy, "'%s' is not an integer", v), -1;
        if (errno == ERANGE || x < f->imin || x > f->imax) {
            if (f->imax == INT64_MAX)
                snprintf(why, nwhy, "%s is out of range (must be >= %lld)", v,
                         (long long)f->imin);
            else
                snprintf(why, nwhy, "%s is out of range [%lld, %lld]", v, (long long)f->imin,
                         (long long)f->imax);
            return -1;
        }
        *(int64_t *)dst = x;
        break;
    }
    case FT_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x))
            return snprintf(why, nwhy, "'%s' is not a finite number", v), -1;
        if (x < f->fmin || x > f->fmax)
            return snprintf(why, nwhy, "%s is out of range [%g, %g]", v, f->fmin, f->fmax), -1;
        *(double *)dst = x;
        break;
    }
    case FT_UINT64: {
        /* strtoull would accept "-1" (as 2^64-1) and read "010" as octal: neither is what a
         * seed typed by a person means. */
        int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
        if (v[0] < '0' || v[0] > '9')
            return snprintf(why, nwhy, "'%s' is not an unsigned integer", v), -1;
        errno = 0;
        unsigned long long x = strtoull(v, &end, hex ? 16 : 10);
        if (*end) return snprintf(why, nwhy, "'%s' is not an unsigned integer", v), -1;
        if (errno == ERANGE) return snprintf(why, nwhy, "%s is larger than 2^64-1", v), -1;
        *(uint64_t *)dst = x;
        break;
    }
    case FT_STRING:
        if (!*v) return snprintf(why, nwhy, "empty value"), -1;
        *(const char **)dst = v;
        break;
    case FT_CHOICE:
        if (!choice_ok(f->metavar, v)) {
            char words[32][64]; /* the choices, for "did you mean" */
            int k = 0;
            cli_suggest sg;
            cli_suggest_init(&sg, v);
            for (const char *p = f->metavar; *p && k < 32;) {
                size_t len = strcspn(p, "|");
                snprintf(words[k], sizeof words[k], "%.*s", (int)len, p);
                cli_suggest_add(&sg, words[k++]);
                p += len + (p[len] == '|');
            }
            if (sg.best)
                return snprintf(why, nwhy, "'%s' is not one of %s; did you mean %s?", v,
                                f->metavar, sg.best), -1;
            return snprintf(why, nwhy, "'%s' is not one of %s", v, f->metavar), -1;
        }
        *(const char **)dst = v;
        break;
    case FT_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
            *(int *)dst = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
            *(int *)dst = 0;
        else
            return snprintf(why, nwhy, "'%s' is not true or false", v), -1;
        break;
    case FT_LIST: {
        if (!*v) return snprintf(why, nwhy, "empty value"), -1;
        cli_list *l = dst;
        const char **nv = realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
        if (!nv) return snprintf(why, nwhy, "out of memory"), -1;
        nv[l->n++] = v;
        l->v = nv;
        break;
    }
    }
    o->set[i] = 1;
    return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */
/* Name of the commands that do take --name (or -shrt), for "unknown flag" messages. */
static void owners(const char *name, size_t len, char shrt, char *buf, size_t n) {
    buf[0] = 0;
    for (int g = 0; g < N_GROUPS; g++) {
        int all = 1, any = 0;
        for (int c = 0; c < CMD_COUNT_; c++) {
            if (strcmp(cli_commands[c].group, groups[g].name)) continue;
            int has = find_flag((cli_cmd_id)c, name, len, shrt) >= 0;
            all &= has;
            any |= has;
        }
        for (int c = 0; any && c < CMD_COUNT_; c++) {
            if (strcmp(cli_commands[c].group, groups[g].name)) continue;
            if (!all && find_flag((cli_cmd_id)c, name, len, shrt) < 0) continue;
            size_t k = strlen(buf);
            if (all)
                snprintf(buf + k, n - k, "%severy %s command", k ? ", " : "", groups[g].name);
            else
                snprintf(buf + k, n - k, "%s%s %s", k ? ", " : "", cli_commands[c].group,
                         cli_commands[c].verb);
            if (all) break;
        }
    }
}

/* An unknown --name for cmd: the closest flag of cmd (a typo), else the commands that have
 * it. */
static int unknown_long(cli_cmd_id cmd, const char *name, size_t len) {
    char word[64], own[256];
    snprintf(word, sizeof word, "%.*s", (int)(len < 63 ? len : 63), name);
    cli_suggest s;
    cli_suggest_init(&s, word);
    for (int i = 0; i < F_COUNT_; i++)
        if (takes(&flags[i], cmd)) cli_suggest_add(&s, flags[i].name);
    for (int a = 0; aliases[a].name; a++)
        if ((aliases[a].cmds >> cmd) & 1u) cli_suggest_add(&s, aliases[a].name);
    owners(name, len, 0, own, sizeof own);
    if (own[0]) return cli_usage(cmd, "unknown flag --%s (it is a flag of: %s)", word, own);
    if (s.best) return cli_usage(cmd, "unknown flag --%s; did you mean --%s?", word, s.best);
    return cli_usage(cmd, "unknown flag --%s", word);
}

/* An unknown -x for cmd: which long flag -x is in the commands that have it. */
static int unknown_short(cli_cmd_id cmd, char shrt) {
    char own[256];
    owners(NULL, 0, shrt, own, sizeof own);
    for (int c = 0; own[0] && c < CMD_COUNT_; c++) {
        int i = find_flag((cli_cmd_id)c, NULL, 0, shrt);
        if (i < 0) continue;
        const char *long_name = flags[i].name; /* the alias's own name when it is an alias's */
        for (int a = 0; aliases[a].name; a++)
            if (aliases[a].shrt == shrt && ((aliases[a].cmds >> c) & 1u))
                long_name = aliases[a].name;
        /* -t became -T in the agents commands, -m -M: the other case is a likely intent */
        char other = shrt >= 'a' && shrt <= 'z' ? (char)(shrt - 32) : (char)(shrt + 32);
        int j = find_flag(cmd, NULL, 0, other);
        if (j >= 0)
            return cli_usage(cmd, "unknown flag -%c (-%c is --%s, of: %s); did you mean -%c "
                             "(--%s)?", shrt, shrt, long_name, own, other, flags[j].name);
        return cli_usage(cmd, "unknown flag -%c (-%c is --%s, of: %s)", shrt, shrt, long_name,
                         own);
    }
    return cli_usage(cmd, "unknown flag -%c", shrt);
}

int cli_parse(cli_cmd_id cmd, int argc, char **argv, cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    char why[256];
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a], *val = NULL;
        int i;
        char shown[64]; /* the flag as the user wrote it, for messages */
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            cli_help_command(stdout, cmd);
            return -1;
        }
        if (!strcmp(arg, "--")) {
            /* Everything after a lone `--` is the program to run, its flags included. */
            if (trailing_of(cmd) < 0)
                return cli_usage(cmd, "unexpected '--' (this command runs no other program)");
            o->trailing = argv + a + 1;
            o->n_trailing = argc - a - 1;
            break;
        }
        if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            snprintf(shown, sizeof shown, "--%.*s", (int)len, name);
            i = find_flag(cmd, name, len, 0);
            if (i < 0) return unknown_long(cmd, name, len);
            if (eq) val = eq + 1;
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-') {
            snprintf(shown, sizeof shown, "-%c", arg[1]);
            i = find_flag(cmd, NULL, 0, arg[1]);
            if (i < 0) return unknown_short(cmd, arg[1]);
            if (arg[2]) val = arg[2] == '=' ? arg + 3 : arg + 2;
        } else if ((i = positional_flag(cmd)) >= 0 && (!o->given[i] || flags[i].type == FT_LIST)) {
            val = arg; /* the bare argument(s): the value of its flag */
        } else if (i >= 0) {
            return cli_usage(cmd, "unexpected argument '%s' (--%s is already given)", arg,
                             flags[i].name);
        } else {
            return cli_usage(cmd, "unexpected argument '%s' (every value follows a flag)", arg);
        }
        const cli_flag *f = &flags[i];
        if (f->type == FT_BOOL && !val) {
            val = "true";
        } else if (!val) {
            /* "--output --json" is a forgotten value, not a file called "--json"; such a
             * file can still be named as --output=--json. */
            if (a + 1 >= argc || (argv[a + 1][0] == '-' && argv[a + 1][1] == '-'))
                return cli_usage(cmd, "missing value for --%s", f->name);
            val = argv[++a];
        }
        if (o->given[i] && f->type != FT_LIST)
            return cli_usage(cmd, "--%s given more than once", f->name);
        if (set_value(i, val, o, why, sizeof why) < 0)
            return cli_usage(cmd, "bad value for --%s: %s", f->name, why);
        o->given[i] = 1;
    }
    /* Every missing required flag at once: one run of the command tells all that is missing. */
    char missing[512] = "";
    int n_missing = 0;
    for (int i = 0; i < F_COUNT_; i++) {
        const cli_flag *f = &flags[i];
        if (!takes(f, cmd) || o->given[i] || f->dflt != cli_required) continue;
        size_t k = strlen(missing);
        snprintf(missing + k, sizeof missing - k, "%s--%s", k ? ", " : "", f->name);
        n_missing++;
    }
    if (n_missing)
        return cli_usage(cmd, "missing required flag%s %s", n_missing > 1 ? "s" : "", missing);
    for (int i = 0; i < F_COUNT_; i++) {
        const cli_flag *f = &flags[i];
        if (!takes(f, cmd) || o->given[i] || !f->dflt) continue;
        int rc = set_value(i, f->dflt, o, why, sizeof why);
        assert(rc == 0 && "flags.def: a default does not parse"); /* internal invariant */
        (void)rc;
    }
    int t = trailing_of(cmd);
    if (t >= 0 && o->given[F_target] && o->n_trailing > 0)
        return cli_usage(cmd, "--target %s and -- %s: give one target, not both", o->target,
                         o->trailing[0]);
    if (t >= 0 && o->n_trailing == 0 && !o->given[F_target]) /* --target: an HTTP target */
        return cli_usage(cmd, "missing the program to run: end the command line with -- %s",
                         trailings[t].metavar);
    cli_quiet = o->quiet;
    if (o->quiet) fl_verbosity = 0; /* the library's notes too: -q is the same everywhere */
    return CLI_OK;
}

void cli_opts_free(cli_opts *o) {
    for (int i = 0; i < F_COUNT_; i++)
        if (flags[i].type == FT_LIST) free(((cli_list *)((char *)o + flags[i].off))->v);
}

/* ---- help --------------------------------------------------------------------------------- */
/* Print the space-separated words of text wrapped to width 80, continuation lines indented
 * by `indent`; the cursor is at column `col` when called. NBSP joins words that must stay
 * on one line ("(default: 0)", so that it can be searched for). */
#define NBSP '\x1f'

static void wrap(FILE *f, const char *text, int col, int indent) {
    int fresh = 1; /* nothing printed on this line yet */
    for (const char *p = text; *p;) {
        const char *sp = strchr(p, ' ');
        int len = sp ? (int)(sp - p) : (int)strlen(p);
        if (!fresh && col + 1 + len > 80) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (!fresh) {
            fputc(' ', f);
            col++;
        }
        for (int i = 0; i < len; i++) fputc(p[i] == NBSP ? ' ' : p[i], f);
        col += len;
        fresh = 0;
        p += len;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

/* "--epochs N" into buf (with "-e, " in front when there is a short form). */
static void flag_spec(const cli_flag *f, char *buf, size_t n) {
    char sh[8] = "    ";
    if (f->shrt) snprintf(sh, sizeof sh, "-%c, ", f->shrt);
    snprintf(buf, n, "%s--%s%s%s", sh, f->name, f->metavar ? " " : "",
             f->metavar ? f->metavar : "");
}

/* Synopsis: required flags, then [optional] ones; an item is never split across lines. */
static void synopsis(FILE *f, cli_cmd_id cmd, int indent) {
    int col = fprintf(f, "%*sflare %s %s", indent, "", cli_commands[cmd].group,
                      cli_commands[cmd].verb);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < F_COUNT_; i++) {
            const cli_flag *fl = &flags[i];
            if (!takes(fl, cmd) || (fl->dflt == cli_required) != (pass == 0)) continue;
            char item[160];
            const char *mv = fl->metavar;
            int len;
            if (i == positional_flag(cmd)) /* "[--case] FILE": the flag name is optional */
                len = snprintf(item, sizeof item, "%s[--%s] %s%s", pass ? "[" : "", fl->name,
                               mv, pass ? "]" : "");
            else
                len = snprintf(item, sizeof item, "%s--%s%s%s%s", pass ? "[" : "", fl->name,
                               mv ? " " : "", mv ? mv : "",
                               fl->type == FT_LIST ? "]..." : pass ? "]" : "");
            if (col + 1 + len > 80) col = fprintf(f, "\n%*s", indent + 6, "") - 1;
            col += fprintf(f, " %s", item);
        }
    int t = trailing_of(cmd);
    if (t >= 0) {
        if (col + 4 + (int)strlen(trailings[t].metavar) > 80) fprintf(f, "\n%*s", indent + 6, "");
        fprintf(f, " -- %s", trailings[t].metavar);
    }
    fputc('\n', f);
}

/* "  SPEC          TEXT...": the text in a column from 30, wrapped. */
static void help_row(FILE *f, const char *spec, const char *text) {
    int col = fprintf(f, "  %s", spec);
    if (col > 28) {
        fprintf(f, "\n%30s", "");
        col = 30;
    } else {
        col += fprintf(f, "%*s", 30 - col, "");
    }
    wrap(f, text, col, 30);
}

void cli_help_command(FILE *f, cli_cmd_id cmd) {
    const cli_command *c = &cli_commands[cmd];
    fprintf(f, "flare %s %s — %s\n\nusage: ", c->group, c->verb, c->summary);
    synopsis(f, cmd, 0);
    fprintf(f, "\nflags:\n");
    for (int i = 0; i < F_COUNT_; i++) {
        const cli_flag *fl = &flags[i];
        if (!takes(fl, cmd)) continue;
        char spec[160], text[1200], also[200] = "";
        flag_spec(fl, spec, sizeof spec);
        for (int a = 0; aliases[a].name; a++) {
            if (aliases[a].flag != i || !((aliases[a].cmds >> cmd) & 1u)) continue;
            size_t k = strlen(also);
            char sh[8] = "";
            if (aliases[a].shrt) snprintf(sh, sizeof sh, "-%c, ", aliases[a].shrt);
            snprintf(also + k, sizeof also - k, "%s%s--%s", k ? ", " : "", sh, aliases[a].name);
        }
        if (fl->dflt == cli_required)
            snprintf(text, sizeof text, "%s (required)", fl->help);
        else if (fl->dflt && fl->type != FT_BOOL)
            snprintf(text, sizeof text, "%s (default:%c%s)", fl->help, NBSP, fl->dflt);
        else
            snprintf(text, sizeof text, "%s", fl->help);
        if (also[0]) {
            size_t k = strlen(text);
            snprintf(text + k, sizeof text - k, " (also%c%s)", NBSP, also);
        }
        help_row(f, spec, text);
    }
    int t = trailing_of(cmd);
    if (t >= 0) {
        char spec[160];
        snprintf(spec, sizeof spec, "-- %s", trailings[t].metavar);
        help_row(f, spec, trailings[t].help);
    }
    fprintf(f, "  -h, --help                  this text\n\n"
               "Flags take their value as --name VALUE or --name=VALUE (-x VALUE for short "
               "forms).\nExit status: 0 success, 1 failure (flare: <reason>), 2 usage error.\n");
    int first = 1;
    for (int x = 0; examples[x].args; x++) {
        if (examples[x].cmd != (int)cmd) continue;
        fprintf(f, "%s  # %s\n  flare %s %s %s\n", first ? "\nexamples:\n" : "",
                examples[x].comment, c->group, c->verb, examples[x].args);
        first = 0;
    }
}

void cli_help_group(FILE *f, const char *group) {
    for (int g = 0; g < N_GROUPS; g++)
        if (!strcmp(groups[g].name, group)) fprintf(f, "flare %s — %s\n\n", group, groups[g].summary);
    fprintf(f, "commands:\n");
    for (int c = 0; c < CMD_COUNT_; c++) {
        if (strcmp(cli_commands[c].group, group)) continue;
        fprintf(f, "  %-8s  ", cli_commands[c].verb);
        wrap(f, cli_commands[c].summary, 12, 12);
    }
    fprintf(f, "\nusage:\n");
    for (int c = 0; c < CMD_COUNT_; c++)
        if (!strcmp(cli_commands[c].group, group)) synopsis(f, (cli_cmd_id)c, 2);
    fprintf(f, "\nflare %s VERB --help describes each flag.\n", group);
}

void cli_help_main(FILE *f) {
    fprintf(f, "flare %s — coverage-guided testing of neural networks and LLM agent systems\n\n"
               "usage: flare GROUP VERB [flags]\n"
               "       flare GROUP VERB --help      (or: flare help GROUP VERB)\n"
               "       flare GROUP --help\n"
               "       flare --version\n\n",
            FLARE_VERSION);
    for (int g = 0; g < N_GROUPS; g++) {
        fprintf(f, "%s: %s\n", groups[g].name, groups[g].summary);
        for (int c = 0; c < CMD_COUNT_; c++) {
            if (strcmp(cli_commands[c].group, groups[g].name)) continue;
            fprintf(f, "  %s %-8s ", cli_commands[c].group, cli_commands[c].verb);
            wrap(f, cli_commands[c].summary, 14, 14);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "synopsis (REQUIRED flags first, [optional] with defaults in each --help):\n");
    for (int c = 0; c < CMD_COUNT_; c++) synopsis(f, (cli_cmd_id)c, 2);
    fprintf(f, "\nExit status: 0 success, 1 failure (flare: <reason>), 2 usage error.\n"
               "Documentation: docs/cli.md\n");
}
