/* The ONNX backend conformance suites (ONNX 1.12, Debian package libonnx-testdata): the node
 * tests and the PyTorch-converted and PyTorch-operator models. Every test whose operators
 * flare supports must pass with ONNX's tolerances. The full list — passed, failed, and
 * skipped with the reason — is written to <build>/conformance.txt. */
#include <dirent.h>

#include "testutil.h"
#include "flare/onnx.h"

#define SUITES "/usr/share/libonnx-testdata/data/"
static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator"};

/* onnx/backend/test/loader: rtol = 1e-3, atol = 1e-7 unless a test says otherwise (none of
 * the node tests do). */
#define RTOL 1e-3
#define ATOL 1e-7

/* Tests that load (every operator is known) but use a feature flare rejects on purpose. They
 * are still run: one that passes means the entry is stale and fails the suite. */
static const struct { const char *name, *reason; } known_unsupported[] = {
    {"test_convtranspose_1d", "ConvTranspose is 2-D only"},
    {"test_convtranspose_3d", "ConvTranspose is 2-D only"},
    /* the expected outputs hold numpy's random mask; flare draws its own */
    {"test_training_dropout", "Dropout's training mask comes from flare's RNG"},
    {"test_training_dropout_default", "Dropout's training mask comes from flare's RNG"},
    {"test_training_dropout_default_mask", "Dropout's training mask comes from flare's RNG"},
    {"test_training_dropout_mask", "Dropout's training mask comes from flare's RNG"},
    {NULL, NULL},
};

static const char *known_reason(const char *name) {
    for (int i = 0; known_unsupported[i].name; i++)
        if (strcmp(known_unsupported[i].name, name) == 0) return known_unsupported[i].reason;
    return NULL;
}

/* Tests that must PASS (one name a line): every test that passed when the list was last
 * written. A listed test that is skipped fails the suite — an op that starts refusing an
 * attribute, or an opset refused by mistake, must not turn passes into silent skips. A test
 * that starts passing is reported, to be added. */
#define EXPECTED "tests/fixtures/conformance_pass.txt"

static char **expected;
static int n_expected;

static void read_expected(void) {
    FILE *f = fopen(EXPECTED, "r");
    char line[600];
    if (!f) fail_msg("cannot read %s (run the tests from the repository root)", EXPECTED);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        expected = realloc(expected, sizeof *expected * (size_t)(n_expected + 1));
        expected[n_expected++] = strdup(line);
    }
    fclose(f);
}

static int is_expected(const char *name) {
    for (int i = 0; i < n_expected; i++)
        if (strcmp(expected[i], name) == 0) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char report_path[4096] = "build/conformance.txt";

/* Append the test directories of one suite to *names as "<suite>/test_..." (the node
 * suite's without the prefix, as the list above names them). Returns 0 when it is missing. */
static int list_suite(const char *suite, char ***names, int *n, int *cap) {
    char path[512];
    snprintf(path, sizeof path, SUITES "%s", suite);
    DIR *d = opendir(path);
    if (!d) return 0;
    int first = *n;
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, "test_", 5) != 0) continue;
        if (*n == *cap) *names = realloc(*names, sizeof **names * (size_t)(*cap = *cap ? 2 * *cap : 1024));
        char name[600];
        snprintf(name, sizeof name, "%s%s%s", strcmp(suite, "node") ? suite : "",
                 strcmp(suite, "node") ? "/" : "", de->d_name);
        (*names)[(*n)++] = strdup(name);
    }
    closedir(d);
    qsort(*names + first, (size_t)(*n - first), sizeof **names, cmp_str);
    return 1;
}

static void test_suites(void **state) {
    char **names = NULL;
    int n = 0, cap = 0, found = 0;
    for (size_t k = 0; k < sizeof suites / sizeof suites[0]; k++)
        found += list_suite(suites[k], &names, &n, &cap);
    if (!found) {
        TU_NEED(found, "libonnx-testdata (" SUITES ")");
    }
    read_expected();
    FILE *out = fopen(report_path, "w");
    int count[3] = {0}, unlisted = 0;
    static const char *const label[3] = {"PASS", "FAIL", "SKIP"};
    for (int i = 0; i < n; i++) {
        char dir[4096];
        fl_conf_result r;
        const char *why = known_reason(names[i]);
        snprintf(dir, sizeof dir, SUITES "%s%s", strchr(names[i], '/') ? "" : "node/", names[i]);
        fl_onnx_conformance_run(dir, RTOL, ATOL, &r);
        if (why && r.status == FL_CONF_PASS) {
            r.status = FL_CONF_FAIL;
            snprintf(r.reason, sizeof r.reason, "listed as known unsupported (%s) but passes: "
                     "remove it from the list in tests/test_conformance.c", why);
        } else if (why) {
            r.status = FL_CONF_SKIP;
            snprintf(r.reason, sizeof r.reason, "known unsupported: %s", why);
        } else if (r.status == FL_CONF_SKIP && is_expected(names[i])) {
            char was[sizeof r.reason];
            memcpy(was, r.reason, sizeof was);
            r.status = FL_CONF_FAIL;
            snprintf(r.reason, sizeof r.reason, "listed in " EXPECTED " but skipped: %.400s", was);
        } else if (r.status == FL_CONF_PASS && !is_expected(names[i])) {
            print_message("new pass: %s (add it to %s)\n", names[i], EXPECTED);
            unlisted++;
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
    for (int i = 0; i < n_expected; i++) free(expected[i]);
    free(expected);
    if (unlisted) print_message("%d passing tests are not in %s\n", unlisted, EXPECTED);
    assert_true(count[0] > 0);
    assert_int_equal(count[1], 0);
}

int main(int argc, char **argv) {
    /* <build>/tests/test_conformance -> <build>/conformance.txt */
    const char *slash = strrchr(argv[0], '/');
    if (argc > 0 && slash && slash - argv[0] > 6 && strncmp(slash - 6, "/tests", 6) == 0)
        snprintf(report_path, sizeof report_path, "%.*s/conformance.txt", (int)(slash - 6 - argv[0]),
                 argv[0]);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_suites)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
