/* The target runner against real processes: tests/targets/agent_tgt.c, compiled with `cc` at
 * start, plays a well-behaved agent system and every kind of bad one (crash, hang, garbage,
 * flood, ignores SIGTERM, exits mid-case, never answers, spawns helpers). Then `flare agents
 * run` end to end when $FLARE_BIN is set. */
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#include "flare/agents/oracle.h"
#include "flare/agents/protocol.h"
#include "flare/agents/target.h"

static char tmp[64];       /* temporary directory */
static char tgt[128];      /* the compiled test target */

static int setup(void **state) {
    strcpy(tmp, "/tmp/flare_target_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    snprintf(tgt, sizeof tgt, "%s/agent_tgt", tmp);
    return tu_build_target("agent_tgt", tgt);
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* A target running `agent_tgt mode [n]` with short timeouts. */
static fl_target *start(const char *mode, const char *n, fl_target_opts *o) {
    fl_target_opts def;
    if (!o) {
        fl_target_opts_default(&def);
        def.timeout_ms = 300;
        def.kill_grace_ms = 50;
        o = &def;
    }
    char *argv[] = {tgt, (char *)mode, (char *)n, NULL};
    fl_target *t = NULL;
    fl_err e = {0};
    if (fl_target_new(argv, o, &t, &e) != FL_OK) fail_msg("fl_target_new: %s", e.msg);
    return t;
}

static fl_case *mkcase(int i, const char *turn) {
    const char *turns[] = {turn ? turn : "compute 2+2"};
    fl_case *c = fl_case_new(1, turns);
    snprintf(c->id, sizeof c->id, "%06d", i);
    return c;
}

/* Run case i; returns the trace (owned by the caller). */
static fl_trace *run1(fl_target *t, int i, const char *turn) {
    fl_case *c = mkcase(i, turn);
    fl_trace *tr = fl_trace_new();
    fl_err e = {0};
    if (fl_target_run(t, c, tr, &e) != FL_OK) fail_msg("fl_target_run: %s", e.msg);
    fl_case_free(c);
    return tr;
}

static void expect_exit(const fl_trace *tr, fl_exit_kind k, int status) {
    char buf[160];
    if (tr->exit != k || tr->exit_status != status)
        fail_msg("ended %s/%d (%s), expected %s/%d", fl_exit_kind_name(tr->exit), tr->exit_status,
                 fl_trace_describe_exit(tr, buf, sizeof buf), fl_exit_kind_name(k), status);
}

/* ---- well-behaved -------------------------------------------------------------------------- */
static void test_persistent_echo(void **state) {
    fl_target *t = start("echo", NULL, NULL);
    int pid = fl_target_pid(t);
    assert_true(pid > 0);
    fl_trace *tr = fl_trace_new();
    for (int i = 0; i < 200; i++) {
        fl_case *c = mkcase(i, i % 2 ? "first" : "a \"quoted\"\nturn");
        fl_err e = {0};
        assert_int_equal(fl_target_run(t, c, tr, &e), FL_OK);
        expect_exit(tr, FL_EXIT_DONE, 0);
        assert_int_equal(tr->n_protocol, 0);
        assert_int_equal(tr->n_events, 6);
        assert_int_equal(tr->events[1].kind, FL_EV_TOOL_CALL);
        assert_string_equal(tr->events[1].arguments, "{\"x\":1}");
        assert_true(tr->bytes > 300);
        assert_true(tr->events[5].t_ms >= tr->events[0].t_ms && tr->ms >= tr->events[5].t_ms);
        char want[64];
        snprintf(want, sizeof want, "pid %d id %06d len ", pid, i);
        if (strncmp(fl_trace_output(tr), want, strlen(want)))
            fail_msg("output \"%s\", expected \"%s...\"", fl_trace_output(tr), want);
        fl_case_free(c);
    }
    assert_int_equal(fl_target_pid(t), pid); /* one process for all cases */
    assert_int_equal(fl_target_starts(t), 1);
    fl_trace_free(tr);
    fl_target_free(t);
    /* the process is gone after free */
    assert_int_equal(kill(pid, 0), -1);
}

/* A 2 MB request to a target that answers a big output: both directions exceed the pipe
 * buffer, which only works because writing is non-blocking inside the poll loop. */
static void test_big_request_and_output(void **state) {
    size_t n = (size_t)2 << 20;
    char *big = malloc(n + 1);
    memset(big, 'q', n);
    big[n] = 0;
    fl_target *t = start("echo", NULL, NULL);
    fl_trace *tr = run1(t, 1, big);
    expect_exit(tr, FL_EXIT_DONE, 0);
    size_t len = 0;
    const char *len_at = strstr(fl_trace_output(tr), "len ");
    assert_non_null(len_at);
    sscanf(len_at + 4, "%zu", &len);
    assert_true(len > n);
    fl_trace_free(tr);
    fl_target_free(t);
    free(big);

    t = start("bigout", NULL, NULL);
    tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    assert_int_equal(strlen(fl_trace_output(tr)), 300 * 1024);
    fl_trace_free(tr);
    fl_target_free(t);
}

/* ---- the target fails ---------------------------------------------------------------------- */
static void test_crash_then_restart(void **state) {
    fl_target *t = start("crash", "2", NULL);
    int pid = fl_target_pid(t);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    fl_trace_free(tr);
    tr = run1(t, 2, NULL);
    expect_exit(tr, FL_EXIT_CRASH, -SIGABRT);
    assert_int_equal(tr->n_events, 1); /* what came before the crash is kept */
    assert_int_equal(tr->n_protocol, 0);
    assert_int_equal(fl_target_pid(t), 0);
    fl_trace_free(tr);
    tr = run1(t, 3, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    assert_true(fl_target_pid(t) > 0 && fl_target_pid(t) != pid);
    assert_int_equal(fl_target_starts(t), 2);
    fl_trace_free(tr);
    fl_target_free(t);
}

static void test_exit_mid_case(void **state) {
    fl_target *t = start("exit", NULL, NULL);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_CRASH, 3);
    fl_trace_free(tr);
    tr = run1(t, 2, NULL); /* restarted, crashes again */
    expect_exit(tr, FL_EXIT_CRASH, 3);
    assert_int_equal(fl_target_starts(t), 2);
    fl_trace_free(tr);
    fl_target_free(t);
    /* exit status 0 before done: the conversation ended without done (a protocol problem) */
    t = start("exit0", NULL, NULL);
    tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_EOF, 0);
    assert_int_equal(tr->n_protocol, 1);
    assert_non_null(strstr(tr->protocol_msg, "no done"));
    fl_trace_free(tr);
    fl_target_free(t);
}

/* The target exits without reading: flare's write fails with EPIPE (not SIGPIPE). */
static void test_write_to_dead_target(void **state) {
    size_t n = (size_t)1 << 20;
    char *big = malloc(n + 1);
    memset(big, 'w', n);
    big[n] = 0;
    fl_target *t = start("noread", NULL, NULL);
    fl_trace *tr = run1(t, 1, big);
    expect_exit(tr, FL_EXIT_CRASH, 5);
    fl_trace_free(tr);
    fl_target_free(t);
    free(big);
}

/* done before the whole request was read: the unread rest would corrupt the next request, so
 * the target is restarted. */
static void test_done_before_request_read(void **state) {
    size_t n = (size_t)1 << 20;
    char *big = malloc(n + 1);
    memset(big, 'r', n);
    big[n] = 0;
    fl_target *t = start("early", NULL, NULL);
    for (int i = 0; i < 3; i++) { /* unsent (1 MB) or unread in the pipe (a short request) */
        fl_trace *tr = run1(t, i, i < 2 ? big : NULL);
        expect_exit(tr, FL_EXIT_DONE, 0);
        assert_int_equal(tr->n_protocol, 1);
        assert_non_null(strstr(tr->protocol_msg, "done before the whole request"));
        assert_int_equal(fl_target_pid(t), 0);
        fl_trace_free(tr);
    }
    assert_int_equal(fl_target_starts(t), 3);
    fl_target_free(t);
    free(big);
}

static void test_hang_then_restart(void **state) {
    fl_target *t = start("hang", "2", NULL);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    fl_trace_free(tr);
    double t0 = fl_now();
    tr = run1(t, 2, NULL);
    double ms = 1000 * (fl_now() - t0);
    expect_exit(tr, FL_EXIT_HANG, -SIGTERM);
    assert_true(tr->ms >= 300 && ms < 300 + 250);
    assert_int_equal(tr->n_events, 1);
    fl_trace_free(tr);
    tr = run1(t, 3, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    assert_int_equal(fl_target_starts(t), 2);
    fl_trace_free(tr);
    fl_target_free(t);
}

/* The spare (fl_target_opts.spare) on a target that takes 200 ms to start and hangs on its
 * second request: the first restart starts a process as before and a spare beside it; the
 * second restart takes the spare, which has started meanwhile, so the case after it does not
 * wait for a start-up. Without a spare, it does. The spare is reaped with the target. */
static void test_spare(void **state) {
    setenv("AGENT_TGT_START_MS", "200", 1);
    for (int spare = 0; spare < 2; spare++) {
        fl_target_opts o;
        fl_target_opts_default(&o);
        o.timeout_ms = 300, o.kill_grace_ms = 50, o.startup_ms = 1000, o.spare = spare;
        fl_target *t = start("hang", "2", &o);
        double ms[6] = {0};
        for (int i = 1; i <= 5; i++) {
            if (i == 4) usleep(300000); /* cases run meanwhile: the spare is up */
            fl_trace *tr = run1(t, i, NULL);
            expect_exit(tr, i == 2 || i == 4 ? FL_EXIT_HANG : FL_EXIT_DONE, i == 2 || i == 4 ? -SIGTERM : 0);
            ms[i] = tr->ms;
            fl_trace_free(tr);
        }
        assert_int_equal(fl_target_starts(t), 3);
        assert_true(ms[3] >= 150); /* the first restart waits for a start-up either way */
        if (spare) assert_true(ms[5] < 100);
        else assert_true(ms[5] >= 150);
        fl_target_free(t);
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child left, the spare neither */
        assert_int_equal(errno, ECHILD);
    }
    unsetenv("AGENT_TGT_START_MS");
}

static void test_never_answers(void **state) {
    fl_target *t = start("silent", NULL, NULL);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_HANG, -SIGTERM);
    assert_int_equal(tr->n_events, 0);
    assert_int_equal(tr->bytes, 0);
    fl_trace_free(tr);
    fl_target_free(t);
}

static void test_ignores_sigterm(void **state) {
    fl_target *t = start("noterm", NULL, NULL);
    int pid = fl_target_pid(t);
    double t0 = fl_now();
    fl_trace *tr = run1(t, 1, NULL);
    double ms = 1000 * (fl_now() - t0);
    expect_exit(tr, FL_EXIT_HANG, -SIGKILL);
    assert_true(ms >= 300 + 50 && ms < 300 + 50 + 250); /* timeout + grace, then SIGKILL */
    assert_int_equal(kill(pid, 0), -1);
    fl_trace_free(tr);
    fl_target_free(t);
}

/* A helper process the target forked dies with it (process group). */
static void test_kills_process_group(void **state) {
    fl_target *t = start("spawn", NULL, NULL);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_HANG, -SIGTERM);
    assert_non_null(fl_trace_output(tr));
    int g = atoi(fl_trace_output(tr));
    assert_true(g > 0);
    /* gone, or a zombie waiting for a reaper that is not us */
    int alive = 1;
    for (int i = 0; i < 100 && alive; i++) {
        char path[64], st = 0;
        snprintf(path, sizeof path, "/proc/%d/stat", g);
        FILE *f = fopen(path, "r");
        alive = f && fscanf(f, "%*d %*s %c", &st) == 1 && st != 'Z';
        if (f) fclose(f);
        if (alive) usleep(5000);
    }
    assert_false(alive);
    fl_trace_free(tr);
    fl_target_free(t);
}

static void test_garbage(void **state) {
    fl_target *t = start("garbage", NULL, NULL);
    for (int i = 0; i < 3; i++) {
        fl_trace *tr = run1(t, i, NULL);
        expect_exit(tr, FL_EXIT_DONE, 0);
        /* not JSON, message without "to", output after done — and from the second case on,
         * nothing more: the late output came in the same read as done */
        assert_int_equal(tr->n_protocol, 3);
        assert_non_null(strstr(tr->protocol_msg, "not a JSON object"));
        assert_int_equal(tr->n_events, 2);
        assert_string_equal(fl_trace_output(tr), "fine");
        fl_trace_free(tr);
    }
    assert_int_equal(fl_target_starts(t), 1); /* garbage is not a reason to restart */
    fl_target_free(t);
}

/* Output that comes after done, too late for that case, is reported in the next one. */
static void test_output_between_cases(void **state) {
    fl_target *t = start("afterdone", NULL, NULL);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    fl_trace_free(tr);
    usleep(60000);
    tr = run1(t, 2, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    assert_true(tr->n_protocol >= 1);
    assert_non_null(strstr(tr->protocol_msg, "between cases"));
    assert_int_equal(tr->n_events, 1);
    fl_trace_free(tr);
    fl_target_free(t);
}

/* Heap bytes in use (ASan's allocator keeps freed blocks in quarantine, so there RSS says
 * little; its own counter does). */
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* ASan runtime */
static long heap_kb(void) { return (long)(__sanitizer_get_current_allocated_bytes() / 1024); }
enum { CHECK_RSS = 0 };
#else
#include <malloc.h>
static long heap_kb(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
}
enum { CHECK_RSS = 1 };
#endif

static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) fail_msg("/proc/self/statm");
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A target that floods stdout is read up to the cap, then killed and restarted; flare's
 * memory stays flat (short lines: problems are counted, not stored; one endless line: the
 * line buffer stops at max_line). */
static void test_flood(void **state) {
    const char *modes[] = {"flood", "floodline"};
    for (int m = 0; m < 2; m++) {
        fl_target_opts o;
        fl_target_opts_default(&o);
        o.timeout_ms = 5000;
        o.kill_grace_ms = 50;
        o.max_bytes = (size_t)3 << 20;
        o.max_line = (size_t)64 << 10;
        fl_target *t = start(modes[m], NULL, &o);
        long before = 0, heap_before = 0;
        for (int i = 0; i < 4; i++) {
            if (i == 1) before = rss_kb(), heap_before = heap_kb();
            fl_trace *tr = run1(t, i, NULL);
            expect_exit(tr, FL_EXIT_LIMIT, -SIGTERM);
            assert_int_equal(tr->bytes, o.max_bytes);
            assert_true(tr->n_protocol > 0);
            if (m == 0) assert_true(tr->n_protocol >= (int)(o.max_bytes / 64) - 1);
            else assert_non_null(strstr(tr->protocol_msg, "longer than 65536"));
            fl_trace_free(tr);
        }
        long grew = rss_kb() - before, heap_grew = heap_kb() - heap_before;
        if (CHECK_RSS && grew > 2048)
            fail_msg("%s: RSS grew by %ld KiB over 3 flooded cases", modes[m], grew);
        if (heap_grew > 256)
            fail_msg("%s: heap grew by %ld KiB over 3 flooded cases", modes[m], heap_grew);
        assert_int_equal(fl_target_starts(t), 4);
        fl_target_free(t);
    }
}

/* ---- options ------------------------------------------------------------------------------- */
static void test_fresh_env(void **state) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.fresh = 1;
    o.timeout_ms = 2000;
    setenv("TRACEPARENT", "stale-from-parent", 1);
    fl_target *t = start("env", NULL, &o);
    assert_int_equal(fl_target_pid(t), 0); /* nothing runs between cases */
    fl_rng r;
    fl_rng_seed(&r, 5);
    for (int i = 0; i < 3; i++) {
        fl_case *c = mkcase(40 + i, NULL);
        fl_case_new_trace(c, &r);
        fl_trace *tr = fl_trace_new();
        fl_err e = {0};
        assert_int_equal(fl_target_run(t, c, tr, &e), FL_OK);
        expect_exit(tr, FL_EXIT_DONE, 0);
        char want[128];
        snprintf(want, sizeof want, "%s|%06d", c->traceparent, 40 + i);
        assert_string_equal(fl_trace_output(tr), want);
        assert_int_equal(fl_target_pid(t), 0);
        fl_trace_free(tr);
        fl_case_free(c);
    }
    assert_int_equal(fl_target_starts(t), 3);
    /* a case without a traceparent still gets a valid one */
    fl_trace *tr = run1(t, 9, NULL);
    char tp[64];
    assert_int_equal(sscanf(fl_trace_output(tr), "%63[^|]", tp), 1);
    assert_true(fl_traceparent_valid(tp));
    fl_trace_free(tr);
    fl_target_free(t);
    unsetenv("TRACEPARENT");
}

static void test_stderr_log_capped(void **state) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.log_dir = tmp;
    o.instance = 3;
    o.max_log = 50000;
    fl_target *t = start("stderr", NULL, &o);
    assert_non_null(strstr(fl_target_log_path(t), "target.3.log"));
    for (int i = 0; i < 3; i++) { /* 200 KB of stderr per case: must not block the target */
        fl_trace *tr = run1(t, i, NULL);
        expect_exit(tr, FL_EXIT_DONE, 0);
        fl_trace_free(tr);
    }
    char path[256];
    snprintf(path, sizeof path, "%s", fl_target_log_path(t));
    fl_target_free(t);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size >= 50000 && sb.st_size < 50000 + 64);
    FILE *f = fopen(path, "r");
    char head[64] = {0};
    assert_true(fread(head, 1, sizeof head - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(head, "[flare: started"));
}

/* Each case's stderr goes into its trace; the log marks each case's start with its id; the
 * crash's stderr key groups tracebacks whatever their numbers. */
static void test_stderr_in_trace(void **state) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.log_dir = tmp;
    o.instance = 4;
    fl_target *t = start("traceback", NULL, &o);
    fl_trace *tr = run1(t, 41, "short");
    expect_exit(tr, FL_EXIT_CRASH, 1);
    if (!tr->err || !strstr(tr->err, "ZeroDivisionError: division by zero")) fail_msg("stderr: %s", tr->err);
    assert_null(strstr(tr->err, "[flare:")); /* flare's own notes stay in the log */
    fl_findings f = {0};
    fl_err e = {0};
    assert_int_equal(fl_oracle_check(NULL, NULL, tr, NULL, &f, &e), FL_OK);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.v[0].stderr_key, "File \"agent.py\", line #, in plan | ZeroDivisionError");
    char group[17];
    memcpy(group, f.v[0].stderr_group, sizeof group);
    assert_int_equal(strlen(group), 16);
    char *js = fl_trace_report_json(NULL, tr);
    assert_non_null(strstr(js, "\"stderr\":\"Traceback"));
    free(js);
    fl_trace_free(tr);
    /* another case (restarted target, other length): the same group; the trace starts empty */
    tr = run1(t, 42, "a much longer turn than before");
    assert_non_null(strstr(tr->err, "Traceback"));
    assert_null(strstr(strstr(tr->err, "Traceback") + 1, "Traceback"));
    fl_findings_clear(&f);
    assert_int_equal(fl_oracle_check(NULL, NULL, tr, NULL, &f, &e), FL_OK);
    assert_string_equal(f.v[0].stderr_group, group);
    fl_findings_free(&f);
    fl_trace_free(tr);
    char path[256];
    snprintf(path, sizeof path, "%s", fl_target_log_path(t));
    fl_target_free(t);
    char *log = NULL;
    assert_int_equal(tu_sh(&log, "cat %s", path), 0);
    char *c41 = strstr(log, "[flare: case 000041]"), *c42 = strstr(log, "[flare: case 000042]");
    if (!c41 || !c42 || c41 > c42) fail_msg("log:\n%s", log);
    assert_true(strstr(c41, "ZeroDivisionError") < c42); /* the first traceback under its case */
    free(log);
    /* keep_stderr without a log folder: captured into the trace only */
    fl_target_opts_default(&o);
    o.keep_stderr = 1;
    t = start("traceback", NULL, &o);
    assert_null(fl_target_log_path(t));
    tr = run1(t, 43, NULL);
    assert_non_null(strstr(tr->err, "ZeroDivisionError"));
    fl_trace_free(tr);
    fl_target_free(t);
}

static void test_mem_limit(void **state) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    o.mem_limit_mb = 64;
    fl_target *t = start("memhog", NULL, &o);
    fl_trace *tr = run1(t, 1, NULL);
    expect_exit(tr, FL_EXIT_DONE, 0);
    assert_string_equal(fl_trace_output(tr), "nomem");
    fl_trace_free(tr);
    fl_target_free(t);
}

static void test_bad_command(void **state) {
    fl_target_opts o;
    fl_target_opts_default(&o);
    fl_err e = {0};
    fl_target *t = (fl_target *)1;
    char *argv[] = {"/nonexistent/agent-system", NULL};
    assert_int_equal(fl_target_new(argv, &o, &t, &e), FL_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(e.msg, "/nonexistent/agent-system"));
    char *argv2[] = {"no-such-program-flare-xyz", NULL};
    assert_int_not_equal(fl_target_new(argv2, &o, &t, &e), FL_OK);
    assert_non_null(strstr(e.msg, "no-such-program-flare-xyz"));
    o.fresh = 1;
    assert_int_equal(fl_target_new(argv2, &o, &t, &e), FL_ERR_NOTFOUND);
    assert_non_null(strstr(e.msg, "not found on PATH"));
    char *argv3[] = {NULL};
    assert_int_equal(fl_target_new(argv3, &o, &t, &e), FL_ERR_ARG);
}

/* ---- flare agents run ------------------------------------------------------------------------ */
static void test_cli_agents_run(void **state) {
    const char *bin = getenv("FLARE_BIN");
    TU_NEED(bin && access(bin, X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char cs[128];
    snprintf(cs, sizeof cs, "%s/case.json", tmp);
    FILE *f = fopen(cs, "w");
    fputs("{\"id\":\"000077\",\"turns\":[\"what is 2+2?\",\"and 3+3?\"],\"seed\":5}\n", f);
    fclose(f);
    char *out;
    int rc = tu_sh(&out, "%s agents run %s -- %s echo", bin, cs, tgt);
    if (rc != 0) fail_msg("exit %d:\n%s", rc, out);
    const char *want[] = {"message", "user -> Master", "tool_call", "calc", "tool_result",
                          "branch", "route", "output", "id 000077", "done"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("no \"%s\" in:\n%s", want[i], out);
    free(out);

    rc = tu_sh(&out, "%s agents run --json --case %s -- %s echo", bin, cs, tgt);
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON:\n%s", out);
    assert_string_equal(cJSON_GetObjectItem(j, "exit")->valuestring, "done");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "events")), 6);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "findings")), 0); /* the echo passes */
    const cJSON *c = cJSON_GetObjectItem(j, "case");
    assert_string_equal(cJSON_GetObjectItem(c, "id")->valuestring, "000077");
    assert_true(fl_traceparent_valid(cJSON_GetObjectItem(c, "traceparent")->valuestring));
    cJSON_Delete(j);
    free(out);

    /* a finding exits 1, printed (a hang here), like re-running a crashing input in libFuzzer */
    rc = tu_sh(&out, "%s agents run %s -T 200 -- %s hang", bin, cs, tgt);
    assert_int_equal(rc, 1);
    if (!strstr(out, "hang") || !strstr(out, "findings: 1") || !strstr(out, "flare: 1 finding; first: hang"))
        fail_msg("no hang finding in:\n%s", out);
    free(out);
    rc = tu_sh(&out, "%s agents run %s -- %s crash", bin, cs, tgt);
    assert_int_equal(rc, 1);
    if (!strstr(out, "  crash ")) fail_msg("no crash finding in:\n%s", out);
    free(out);
    /* the case's stderr is captured into the report, not passed through: with stderr dropped,
     * the traceback is still in the output, and in --json's "stderr" with the crash's group */
    rc = tu_sh(&out, "%s agents run %s -- %s traceback 2>/dev/null", bin, cs, tgt);
    assert_int_equal(rc, 1);
    if (!strstr(out, "stderr (") || !strstr(out, "  | Traceback (most recent call last):"))
        fail_msg("no captured stderr in:\n%s", out);
    free(out);
    rc = tu_sh(&out, "%s agents run --json %s -- %s traceback 2>/dev/null", bin, cs, tgt);
    assert_int_equal(rc, 1);
    j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON:\n%s", out);
    const cJSON *se = cJSON_GetObjectItem(j, "stderr");
    assert_true(cJSON_IsString(se) && strstr(se->valuestring, "Traceback (most recent call last):"));
    const cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "findings"), 0);
    assert_non_null(f0);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(f0, "stderr_group")));
    cJSON_Delete(j);
    free(out);
    /* --spec adds the spec's oracles: Worker's tool calc is not declared */
    char sp[160];
    snprintf(sp, sizeof sp, "%s/spec.json", tmp);
    f = fopen(sp, "w");
    fputs("{\"agents\": [{\"name\": \"Master\", \"decisions\": {\"route\": [\"math\"]}}, {\"name\": \"Worker\"}],"
          " \"entry\": \"Master\", \"edges\": [[\"Master\", \"output\"]]}",
          f);
    fclose(f);
    rc = tu_sh(&out, "%s agents run %s --spec %s -- %s echo", bin, cs, sp, tgt);
    assert_int_equal(rc, 1);
    if (!strstr(out, "spec_violation") || !strstr(out, "\"calc\"")) fail_msg("no spec finding in:\n%s", out);
    free(out);
    rc = tu_sh(&out, "%s agents run --json %s --spec %s -- %s echo 2>/dev/null", bin, cs, sp, tgt);
    assert_int_equal(rc, 1);
    j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON:\n%s", out);
    const cJSON *fs = cJSON_GetObjectItem(j, "findings");
    assert_int_equal(cJSON_GetArraySize(fs), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 0), "kind")->valuestring, "spec_violation");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 0), "event")->valueint, 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "events")), 6);
    cJSON_Delete(j);
    free(out);
    rc = tu_sh(&out, "%s agents run %s --spec %s/nospec.json -- %s echo", bin, cs, tmp, tgt);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "nospec.json"));
    free(out);
    rc = tu_sh(&out, "%s agents run %s --fresh -- %s env", bin, cs, tgt);
    assert_int_equal(rc, 0);
    if (!strstr(out, "|000077")) fail_msg("no case id from the environment in:\n%s", out);
    free(out);
    rc = tu_sh(&out, "%s agents run %s -- /nonexistent/target", bin, cs);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "flare: cannot run target '/nonexistent/target'"));
    free(out);
    rc = tu_sh(&out, "%s agents run %s/missing.json -- %s echo", bin, tmp, tgt);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "missing.json"));
    free(out);
    rc = tu_sh(&out, "%s agents run %s", bin, cs);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "-- CMD"));
    free(out);
    /* words after -- belong to the target, even when they look like flare flags */
    rc = tu_sh(&out, "%s agents run %s -- %s echo --json", bin, cs, tgt);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "\"events\""));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_persistent_echo),
        cmocka_unit_test(test_big_request_and_output),
        cmocka_unit_test(test_crash_then_restart),
        cmocka_unit_test(test_exit_mid_case),
        cmocka_unit_test(test_write_to_dead_target),
        cmocka_unit_test(test_done_before_request_read),
        cmocka_unit_test(test_hang_then_restart),
        cmocka_unit_test(test_spare),
        cmocka_unit_test(test_never_answers),
        cmocka_unit_test(test_ignores_sigterm),
        cmocka_unit_test(test_kills_process_group),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_output_between_cases),
        cmocka_unit_test(test_flood),
        cmocka_unit_test(test_fresh_env),
        cmocka_unit_test(test_stderr_log_capped), cmocka_unit_test(test_stderr_in_trace),
        cmocka_unit_test(test_mem_limit),
        cmocka_unit_test(test_bad_command),
        cmocka_unit_test(test_cli_agents_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
