/* The ONNX backend conformance suite (ONNX 1.12 node tests, Debian package libonnx-testdata):
 * every test whose operators flare supports must pass with ONNX's tolerances. The full list —
 * passed, failed, and skipped with the reason — is written to <build>/conformance.txt. */
#include <dirent.h>

#include "testutil.h"
#include "flare/onnx.h"

#define NODE_TESTS "/usr/share/libonnx-testdata/data/node"

/* onnx/backend/test/loader: rtol = 1e-3, atol = 1e-7 unless a test says otherwise (none of
 * the node tests do). */
#define RTOL 1e-3
#define ATOL 1e-7

/* Tests that load (every operator is known) but use a feature flare rejects on purpose. They
 * are still run: one that passes means the entry is stale and fails the suite. */
static const struct { const char *name, *reason; } known_unsupported[] = {
    {"test_convtranspose_1d", "ConvTranspose is 2-D only"},
    {"test_convtranspose_3d", "ConvTranspose is 2-D only"},
    {NULL, NULL},
};

static const char *known_reason(const char *name) {
    for (int i = 0; known_unsupported[i].name; i++)
        if (strcmp(known_unsupported[i].name, name) == 0) return known_unsupported[i].reason;
    return NULL;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char report_path[4096] = "build/conformance.txt";

static void test_node_suite(void **state) {
    DIR *d = opendir(NODE_TESTS);
    if (!d) {
        print_message("conformance: %s not found (install libonnx-testdata); skipped\n", NODE_TESTS);
        skip();
    }
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, "test_", 5) != 0) continue;
        if (n == cap) names = realloc(names, sizeof *names * (size_t)(cap = cap ? 2 * cap : 1024));
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    FILE *out = fopen(report_path, "w");
    int count[3] = {0};
    static const char *const label[3] = {"PASS", "FAIL", "SKIP"};
    for (int i = 0; i < n; i++) {
        char dir[4096];
        fl_conf_result r;
        const char *why = known_reason(names[i]);
        snprintf(dir, sizeof dir, "%s/%s", NODE_TESTS, names[i]);
        fl_onnx_conformance_run(dir, RTOL, ATOL, &r);
        if (why && r.status == FL_CONF_PASS) {
            r.status = FL_CONF_FAIL;
            snprintf(r.reason, sizeof r.reason, "listed as known unsupported (%s) but passes: "
                     "remove it from the list in tests/test_conformance.c", why);
        } else if (why) {
            r.status = FL_CONF_SKIP;
            snprintf(r.reason, sizeof r.reason, "known unsupported: %s", why);
        }
        count[r.status]++;
        if (out)
            fprintf(out, "%s %s%s%s%s\n", label[r.status], names[i], r.ops[0] ? " [" : "", r.ops,
                    r.ops[0] ? "]" : "");
        if (out && r.status != FL_CONF_PASS) fprintf(out, "    %s\n", r.reason);
        if (r.status == FL_CONF_FAIL) print_message("FAIL %s [%s]: %s\n", names[i], r.ops, r.reason);
        free(names[i]);
    }
    free(names);
    if (out) fclose(out);
    print_message("conformance: %d passed, %d failed, %d skipped (list in %s)\n", count[0],
                  count[1], count[2], report_path);
    assert_true(count[0] > 0);
    assert_int_equal(count[1], 0);
}

int main(int argc, char **argv) {
    /* <build>/tests/test_conformance -> <build>/conformance.txt */
    const char *slash = strrchr(argv[0], '/');
    if (argc > 0 && slash && slash - argv[0] > 6 && strncmp(slash - 6, "/tests", 6) == 0)
        snprintf(report_path, sizeof report_path, "%.*s/conformance.txt", (int)(slash - 6 - argv[0]),
                 argv[0]);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_node_suite)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
