/* flare — the command line: `flare GROUP VERB [flags]`.
 *
 * main only dispatches: it finds the command, lets the table-driven parser (flags.c) fill a
 * cli_opts, and calls the command's handler, which calls into libflare. Everything a user
 * can type is described in flags.def.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int is_help(const char *s) {
    return !strcmp(s, "--help") || !strcmp(s, "-h") || !strcmp(s, "help");
}

/* An unknown group or verb, with the closest known one when it looks like a typo. */
static int unknown_command(const char *group, const char *verb) {
    cli_suggest s;
    cli_suggest_init(&s, verb ? verb : group);
    for (int c = 0; c < CMD_COUNT_; c++)
        if (!verb) cli_suggest_add(&s, cli_commands[c].group);
        else if (!strcmp(cli_commands[c].group, group)) cli_suggest_add(&s, cli_commands[c].verb);
    if (!verb)
        fprintf(stderr, "flare: unknown command group '%s'", group);
    else
        fprintf(stderr, "flare: unknown command '%s %s'", group, verb);
    if (s.best && verb) fprintf(stderr, "; did you mean 'flare %s %s'?", group, s.best);
    else if (s.best) fprintf(stderr, "; did you mean '%s'?", s.best);
    fprintf(stderr, "\n(see: flare %s%s--help)\n", verb ? group : "", verb ? " " : "");
    return CLI_USAGE;
}

/* `flare help [GROUP [VERB]]` */
static int help(int argc, char **argv) {
    if (argc == 0) {
        cli_help_main(stdout);
        return CLI_OK;
    }
    if (!cli_group_exists(argv[0])) return unknown_command(argv[0], NULL);
    if (argc == 1) {
        cli_help_group(stdout, argv[0]);
        return CLI_OK;
    }
    int c = cli_find_command(argv[0], argv[1]);
    if (c < 0) return unknown_command(argv[0], argv[1]);
    cli_help_command(stdout, (cli_cmd_id)c);
    return CLI_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_help_main(stderr);
        return CLI_USAGE;
    }
    const char *group = argv[1];
    if (!strcmp(group, "--version") || !strcmp(group, "-V") || !strcmp(group, "version")) {
        printf("flare %s\n", FLARE_VERSION);
        return CLI_OK;
    }
    if (!strcmp(group, "help")) return help(argc - 2, argv + 2);
    if (is_help(group)) return help(0, NULL);
    if (group[0] == '-') {
        fprintf(stderr, "flare: unknown flag %s before the command\n(see: flare --help)\n",
                group);
        return CLI_USAGE;
    }
    if (!cli_group_exists(group)) return unknown_command(group, NULL);
    if (argc < 3 || is_help(argv[2])) {
        cli_help_group(argc < 3 ? stderr : stdout, group);
        return argc < 3 ? CLI_USAGE : CLI_OK;
    }
    int c = cli_find_command(group, argv[2]);
    if (c < 0) return unknown_command(group, argv[2]);

    cli_opts o;
    int rc = cli_parse((cli_cmd_id)c, argc - 3, argv + 3, &o);
    if (rc == CLI_OK) rc = cli_commands[c].run(&o);
    else if (rc < 0) rc = CLI_OK; /* --help was printed */
    cli_opts_free(&o);
    return rc;
}
