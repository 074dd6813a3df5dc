/* Known hangs cut early (docs/agents-campaign.md, "Timeouts"; src/agents/campaign/
 * campaign_stall.c): the target's stall check (fl_target_set_stall: a silence of idle_ms asks
 * the callback, which may end the case as a hang), the stall points a campaign learns from its
 * timeouts, the kill and restart counted as time lost, and timeouts kept out of the queue.
 * Against tests/targets/stall_tgt.c ("wait" in a request: silent for ever after 3 events). */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128];

static int setup(void **state) {
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/flare_stall_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    snprintf(tgt, sizeof tgt, "%s/stall_tgt", tmp);
    if (tu_build_target("stall_tgt", tgt)) return -1;
    char p[256];
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    snprintf(p, sizeof p, "%s/a.txt", seeds), write_file(p, "tell me the answer to this question");
    snprintf(p, sizeof p, "%s/b.txt", seeds), write_file(p, "please wait for the job to finish now");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

typedef struct asked {
    int n, answer, events; /* calls, what to answer, the trace's events at the last call */
} asked;

static int stall_cb(void *ctx, const fl_trace *t) {
    asked *a = ctx;
    a->n++, a->events = t->n_events;
    return a->answer;
}

static fl_trace *run_case(fl_target *t, const char *turn) {
    const char *turns[] = {turn};
    fl_case *c = fl_case_new(1, turns);
    fl_trace *tr = fl_trace_new();
    fl_err e = {0};
    if (fl_target_run(t, c, tr, &e) != FL_OK) fail_msg("fl_target_run: %s", e.msg);
    fl_case_free(c);
    return tr;
}

/* The target's side: a silence of idle_ms asks the callback once, with the trace so far; "yes"
 * ends the case there as a hang (the next process is started at once, its cost measured), "no"
 * lets it run to the timeout. A case that answers is never asked. */
static void test_target_stall(void **state) {
    (void)state;
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.timeout_ms = 1500, o.kill_grace_ms = 50;
    char *argv[] = {tgt, NULL};
    fl_target *t = NULL;
    fl_err e = {0};
    if (fl_target_new(argv, &o, &t, &e)) fail_msg("%s", e.msg);
    asked a = {0, 1, 0};
    fl_target_set_stall(t, 30, stall_cb, &a);

    fl_trace *tr = run_case(t, "answer me"); /* warm: the process has finished a case */
    assert_int_equal(tr->exit, FL_EXIT_DONE);
    assert_int_equal(a.n, 0);
    assert_int_equal(fl_target_stalled(t), 0);
    assert_true(fl_target_silence_ms(t) >= 0 && fl_target_silence_ms(t) < 1500);
    assert_true(fl_target_restart_ms(t) == 0);
    fl_trace_free(tr);

    tr = run_case(t, "wait");
    assert_int_equal(tr->exit, FL_EXIT_HANG);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.events, 3); /* what came before the silence */
    assert_int_equal(fl_target_stalled(t), 1);
    assert_true(tr->ms >= 30 && tr->ms < 750); /* not the 1500 ms timeout */
    assert_true(fl_target_restart_ms(t) > 0);
    assert_true(fl_target_pid(t) > 0); /* the next process is already running */
    assert_int_equal(fl_target_starts(t), 2);
    fl_trace_free(tr);

    /* a new process: its silence counts from its first output, so it is asked too */
    tr = run_case(t, "please wait");
    assert_int_equal(tr->exit, FL_EXIT_HANG);
    assert_int_equal(a.n, 2);
    assert_int_equal(fl_target_stalled(t), 1);
    fl_trace_free(tr);

    /* "no": the case waits for its timeout */
    a.answer = 0;
    fl_target_set_timeout(t, 300);
    tr = run_case(t, "please wait");
    assert_int_equal(tr->exit, FL_EXIT_HANG);
    assert_int_equal(a.n, 3); /* once per silence */
    assert_int_equal(fl_target_stalled(t), 0);
    assert_true(tr->ms >= 300);
    fl_trace_free(tr);

    /* off: never asked */
    fl_target_set_stall(t, 0, NULL, NULL);
    tr = run_case(t, "please wait");
    assert_int_equal(tr->exit, FL_EXIT_HANG);
    assert_int_equal(a.n, 3);
    fl_trace_free(tr);
    fl_target_free(t);
}

/* The stall point: the events in order, contents ignored; a longer or different trace is
 * another point. */
static void test_stall_hash(void **state) {
    (void)state;
    const char *l1 = "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"a\"}";
    const char *l1b = "{\"event\":\"message\",\"from\":\"user\",\"to\":\"Master\",\"content\":\"b\"}";
    const char *l2 = "{\"event\":\"message\",\"from\":\"Master\",\"to\":\"Waiter\",\"content\":\"a\"}";
    fl_trace *a = fl_trace_new(), *b = fl_trace_new();
    int done = 0;
    fl_trace_feed_line(a, l1, strlen(l1), 0, &done);
    fl_trace_feed_line(b, l1b, strlen(l1b), 0, &done);
    assert_true(camp_stall_hash(a) == camp_stall_hash(b));
    fl_trace_feed_line(b, l2, strlen(l2), 0, &done);
    assert_true(camp_stall_hash(a) != camp_stall_hash(b));
    fl_trace_free(a), fl_trace_free(b);
}

/* A campaign whose mutants of one seed mostly hang: after the first timeout, the known hang is
 * cut at its stall point (hangs_stalled), the kill and restart are counted as time lost, and
 * no child that timed out enters the queue. */
static void test_campaign_cuts_known_hangs(void **state) {
    (void)state;
    char out[160], *argv[] = {tgt, NULL};
    snprintf(out, sizeof out, "%s/out", tmp);
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    o.in_dir = seeds, o.out_dir = out, o.argv = argv;
    o.max_execs = 300, o.seed = 5, o.write_report = 0, o.timeout_ms = 400;
    fl_campaign_result r;
    fl_err e = {0};
    if (fl_campaign_run(&o, &r, &e)) fail_msg("%s", e.msg);
    print_message("hangs %llu, known %llu, stalled %llu, confirms %llu; hang %.3f s of %.3f s, "
                  "restart %.3f s\n", (unsigned long long)r.stats.hangs,
                  (unsigned long long)r.stats.hangs_known, (unsigned long long)r.stats.hangs_stalled,
                  (unsigned long long)r.stats.hang_confirms, r.stats.hang_seconds,
                  r.stats.case_seconds, r.stats.restart_seconds);
    assert_int_equal(r.stats.kind_count[FL_FIND_HANG], 1);
    assert_true(r.stats.hangs >= 10);
    assert_true(r.stats.hangs_stalled > 0);
    /* most known hangs end at their stall point; a few may meet the tight timeout first */
    assert_true(r.stats.hangs_stalled * 2 >= r.stats.hangs_known);
    assert_true(r.stats.restart_seconds > 0 && r.stats.restart_seconds < r.stats.hang_seconds);
    char *v = stat_val(out, "hangs_stalled");
    assert_int_equal(strtoull(v, NULL, 10), r.stats.hangs_stalled);
    free(v);
    v = stat_val(out, "restart_time"), assert_true(strtod(v, NULL) > 0), free(v);
    /* the queue: the two seeds and children that ran to done only (none routes to wait) */
    char p[256];
    snprintf(p, sizeof p, "%s/queue", out);
    camp_paths l = {0};
    if (camp_paths_list(p, &l, 0, NULL, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < l.n; i++) {
        if (strstr(l.v[i], "orig:")) continue;
        char *txt = slurp(l.v[i]);
        if (strstr(txt, "wait")) fail_msg("a hanging child was kept: %s", l.v[i]);
        free(txt);
    }
    camp_paths_free(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_stall),
        cmocka_unit_test(test_stall_hash),
        cmocka_unit_test(test_campaign_cuts_known_hangs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
