/* The campaign's seeds (-i; docs/agents-campaign.md, "Seeds"): binary files are skipped with a
 * warning naming them, a folder of binary files only is an error, and an earlier campaign's
 * output folder given as -i gives its queue entries, never its logs, reports or findings.
 * Against tests/targets/campaign_tgt.c. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128];

static int setup(void **state) {
    (void)state;
    return camp_fix_dir(tmp, "campseeds", tgt) ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

static void write_bytes(const char *path, const void *b, size_t n) {
    fl_err e = {0};
    if (fl_file_write_atomic(path, b, n, &e) != FL_OK) fail_msg("%s", e.msg);
}

/* Run a short campaign from in into out with stderr captured; returns the status. */
static fl_status run(const char *in, const char *out, fl_campaign_result *r, fl_err *e, char **log) {
    char *argv[] = {tgt, NULL}, p[256];
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    o.in_dir = in, o.out_dir = out, o.argv = argv;
    o.max_execs = 10, o.seed = 4, o.write_report = 1, o.timeout_ms = 2000;
    snprintf(p, sizeof p, "%s/stderr.txt", tmp);
    fflush(stderr);
    int saved = dup(2), fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2), close(fd);
    fl_status st = fl_campaign_run(&o, r, e);
    fflush(stderr);
    dup2(saved, 2), close(saved);
    *log = slurp(p);
    fprintf(stderr, "%s", *log);
    return st;
}

/* the number of queue entries of out that came from a seed (id:...,orig:...) */
static int n_orig(const char *out) {
    char *o;
    assert_int_equal(tu_sh(&o, "ls %s/queue | grep -c ',orig:'", out), 0);
    int n = atoi(o);
    free(o);
    return n;
}

static void test_binary_seeds(void **state) {
    (void)state;
    char in[160], out[160], p[256], *log;
    snprintf(in, sizeof in, "%s/mixed", tmp);
    snprintf(out, sizeof out, "%s/o_mixed", tmp);
    mkdir(in, 0755);
    snprintf(p, sizeof p, "%s/a.txt", in), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/z.json", in), write_file(p, "{\"turns\": [\"search the web\"]}");
    snprintf(p, sizeof p, "%s/logo.png", in), write_bytes(p, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    snprintf(p, sizeof p, "%s/latin1.txt", in), write_bytes(p, "caf\xe9 au lait", 12);
    fl_campaign_result r;
    fl_err e = {0};
    if (run(in, out, &r, &e, &log)) fail_msg("%s", e.msg);
    if (!strstr(log, "logo.png: not a text seed (control byte 0x1a at offset 6)") ||
        !strstr(log, "latin1.txt: not a text seed (not UTF-8 text)"))
        fail_msg("no warnings naming the binary files in:\n%s", log);
    free(log);
    assert_int_equal(n_orig(out), 2); /* the text and the JSON seed only */

    /* only binary files: an error naming the folder, and nothing made */
    snprintf(in, sizeof in, "%s/binary", tmp);
    snprintf(out, sizeof out, "%s/o_binary", tmp);
    mkdir(in, 0755);
    snprintf(p, sizeof p, "%s/x.bin", in), write_bytes(p, "\x01\x02\x03\x04", 4);
    assert_int_equal(run(in, out, &r, &e, &log), FL_ERR_NOTFOUND);
    free(log);
    if (!strstr(e.msg, in) || !strstr(e.msg, "binary files there were skipped")) fail_msg("%s", e.msg);
    assert_int_not_equal(access(out, F_OK), 0);
}

static void test_campaign_folder_as_seeds(void **state) {
    (void)state;
    char in[160], out[160], out2[200], p[256], *log;
    snprintf(in, sizeof in, "%s/plain", tmp);
    snprintf(out, sizeof out, "%s/o_first", tmp);
    snprintf(out2, sizeof out2, "%s/o_second", tmp);
    mkdir(in, 0755);
    snprintf(p, sizeof p, "%s/a.txt", in), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/b.txt", in), write_file(p, "search the web please");
    fl_campaign_result r;
    fl_err e = {0};
    if (run(in, out, &r, &e, &log)) fail_msg("%s", e.msg);
    free(log);
    char *o;
    assert_int_equal(tu_sh(&o, "ls %s/queue | grep -c '^id:'", out), 0);
    int n_queue = atoi(o);
    free(o);
    assert_true(n_queue >= 2);
    /* the first campaign's out/ as -i: its queue, nothing else (report.html, fuzzer_stats, logs) */
    if (run(out, out2, &r, &e, &log)) fail_msg("%s", e.msg);
    if (!strstr(log, "of a campaign's output folder left out")) fail_msg("no note in:\n%s", log);
    free(log);
    assert_int_equal(n_orig(out2), n_queue);
    assert_int_equal(tu_sh(NULL, "ls %s/queue | grep -q 'orig:report\\|orig:fuzzer_stats\\|orig:target'", out2), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_seeds),
        cmocka_unit_test(test_campaign_folder_as_seeds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
