/* Resume is resume (docs/agents-campaign.md, "Stopping and resuming"): `-i -` takes the
 * recorded spec, schedule, seed, dictionary and timeout; a given option that differs from the
 * record is a warning naming both values; `--spec none` turns the spec off. Against
 * tests/targets/campaign_tgt.c. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128], spec[128], dict[128], out[128];

static int setup(void **state) {
    (void)state;
    if (camp_fix_dir(tmp, "campres", tgt)) return -1;
    char p[256];
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    snprintf(p, sizeof p, "%s/a.txt", seeds), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/b.txt", seeds), write_file(p, "search the web please");
    snprintf(spec, sizeof spec, "%s/spec.json", tmp);
    write_file(spec, "{\"agents\": [{\"name\": \"Master\", \"decisions\": {\"route\": "
                     "[\"math\", \"search\", \"chat\"]}}, {\"name\": \"Worker\", \"tools\": "
                     "[\"calc\", \"web\"]}, {\"name\": \"Checker\"}], \"entry\": \"Master\", "
                     "\"edges\": [[\"user\", \"Master\"], [\"Master\", \"Worker\"], [\"Worker\", "
                     "\"Master\"], [\"Master\", \"Checker\"], [\"Checker\", \"Master\"], "
                     "[\"Master\", \"output\"]]}");
    snprintf(dict, sizeof dict, "%s/words.dict", tmp);
    write_file(dict, "\"math\"\n\"search\"\n");
    snprintf(out, sizeof out, "%s/out", tmp);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

static void opts(fl_campaign_opts *o, const char *in, char **argv) {
    fl_campaign_opts_default(o);
    o->in_dir = in, o->out_dir = out, o->argv = argv;
    o->max_execs = 30, o->seed = 99, o->write_report = 0;
}

/* fl_campaign_run with stderr into a file; returns the status and what was written there. */
static fl_status run_logged(const fl_campaign_opts *o, fl_campaign_result *r, fl_err *e,
                            char **log) {
    char p[256];
    snprintf(p, sizeof p, "%s/stderr.txt", tmp);
    fflush(stderr);
    int saved = dup(2), fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2), close(fd);
    fl_status st = fl_campaign_run(o, r, e);
    fflush(stderr);
    dup2(saved, 2), close(saved);
    *log = slurp(p);
    fprintf(stderr, "%s", *log);
    return st;
}

static void test_resume_keeps_the_record(void **state) {
    (void)state;
    char *argv[] = {tgt, NULL}, *log, *v;
    fl_campaign_opts o;
    fl_campaign_result r;
    fl_err e = {0};
    opts(&o, seeds, argv);
    o.spec_path = spec, o.dict_path = dict, o.seed = 11, o.schedule = FL_SCHED_EXPLOIT;
    o.timeout_ms = 2000;
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    char *spec_abs = realpath(spec, NULL), *dict_abs = realpath(dict, NULL);
    v = stat_val(out, "spec"), assert_string_equal(v, spec_abs), free(v);
    v = stat_val(out, "dict"), assert_string_equal(v, dict_abs), free(v);

    /* resumed with nothing given: the record's spec, dictionary, schedule, seed, timeout */
    opts(&o, "-", argv);
    if (run_logged(&o, &r, &e, &log)) fail_msg("%s", e.msg);
    assert_int_equal(r.stats.seed, 11);
    assert_string_equal(r.stats.schedule, "exploit");
    assert_int_equal(r.stats.timeout_ms, 2000);
    assert_true(r.stats.edges_allowed > 0); /* the spec is on */
    assert_null(strstr(log, "warning"));
    free(log);
    v = stat_val(out, "spec"), assert_string_equal(v, spec_abs), free(v);
    v = stat_val(out, "dict"), assert_string_equal(v, dict_abs), free(v);
    v = stat_val(out, "schedule"), assert_string_equal(v, "exploit"), free(v);

    /* given and different: used, with a warning naming both values */
    opts(&o, "-", argv);
    o.schedule = FL_SCHED_NONE, o.seed = 5, o.timeout_ms = 1500;
    o.given = FL_CAMP_GIVEN_SCHEDULE | FL_CAMP_GIVEN_SEED;
    if (run_logged(&o, &r, &e, &log)) fail_msg("%s", e.msg);
    assert_string_equal(r.stats.schedule, "none");
    assert_int_equal(r.stats.seed, 5);
    assert_non_null(strstr(log, "--schedule none differs from the recorded exploit"));
    assert_non_null(strstr(log, "-s 5 differs from the recorded 11"));
    assert_non_null(strstr(log, "-T 1500 differs from the recorded 2000"));
    free(log);

    /* --spec none: off, and recorded as off */
    opts(&o, "-", argv);
    o.spec_path = "none";
    if (run_logged(&o, &r, &e, &log)) fail_msg("%s", e.msg);
    assert_int_equal(r.stats.edges_allowed, 0);
    assert_true(r.stats.inter_cov < 0);
    free(log);
    v = stat_val(out, "spec"), assert_string_equal(v, ""), free(v);
    free(spec_abs), free(dict_abs);
}

/* The recorded dictionary is gone: an error naming it and the way out. */
static void test_resume_record_gone(void **state) {
    (void)state;
    char *argv[] = {tgt, NULL}, moved[160];
    snprintf(moved, sizeof moved, "%s.moved", dict);
    assert_int_equal(rename(dict, moved), 0);
    fl_campaign_opts o;
    fl_err e = {0};
    opts(&o, "-", argv);
    assert_int_not_equal(fl_campaign_run(&o, NULL, &e), FL_OK);
    assert_non_null(strstr(e.msg, "words.dict"));
    assert_non_null(strstr(e.msg, "is gone"));
    assert_int_equal(rename(moved, dict), 0);
}

/* A seed's "expect" survives in its queue entry, so a resumed campaign still checks it: with
 * the saved findings removed, the resumed run finds the broken expectation again. */
static void test_resume_keeps_expectations(void **state) {
    (void)state;
    char *argv[] = {tgt, NULL}, in[160], p[256], *log;
    snprintf(in, sizeof in, "%s/seeds_expect", tmp);
    mkdir(in, 0755);
    snprintf(p, sizeof p, "%s/c.json", in);
    write_file(p, "{\"turns\": [\"what is math\"], \"expect\": {\"contains\": \"zebra-never-said\"}}");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    assert_int_equal(system(cmd), 0);
    fl_campaign_opts o;
    fl_campaign_result r;
    fl_err e = {0};
    opts(&o, in, argv);
    o.timeout_ms = 2000, o.max_execs = 5;
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    snprintf(p, sizeof p, "%s/queue/id:000000,orig:c.json", out);
    char *q = slurp(p);
    assert_non_null(strstr(q, "\"expect\":{\"contains\":[\"zebra-never-said\"]}"));
    free(q);
    assert_int_equal(tu_sh(NULL, "grep -rlq 'expectation:contains' %s/failures", out), 0);

    snprintf(cmd, sizeof cmd, "rm -rf %s/failures", out);
    assert_int_equal(system(cmd), 0);
    opts(&o, "-", argv);
    o.max_execs = 5;
    if (run_logged(&o, &r, &e, &log)) fail_msg("%s", e.msg);
    free(log);
    assert_int_equal(tu_sh(NULL, "grep -rlq 'expectation:contains' %s/failures", out), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_keeps_the_record),
        cmocka_unit_test(test_resume_record_gone),
        cmocka_unit_test(test_resume_keeps_expectations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
