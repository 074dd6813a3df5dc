/* The layout of docs/architecture.md holds: scripts/modgraph.py finds no cycle between modules
 * in the #include lines, and no two files of one module that call each other in the objects
 * of the build the tests run against (the folder of $FLARE_BIN; build/ when unset). */
#include "testutil.h"

#include <libgen.h>
#include <unistd.h>

static char build_dir[4096];

static void modules_and_files_have_no_cycles(void **state) {
    (void)state;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "python3 scripts/modgraph.py --calls '%s'", build_dir);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 0);
}

int main(void) {
    const char *bin = getenv("FLARE_BIN");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", bin ? bin : "build/flare");
    snprintf(build_dir, sizeof build_dir, "%s", dirname(tmp));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modules_and_files_have_no_cycles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
