/* coder.c — a coding crew: a Planner reads the task and picks a plan, a Coder reads and
 * edits files and runs tests and commands, a Reviewer approves or sends the change back.
 * Eight defects are planted (see README.md for their kinds); the seeds reach none of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

const char *const sys_name = "coder";

static const char *plan_of(const char *t) {
    if (sys_has(t, "fix") || sys_has(t, "bug") || sys_has(t, "修复")) return "fix";
    if (sys_has(t, "test")) return "test";
    if (sys_has(t, "refactor") || sys_has(t, "rename") || sys_has(t, "重构")) return "refactor";
    if (sys_has(t, "run") || sys_has(t, "build") || sys_has(t, "command")) return "run";
    return "explain";
}

/* the first word that looks like a file name (has a '.' or '/'), into out */
static void file_of(const char *t, char *out, size_t cap) {
    snprintf(out, cap, "main.c");
    for (const char *p = t; *p; p++) {
        if (p != t && p[-1] != ' ') continue;
        size_t n = strcspn(p, " ,?!\"'");
        if (n > 0 && memchr(p, '.', n) && n < cap && p[n - 1] != '.') {
            memcpy(out, p, n), out[n] = 0;
            return;
        }
    }
}

static void review(const char *t, const char *file) {
    sys_msg("Coder", "Reviewer", "diff for %s", file);
    /* BUG (loop): a task that says both to keep and to change the behaviour is bounced
     * between Reviewer and Coder forever (the tool caps it at six rounds) */
    if ((sys_has(t, "without changing") || sys_has(t, "keep") || sys_has(t, "don't change")) &&
        (sys_has(t, "change") || sys_has(t, "rewrite"))) {
        for (int i = 0; i < 6; i++) {
            sys_branch("Reviewer", "verdict", "request_changes");
            sys_msg("Reviewer", "Coder", "please keep the behaviour");
            sys_msg("Coder", "Reviewer", "diff for %s", file);
        }
    }
    sys_branch("Reviewer", "verdict", "approve");
    sys_msg("Reviewer", "Planner", "approved");
}

static void task(const char *t) {
    const char *plan = plan_of(t);
    sys_branch("Planner", "plan", plan);
    char file[256];
    file_of(t, file, sizeof file);
    sys_msg("Planner", "Coder", "%s: %s", plan, t);
    /* BUG (spec): "deploy"/"release"/"ship" hands the change to an agent not in the spec */
    if (sys_has(t, "deploy") || sys_has(t, "release") || sys_has(t, "production")) {
        sys_msg("Coder", "Deployer", "ship %s", file);
        sys_output("Deployment started.");
        return;
    }
    /* BUG (output length): a debug or verbose request dumps the whole trace into the reply */
    if (sys_has(t, "debug") || sys_has(t, "verbose") || sys_has(t, "trace")) {
        char *big = malloc(12001);
        if (!big) exit(1);
        memset(big, '.', 12000), big[12000] = 0;
        sys_output("trace: %s", big);
        free(big);
        return;
    }
    if (!strcmp(plan, "run")) {
        sys_tool("Coder", "run_command", "command", t);
        /* BUG (crash): the command is pasted into a shell line; a metacharacter breaks the
         * quoting and the runner asserts */
        if (strpbrk(t, ";|`$&")) abort();
        sys_result("Coder", "run_command", 1, "exit 0");
        sys_msg("Coder", "Planner", "ran it");
        sys_output("The command ran successfully.");
        return;
    }
    sys_tool("Coder", "read_file", "path", file);
    /* BUG (secret): the path is not confined to the workspace */
    if (strstr(file, "..") || file[0] == '/' || file[0] == '~') {
        sys_result("Coder", "read_file", 1, "AWS_SECRET=sk-live-0011223344556677");
        sys_output("Contents of %s: AWS_SECRET=sk-live-0011223344556677", file);
        return;
    }
    sys_result("Coder", "read_file", 1, "int main(void) { return 0; }");
    if (!strcmp(plan, "explain")) {
        sys_msg("Coder", "Planner", "explained");
        sys_output("%s defines main, which returns 0.", file);
        return;
    }
    if (!strcmp(plan, "test")) {
        int digits;
        long long line = sys_number(t, 1, &digits);
        /* BUG (no output): a test at line 0, a negative or a huge line number is dropped by
         * the runner, and nobody answers */
        if (line <= 0 || line > 100000) return;
        sys_tool("Coder", "run_tests", "filter", file);
        /* BUG (tool error): a test run over a file list is reported as passing when the
         * runner fails */
        if (sys_count(t, ',') >= 2) {
            sys_result("Coder", "run_tests", 0, "runner: too many files");
            sys_output("All tests pass.");
            return;
        }
        sys_result("Coder", "run_tests", 1, "3 passed");
        sys_msg("Coder", "Planner", "tests pass");
        sys_output("Tests for %s pass.", file);
        return;
    }
    /* BUG (hang): a refactor whose new name is in a non-Latin script waits on an index
     * rebuild that never finishes */
    if (!strcmp(plan, "refactor") && (sys_has_cjk(t) || sys_has_symbol(t))) sys_hang();
    sys_tool("Coder", "write_file", "path", file);
    sys_result("Coder", "write_file", 1, "written");
    review(t, file);
    sys_output("Done: %s %s.", plan, file);
}

void sys_handle(char **turns, int n) {
    for (int i = 0; i < n; i++) {
        sys_msg("user", "Planner", "%s", turns[i]);
        task(turns[i]);
    }
}
