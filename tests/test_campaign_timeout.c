/* The campaign's timeout and --max-len (docs/agents-campaign.md, "Timeouts"): calibration from the seeds'
 * dry run without -T, the dry run's checks (every seed failing is refused, a failing seed is
 * warned about), a slow start that is no case's cost, the time lost to timeouts in
 * fuzzer_stats, and resume keeping the recorded timeout. Against tests/targets/campaign_tgt.c and /bin/sleep (a target that never answers). */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128], boom[128];

static int setup(void **state) {
    (void)state;
    if (camp_fix_dir(tmp, "camptmo", tgt)) return -1;
    char p[256];
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    snprintf(boom, sizeof boom, "%s/boom", tmp);
    mkdir(seeds, 0755), mkdir(boom, 0755);
    snprintf(p, sizeof p, "%s/a.txt", seeds), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/b.txt", seeds), write_file(p, "please boom the bridge");
    snprintf(p, sizeof p, "%s/a.txt", boom), write_file(p, "boom");
    snprintf(p, sizeof p, "%s/b.txt", boom), write_file(p, "boom boom");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

static void opts(fl_campaign_opts *o, const char *in, const char *out, char **argv) {
    fl_campaign_opts_default(o);
    o->in_dir = in, o->out_dir = out, o->argv = argv;
    o->max_execs = 40, o->seed = 3, o->write_report = 0;
}

static void test_calibrate_rule(void **state) {
    (void)state;
    assert_int_equal(camp_timeout_calibrate(0), FL_CAMPAIGN_TIMEOUT_FLOOR);
    assert_int_equal(camp_timeout_calibrate(10), FL_CAMPAIGN_TIMEOUT_FLOOR);
    assert_int_equal(camp_timeout_calibrate(401), 2100); /* 5 x 401 = 2005, up to 100 ms */
    assert_int_equal(camp_timeout_calibrate(1e6), FL_CAMPAIGN_TIMEOUT_CAP);
    assert_int_equal(camp_max_len_default(10), FL_CAMPAIGN_LEN_FLOOR);
    assert_int_equal(camp_max_len_default(1500), 6000);
    assert_int_equal(camp_max_len_default(100000), FL_CAMPAIGN_LEN_CAP);
}

/* No -T: calibrated and recorded, and kept on resume (with --max-len). */
static void test_calibrated_and_resumed(void **state) {
    (void)state;
    char out[160], *argv[] = {tgt, NULL};
    snprintf(out, sizeof out, "%s/out_cal", tmp);
    fl_campaign_opts o;
    opts(&o, seeds, out, argv);
    fl_campaign_result r;
    fl_err e = {0};
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    /* the seeds answer in milliseconds: near the floor, but a loaded machine may be slower */
    assert_true(r.stats.timeout_ms >= FL_CAMPAIGN_TIMEOUT_FLOOR &&
                r.stats.timeout_ms < FL_CAMPAIGN_TIMEOUT_CAP && r.stats.timeout_ms % 100 == 0);
    assert_string_equal(r.stats.timeout_source, "calibrated");
    assert_int_equal(r.stats.max_len, FL_CAMPAIGN_LEN_FLOOR); /* 4 x 22 bytes, below it */
    char *v = stat_val(out, "max_len");
    assert_int_equal(atoi(v), FL_CAMPAIGN_LEN_FLOOR);
    free(v);
    v = stat_val(out, "timeout_ms");
    assert_int_equal(atoi(v), r.stats.timeout_ms);
    free(v);
    v = stat_val(out, "timeout_source"), assert_string_equal(v, "calibrated"), free(v);
    v = stat_val(out, "hang_share"), assert_string_equal(v, "0.00%"), free(v);
    v = stat_val(out, "case_time"), assert_true(strtod(v, NULL) > 0), free(v);

    /* -T once, then resumed without it: the record holds */
    snprintf(out, sizeof out, "%s/out_res", tmp);
    opts(&o, seeds, out, argv);
    o.timeout_ms = 2500, o.max_len = 1000;
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    assert_string_equal(r.stats.timeout_source, "flag");
    opts(&o, "-", out, argv);
    o.max_execs = 60;
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    assert_int_equal(r.stats.timeout_ms, 2500);
    assert_string_equal(r.stats.timeout_source, "resumed");
    assert_int_equal(r.stats.max_len, 1000);

    /* min and replay find the record from the campaign's folder or anything inside it */
    char p[256];
    assert_int_equal(fl_campaign_recorded_timeout(out), 2500);
    snprintf(p, sizeof p, "%s/", out), assert_int_equal(fl_campaign_recorded_timeout(p), 2500);
    snprintf(p, sizeof p, "%s/queue", out), assert_int_equal(fl_campaign_recorded_timeout(p), 2500);
    snprintf(p, sizeof p, "%s/failures/crash/x.json", out);
    assert_int_equal(fl_campaign_recorded_timeout(p), 2500);
    assert_int_equal(fl_campaign_recorded_timeout(seeds), 0);
    assert_int_equal(fl_campaign_recorded_timeout("no/such/x.json"), 0);
}

/* A target that takes 500 ms to start (a shell waits, then becomes the target): the timeout is
 * calibrated from what a case costs, the seed that paid the start-up left out (timed again),
 * and a new process's first case gets the start-up allowance instead, so no case hangs. */
static void test_slow_start(void **state) {
    (void)state;
    char out[160], sh[300];
    snprintf(out, sizeof out, "%s/out_slow", tmp);
    snprintf(sh, sizeof sh, "sleep 0.5; exec '%s'", tgt);
    char *argv[] = {"/bin/sh", "-c", sh, NULL};
    char in[160], p[200];
    snprintf(in, sizeof in, "%s/slow_seeds", tmp);
    mkdir(in, 0755);
    snprintf(p, sizeof p, "%s/a.txt", in), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/b.txt", in), write_file(p, "please search");
    fl_campaign_opts o;
    opts(&o, in, out, argv);
    o.max_execs = 20;
    fl_campaign_result r;
    fl_err e = {0};
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    assert_true(r.stats.timeout_ms < 5 * 500); /* the start-up in it would make it 2600 */
    assert_true(r.stats.startup_ms >= 5 * 500);
    assert_int_equal(r.stats.hangs, 0);
    char *v = stat_val(out, "startup_ms");
    assert_int_equal(atoi(v), r.stats.startup_ms);
    free(v);
}

/* Every seed crashes: refused, naming the seeds folder. */
static void test_every_seed_crashes(void **state) {
    (void)state;
    char out[160], *argv[] = {tgt, NULL};
    snprintf(out, sizeof out, "%s/out_boom", tmp);
    fl_campaign_opts o;
    opts(&o, boom, out, argv);
    fl_err e = {0};
    assert_int_not_equal(fl_campaign_run(&o, NULL, &e), FL_OK);
    assert_non_null(strstr(e.msg, "every seed (2) crashed or timed out"));
    assert_non_null(strstr(e.msg, boom));
}

/* A target that never answers: every seed hangs, refused; the time is counted as lost. */
static void test_every_seed_hangs(void **state) {
    (void)state;
    char out[160], *argv[] = {"/bin/sleep", "100", NULL};
    if (access("/bin/sleep", X_OK)) TU_SKIP("no /bin/sleep");
    snprintf(out, sizeof out, "%s/out_hang", tmp);
    fl_campaign_opts o;
    opts(&o, seeds, out, argv);
    o.timeout_ms = 200;
    fl_err e = {0};
    fl_campaign_result r;
    assert_int_not_equal(fl_campaign_run(&o, &r, &e), FL_OK);
    assert_non_null(strstr(e.msg, "every seed (2) crashed or timed out at 200 ms"));
    assert_int_equal(r.stats.hangs, 2);
    assert_true(r.stats.hang_seconds >= 0.3 && r.stats.hang_seconds <= r.stats.case_seconds);
}

/* Hang-prone entries lose energy: of two entries alike but for their children's timeouts, the
 * one whose children all hung is picked far less often and gets less energy. */
static void test_hang_prone_energy(void **state) {
    (void)state;
    for (int sched = FL_SCHED_EXPLORE; sched <= FL_SCHED_EXPLOIT; sched++) {
        q_queue q;
        fl_err e = {0};
        assert_int_equal(q_init(&q, (fl_schedule)sched, &e), FL_OK);
        /* nine entries alike; the first one's children all hung, the others' did not */
        uint32_t f[9];
        q_entry *x[9];
        for (int k = 0; k < 9; k++) {
            f[k] = (uint32_t)k + 1;
            x[k] = q_add(&q, fl_case_new(1, (const char *[]){"a"}), -1, 1, 1, (uint64_t)k + 1,
                         &f[k], 1);
            assert_non_null(x[k]);
            for (int i = 0; i < 40; i++) q_child(&q, x[k], k == 0, k == 0 ? 100 : 1);
        }
        q.n_seeds = 9;
        fl_rng r;
        fl_rng_seed(&r, 7);
        long picks[2] = {0}, energy[2] = {0};
        for (int i = 0; i < 4000; i++) {
            int en;
            q_entry *p = q_pick(&q, &r, &en);
            picks[p != x[0]] += 1, energy[p != x[0]] += en;
        }
        print_message("schedule %d: hang-prone picked %ld (energy %ld), 8 others %ld (%ld)\n",
                      sched, picks[0], energy[0], picks[1], energy[1]);
        assert_true(picks[0] * 8 * 3 < picks[1]);   /* under a third of an average entry's */
        assert_true(energy[0] * 8 * 3 < energy[1]);
        q_free(&q);
    }
}

/* -i equal to -o, or inside it: refused before anything runs. */
static void test_in_inside_out(void **state) {
    (void)state;
    char *argv[] = {tgt, NULL}, in[200];
    fl_campaign_opts o;
    fl_err e = {0};
    opts(&o, seeds, seeds, argv);
    assert_int_not_equal(fl_campaign_run(&o, NULL, &e), FL_OK);
    assert_non_null(strstr(e.msg, "the same folder as"));
    snprintf(in, sizeof in, "%s/seeds", tmp);
    opts(&o, in, tmp, argv);
    assert_int_not_equal(fl_campaign_run(&o, NULL, &e), FL_OK);
    assert_non_null(strstr(e.msg, "inside"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calibrate_rule),
        cmocka_unit_test(test_calibrated_and_resumed),
        cmocka_unit_test(test_slow_start),
        cmocka_unit_test(test_every_seed_crashes),
        cmocka_unit_test(test_every_seed_hangs),
        cmocka_unit_test(test_hang_prone_energy),
        cmocka_unit_test(test_in_inside_out),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
