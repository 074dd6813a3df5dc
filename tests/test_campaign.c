/* The campaign end to end against tests/targets/campaign_tgt.c (compiled with `cc` at start):
 * the output folder, fuzzer_stats, plot_data, a planted failure found once, determinism for a
 * seed, schedules, resume, the goal, -j 2, the report; then replay (exit codes, JUnit) and
 * minimisation through the `flare` binary ($FLARE_BIN, default build/flare) and the library. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#include "agents/campaign/report_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128], spec[128], dict[128];

static int setup(void **state) {
    if (camp_fix_dir(tmp, "campaign", tgt)) return -1;
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    char p[256];
    static const char *const s[][2] = {{"a.txt", "what is math\n"},
                                       {"b.txt", "search the web for cats"},
                                       {"c.json", "{\"turns\": [\"hello there\", \"please\"]}"},
                                       {"d.txt", "please boom the bridge"}};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", seeds, s[i][0]);
        write_file(p, s[i][1]);
    }
    snprintf(spec, sizeof spec, "%s/spec.json", tmp);
    write_file(spec, "{\"agents\": [{\"name\": \"Master\", \"decisions\": {\"route\": "
                     "[\"math\", \"search\", \"chat\"]}}, {\"name\": \"Worker\", \"tools\": "
                     "[\"calc\", \"web\"]}, {\"name\": \"Checker\"}], \"entry\": \"Master\", "
                     "\"edges\": [[\"user\", \"Master\"], [\"Master\", \"Worker\"], [\"Worker\", "
                     "\"Master\"], [\"Master\", \"Checker\"], [\"Checker\", \"Master\"], "
                     "[\"Master\", \"output\"]], \"limits\": {\"loop_repetitions\": 20}, "
                     "\"forbidden_output\": [\"SECRET-[0-9]+\"]}");
    snprintf(dict, sizeof dict, "%s/words.dict", tmp);
    write_file(dict, "w1=\"leak\"\nw2=\"math\"\n\"search\"\n");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

/* ---- helpers ------------------------------------------------------------------------------- */
static void opts(fl_campaign_opts *o, const char *out, uint64_t execs, uint64_t seed,
                 char **argv) {
    fl_campaign_opts_default(o);
    o->in_dir = seeds;
    o->out_dir = out;
    o->argv = argv;
    o->max_execs = execs;
    o->seed = seed;
    o->timeout_ms = 3000;
    o->spec_path = spec;
    o->dict_path = dict;
}

static void run_ok(const fl_campaign_opts *o, fl_campaign_result *r) {
    fl_err e = {0};
    fl_status st = fl_campaign_run(o, r, &e);
    if (st != FL_OK) fail_msg("fl_campaign_run: %s", e.msg);
}

static int count_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && !strncmp(de->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

/* The queue's file names, sorted, joined by '\n' (malloc'd). */
static char *queue_names(const char *out) {
    char q[256];
    snprintf(q, sizeof q, "%s/queue", out);
    struct dirent **list;
    int n = scandir(q, &list, NULL, alphasort);
    assert_true(n > 0);
    size_t cap = 1 << 16, len = 0;
    char *s = calloc(1, cap);
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.')
            len += (size_t)snprintf(s + len, cap - len, "%s\n", list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return s;
}

static const char *stat_of(const od_kv *kv, const char *key) {
    const char *v = od_kv_get(kv, key);
    if (!v) fail_msg("fuzzer_stats has no key '%s'", key);
    return v;
}

static void read_stats(const char *out, od_kv *kv) {
    char p[256];
    fl_err e = {0};
    snprintf(p, sizeof p, "%s/fuzzer_stats", out);
    if (od_kv_read(p, kv, &e) != FL_OK) fail_msg("%s", e.msg);
}

/* ---- tests ---------------------------------------------------------------------------------- */
static void test_layout_stats_plot(void **state) {
    char out[128], p[256];
    snprintf(out, sizeof out, "%s/o_layout", tmp);
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    opts(&o, out, 200, 7, argv);
    o.stats_every = 0.05; /* several plot rows even in a short run */
    fl_campaign_result r;
    run_ok(&o, &r);
    static const char *const dirs[] = {"queue", "failures", "hangs", "logs"};
    for (int i = 0; i < 4; i++) {
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", out, dirs[i]);
        assert_int_equal(stat(p, &sb), 0);
        assert_true(S_ISDIR(sb.st_mode));
    }
    assert_int_equal(count_files(p, "") >= 0, 1);
    snprintf(p, sizeof p, "%s/queue", out);
    assert_int_equal(count_files(p, "id:"), r.stats.corpus_count);
    assert_true(r.stats.corpus_count > 4); /* guidance kept children */
    assert_int_equal(r.stats.corpus_found, r.stats.corpus_count - 4);
    assert_true(r.stats.execs >= 200);

    od_kv kv;
    read_stats(out, &kv);
    static const char *const keys[] = {"start_time", "last_update", "run_time", "execs_done",
                                       "execs_per_sec", "corpus_count", "features",
                                       "edges_found", "edges_allowed", "inter_agent_cov",
                                       "saved_findings", "findings_crash", "command_line",
                                       "seed", "schedule"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) stat_of(&kv, keys[i]);
    assert_int_equal(strtoull(stat_of(&kv, "execs_done"), NULL, 10), r.stats.execs);
    assert_string_equal(stat_of(&kv, "seed"), "7");
    assert_string_equal(stat_of(&kv, "schedule"), "explore");
    assert_int_equal(atoi(stat_of(&kv, "edges_allowed")), 6);
    assert_int_equal(atoi(stat_of(&kv, "corpus_count")), r.stats.corpus_count);
    od_kv_free(&kv);

    snprintf(p, sizeof p, "%s/plot_data", out);
    char *plot = slurp(p);
    assert_true(!strncmp(plot, "# relative_time, execs_done", 27));
    int rows = 0;
    for (char *l = strchr(plot, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        rows++;
        int commas = 0;
        for (char *c = l + 1; *c && *c != '\n'; c++) commas += *c == ',';
        assert_int_equal(commas, PD_COLS - 1);
    }
    assert_true(rows >= 2);
    free(plot);

    snprintf(p, sizeof p, "%s/report.html", out);
    char *html = slurp(p);
    assert_non_null(strstr(html, "<svg"));
    assert_non_null(strstr(html, "failures/crash/"));
    assert_null(strstr(html, "<script"));
    free(html);
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md = slurp(p);
    assert_non_null(strstr(md, "| crash |"));
    free(md);
}

/* "boom" crashes the target: the seed that has it and every child that keeps it crash, and
 * the crash is saved once. "leak" comes only from the dictionary: fuzzing must find it. */
static void test_planted_found_once(void **state) {
    char out[128], p[256];
    snprintf(out, sizeof out, "%s/o_dedup", tmp);
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    opts(&o, out, 300, 11, argv);
    fl_campaign_result r;
    run_ok(&o, &r);
    assert_true(r.stats.crashes > 1);
    snprintf(p, sizeof p, "%s/failures/crash", out);
    assert_int_equal(count_files(p, ""), 1);
    assert_int_equal(r.stats.kind_count[FL_FIND_CRASH], 1);
    snprintf(p, sizeof p, "%s/failures/forbidden_output", out);
    assert_int_equal(count_files(p, ""), 1);

    /* the failure file: a case (fl_case_parse reads it) with the finding and the trace */
    char **paths;
    int n;
    fl_err e = {0};
    snprintf(p, sizeof p, "%s/failures/crash", out);
    assert_int_equal(saved_case_list(p, &paths, &n, &e), FL_OK);
    assert_int_equal(n, 1);
    saved_case sc;
    assert_int_equal(saved_case_load(paths[0], &sc, &e), FL_OK);
    assert_string_equal(sc.kind, "crash");
    assert_int_equal(strlen(sc.signature), 16);
    assert_non_null(strstr(paths[0], sc.signature));
    int boom = 0;
    for (int i = 0; i < sc.c->n_turns; i++) boom |= strstr(sc.c->turns[i], "boom") != NULL;
    assert_true(boom);
    char *txt = slurp(paths[0]);
    cJSON *j = cJSON_Parse(txt);
    cJSON *tr = cJSON_GetObjectItem(j, "trace");
    assert_non_null(tr);
    assert_string_equal(cJSON_GetObjectItem(tr, "exit")->valuestring, "crash");
    assert_non_null(cJSON_GetObjectItem(j, "message"));
    /* triage: the case's stderr and exit status, the stderr group, how to reproduce it */
    assert_non_null(strstr(cJSON_GetObjectItem(tr, "stderr")->valuestring, "RuntimeError: boom"));
    assert_non_null(cJSON_GetObjectItem(tr, "exit_status"));
    cJSON *g = cJSON_GetObjectItem(j, "stderr_group");
    assert_string_equal(cJSON_GetObjectItem(g, "key")->valuestring, "File \"tgt.py\", line #, in main | RuntimeError");
    assert_string_equal(cJSON_GetObjectItem(j, "flare_version")->valuestring, FLARE_VERSION);
    const char *rep = cJSON_GetObjectItem(j, "reproduce")->valuestring;
    if (!strstr(rep, "flare agents run THIS_FILE --spec ") || !strstr(rep, " -- ")) fail_msg("reproduce: %s", rep);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "seed")));
    cJSON_Delete(j);
    free(txt);
    saved_case_free(&sc);
    saved_case_list_free(paths, n);
}

static void test_deterministic(void **state) {
    char a[128], b[128], c[128];
    snprintf(a, sizeof a, "%s/o_det_a", tmp);
    snprintf(b, sizeof b, "%s/o_det_b", tmp);
    snprintf(c, sizeof c, "%s/o_det_c", tmp);
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    fl_campaign_result r1, r2, r3;
    opts(&o, a, 150, 42, argv);
    run_ok(&o, &r1);
    opts(&o, b, 150, 42, argv);
    run_ok(&o, &r2);
    opts(&o, c, 150, 43, argv);
    run_ok(&o, &r3);
    char *qa = queue_names(a), *qb = queue_names(b), *qc = queue_names(c);
    assert_string_equal(qa, qb);
    assert_true(strcmp(qa, qc) != 0); /* another seed, another campaign */
    assert_int_equal(r1.stats.features, r2.stats.features);
    free(qa), free(qb), free(qc);
}

/* -p none: coverage is measured, never fed back: the corpus stays the seeds. */
static void test_schedule_none_and_exploit(void **state) {
    char out[128];
    snprintf(out, sizeof out, "%s/o_none", tmp);
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    opts(&o, out, 150, 5, argv);
    o.schedule = FL_SCHED_NONE;
    fl_campaign_result r;
    run_ok(&o, &r);
    assert_int_equal(r.stats.corpus_count, 4);
    assert_true(r.stats.features > 0);
    snprintf(out, sizeof out, "%s/o_exploit", tmp);
    opts(&o, out, 150, 5, argv);
    o.schedule = FL_SCHED_EXPLOIT;
    run_ok(&o, &r);
    assert_true(r.stats.corpus_count > 4);
    fl_schedule s;
    fl_err e = {0};
    assert_int_equal(fl_schedule_parse("exploit", &s, &e), FL_OK);
    assert_int_equal(s, FL_SCHED_EXPLOIT);
    assert_int_equal(fl_schedule_parse("fast", &s, &e), FL_ERR_ARG);
}

static void test_resume(void **state) {
    char out[128], p[256];
    snprintf(out, sizeof out, "%s/o_resume", tmp);
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    opts(&o, out, 120, 9, argv);
    fl_campaign_result r1, r2;
    run_ok(&o, &r1);
    char *before = queue_names(out);

    /* the folder holds a campaign: starting another there is refused */
    fl_err e = {0};
    fl_campaign_result rx;
    assert_int_equal(fl_campaign_run(&o, &rx, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "-i -"));

    opts(&o, out, 80, 10, argv);
    o.in_dir = "-";
    run_ok(&o, &r2);
    char *after = queue_names(out);
    assert_true(!strncmp(after, before, strlen(before))); /* the old entries, unchanged, first */
    assert_int_equal(r2.stats.execs, r1.stats.execs + (uint64_t)r1.stats.corpus_count + 80);
    assert_true(r2.stats.corpus_count >= r1.stats.corpus_count);
    snprintf(p, sizeof p, "%s/failures/crash", out);
    assert_int_equal(count_files(p, ""), 1); /* not saved again */
    assert_int_equal(r2.stats.kind_count[FL_FIND_CRASH], 1);
    od_kv kv;
    read_stats(out, &kv);
    assert_int_equal(strtoull(stat_of(&kv, "execs_done"), NULL, 10), r2.stats.execs);
    assert_true(atof(stat_of(&kv, "run_time")) >= 0);
    od_kv_free(&kv);
    free(before), free(after);

    /* resuming a folder without a campaign, and a seeds folder without seeds, fail clearly */
    snprintf(out, sizeof out, "%s/o_empty", tmp);
    opts(&o, out, 10, 1, argv);
    o.in_dir = "-";
    assert_int_equal(fl_campaign_run(&o, &rx, &e), FL_ERR_NOTFOUND);
    snprintf(p, sizeof p, "%s/noseeds", tmp);
    mkdir(p, 0755);
    opts(&o, out, 10, 1, argv);
    o.in_dir = p;
    assert_int_equal(fl_campaign_run(&o, &rx, &e), FL_ERR_NOTFOUND);
    assert_non_null(strstr(e.msg, "no seed files"));

    /* a user lexicon (--lexicon) with a malformed line stops the campaign before it starts,
     * naming the file and line */
    snprintf(out, sizeof out, "%s/o_lexicon", tmp);
    snprintf(p, sizeof p, "%s/bad.lexicon", tmp);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("# synonyms\nquick, fast, rapid\nlonely\n", f); /* a group needs two entries */
    fclose(f);
    opts(&o, out, 10, 1, argv);
    o.lexicon_path = p;
    assert_true(fl_campaign_run(&o, &rx, &e) != FL_OK);
    assert_non_null(strstr(e.msg, "bad.lexicon:3"));
}

static void test_goal_stop_jobs(void **state) {
    char out[128];
    char *argv[] = {tgt, NULL};
    fl_campaign_opts o;
    fl_campaign_result r;
    /* the goal: a crash (a seed has it) and a leak, and every allowed edge */
    snprintf(out, sizeof out, "%s/o_goal", tmp);
    opts(&o, out, 5000, 11, argv);
    o.goal_kinds = 1u << FL_FIND_CRASH | 1u << FL_FIND_FORBIDDEN;
    o.goal_edges = 1;
    o.stop_at_goal = 1;
    run_ok(&o, &r);
    assert_true(r.stats.execs_goal > 0);
    assert_int_equal(r.stats.execs, r.stats.execs_goal);
    assert_true(r.stats.execs_full_edges > 0 && r.stats.execs_full_edges <= r.stats.execs_goal);

    /* a stop request (Ctrl-C) before the loop: the corpus is run, and the folder finished */
    static volatile sig_atomic_t stop = 1;
    snprintf(out, sizeof out, "%s/o_stop", tmp);
    opts(&o, out, 0, 1, argv);
    o.stop = &stop;
    run_ok(&o, &r);
    assert_int_equal(r.stopped, 1);
    assert_int_equal(r.stats.execs, 4);
    char p[256];
    snprintf(p, sizeof p, "%s/report.md", out);
    assert_int_equal(access(p, F_OK), 0);

    /* -j 2: two targets, the budget respected, the same folder layout */
    snprintf(out, sizeof out, "%s/o_jobs", tmp);
    opts(&o, out, 200, 3, argv);
    o.jobs = 2;
    run_ok(&o, &r);
    assert_true(r.stats.execs >= 200 && r.stats.execs <= 204);
    snprintf(p, sizeof p, "%s/logs", out);
    assert_int_equal(count_files(p, "target."), 2);
    assert_int_equal(r.stats.kind_count[FL_FIND_CRASH], 1);
}

/* ---- replay and min --------------------------------------------------------------------------- */
static const char *flare_bin(void) {
    const char *b = getenv("FLARE_BIN");
    return b && *b ? b : "build/flare";
}

static void test_replay(void **state) {
    char out[128];
    snprintf(out, sizeof out, "%s/o_dedup", tmp); /* from test_planted_found_once */
    TU_NEED(access(flare_bin(), X_OK) == 0, "the flare binary (FLARE_BIN; tests/run.sh sets it)");
    char junit[256];
    snprintf(junit, sizeof junit, "%s/junit.xml", tmp);
    assert_int_equal(tu_sh(NULL, "%s agents replay %s/failures --junit %s -q -- %s",
                        flare_bin(), out, junit, tgt), 1);
    char *x = slurp(junit);
    assert_non_null(strstr(x, "<testsuite name=\"flare agents replay\" tests=\"2\" failures=\"2\""));
    assert_non_null(strstr(x, "classname=\"flare.agents.crash\""));
    assert_non_null(strstr(x, "<failure type=\"reproduced\""));
    free(x);
    /* the defects fixed: nothing fails any more */
    assert_int_equal(tu_sh(NULL, "%s agents replay %s/failures --junit %s -q -- %s --fixed",
                        flare_bin(), out, junit, tgt), 0);
    x = slurp(junit);
    assert_non_null(strstr(x, "tests=\"2\" failures=\"0\""));
    assert_null(strstr(x, "<failure"));
    free(x);
    /* usage: no target command */
    assert_int_equal(tu_sh(NULL, "%s agents replay %s/failures", flare_bin(), out), 2);

    /* the library: counts */
    fl_replay_opts ro = {.target = {.argv = (char *[]){tgt, NULL}, .timeout_ms = 3000}};
    fl_replay_result rr;
    fl_err e = {0};
    char p[256];
    snprintf(p, sizeof p, "%s/failures", out);
    assert_int_equal(fl_replay_run((const char *[]){p}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_cases, 2);
    assert_int_equal(rr.n_failing, 2);
    assert_int_equal(rr.n_same, 2);
    assert_int_equal(rr.n_still, 2);
    assert_int_equal(rr.n_new, 0);
    assert_int_equal(rr.n_fixed, 0);
    /* the defects fixed: "fixed" counts only cases that failed before */
    ro.target.argv = (char *[]){tgt, "--fixed", NULL};
    assert_int_equal(fl_replay_run((const char *[]){p}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_fixed, 2);
    assert_int_equal(rr.n_passed, 0);
    /* the queue given itself: every entry (id:..., no .json), none failed before */
    snprintf(p, sizeof p, "%s/queue", out);
    int n_queue = 0;
    DIR *d = opendir(p);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) n_queue += !strncmp(de->d_name, "id:", 3);
    closedir(d);
    assert_true(n_queue > 1);
    assert_int_equal(fl_replay_run((const char *[]){p}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_cases, n_queue);
    /* the corpus never failed: its cases pass or fail anew (a loop of "please"s), never "fixed" */
    assert_int_equal(rr.n_fixed + rr.n_still, 0);
    assert_int_equal(rr.n_passed + rr.n_new, n_queue);
    assert_true(rr.n_passed > 0);
    ro.target.argv = (char *[]){tgt, NULL};
    assert_int_equal(fl_replay_run((const char *[]){p}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_cases, n_queue);
    assert_int_equal(rr.n_still + rr.n_fixed, 0);
    assert_int_equal(rr.n_new + rr.n_passed, n_queue);
    /* several paths at once, in order; a case named twice runs once and is counted as skipped */
    char fdir[256], one[512];
    snprintf(fdir, sizeof fdir, "%s/failures", out);
    char *found;
    assert_int_equal(tu_sh(&found, "find %s -name '*.json' ! -name '*.min.json' | sort | head -1", fdir), 0);
    snprintf(one, sizeof one, "%.*s", (int)strcspn(found, "\n"), found);
    free(found);
    assert_true(one[0] != 0);
    assert_int_equal(fl_replay_run((const char *[]){fdir, p, one}, 3, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_cases, 2 + n_queue);
    assert_int_equal(rr.n_still, 2);
    if (rr.n_skipped != 1 || !strstr(rr.skipped_why, "1 named twice")) fail_msg("skipped: %s", rr.skipped_why);
    /* the whole out/: the failures, with queue/, logs/ and the campaign's own files skipped and said */
    assert_int_equal(fl_replay_run((const char *[]){out}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_cases, 2);
    assert_true(rr.n_skipped >= n_queue);
    if (!strstr(rr.skipped_why, "the corpus (queue/") || !strstr(rr.skipped_why, "not a case file"))
        fail_msg("skipped: %s", rr.skipped_why);
    /* the CLI: the JUnit report has the trace summary; an empty selection exits 2 */
    assert_int_equal(tu_sh(NULL, "%s agents replay %s --junit %s -q -- %s", flare_bin(), out, junit, tgt), 1);
    x = slurp(junit);
    assert_non_null(strstr(x, "<system-out>ended: "));
    assert_non_null(strstr(x, "<system-err>Traceback (most recent call last):"));
    free(x);
    char *o2;
    assert_int_equal(tu_sh(&o2, "mkdir -p %s/empty && %s agents replay %s/empty -- %s", tmp, flare_bin(), tmp, tgt), 2);
    assert_non_null(strstr(o2, "nothing to replay"));
    free(o2);
    assert_int_equal(tu_sh(&o2, "%s agents replay %s -- %s", flare_bin(), out, tgt), 1);
    if (!strstr(o2, "skipped") || !strstr(o2, "2 still fail")) fail_msg("replay output:\n%s", o2);
    free(o2);
    /* the CLI takes several bare paths; a missing one is an error naming it */
    assert_int_equal(tu_sh(&o2, "%s agents replay %s/failures %s/queue -- %s", flare_bin(), out, out, tgt), 1);
    snprintf(one, sizeof one, "%d cases: 2 still fail", 2 + n_queue);
    if (!strstr(o2, one)) fail_msg("replay output:\n%s", o2);
    free(o2);
    assert_int_equal(tu_sh(&o2, "%s agents replay %s/failures %s/nope -- %s", flare_bin(), out, tmp, tgt), 1);
    if (!strstr(o2, "/nope")) fail_msg("replay output:\n%s", o2);
    free(o2);
}

static void test_minimize(void **state) {
    char in[256], outp[256];
    snprintf(in, sizeof in, "%s/big.json", tmp);
    write_file(in, "{\"turns\": [\"hello there, how are you today?\", \"please do the math. "
                   "Then boom the old bridge right now! Thanks a lot.\", \"search later\"]}");
    fl_min_opts mo = {.target = {.argv = (char *[]){tgt, NULL}, .timeout_ms = 3000},
                      .spec_path = spec};
    fl_min_result r;
    fl_err e = {0};
    if (fl_minimize(in, &mo, &r, &e) != FL_OK) fail_msg("fl_minimize: %s", e.msg);
    assert_int_equal(r.turns_before, 3);
    assert_int_equal(r.turns_after, 1);
    assert_true(r.bytes_after < r.bytes_before);
    assert_true(r.bytes_after <= 6); /* "boom" and at most a little around it */
    snprintf(outp, sizeof outp, "%s/big.min.json", tmp);
    assert_string_equal(r.out_path, outp);
    saved_case sc;
    assert_int_equal(saved_case_load(outp, &sc, &e), FL_OK);
    assert_string_equal(sc.signature, r.signature);
    assert_string_equal(sc.kind, "crash");
    assert_non_null(strstr(sc.c->turns[0], "boom"));
    saved_case_free(&sc);

    /* the shrunk case still reproduces: replay says so */
    fl_replay_opts ro = {.target = {.argv = (char *[]){tgt, NULL}, .timeout_ms = 3000}};
    fl_replay_result rr;
    assert_int_equal(fl_replay_run((const char *[]){outp}, 1, &ro, &rr, &e), FL_OK);
    assert_int_equal(rr.n_same, 1);

    /* a case that does not fail cannot be minimised */
    snprintf(in, sizeof in, "%s/fine.txt", tmp);
    write_file(in, "what is math");
    assert_int_equal(fl_minimize(in, &mo, &r, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "does not reproduce"));

    /* the CLI */
    if (access(flare_bin(), X_OK) != 0) return;
    snprintf(in, sizeof in, "%s/big.json", tmp);
    snprintf(outp, sizeof outp, "%s/cli.min.json", tmp);
    assert_int_equal(tu_sh(NULL, "%s agents min %s -o %s -q -- %s", flare_bin(), in,
                        outp, tgt), 0);
    assert_int_equal(access(outp, F_OK), 0);
}

static void test_report_units(void **state) {
    char name[160];
    od_file_name("0123456789abcdef", name, sizeof name);
    assert_string_equal(name, "0123456789abcdef");
    od_file_name("loop:a/b c", name, sizeof name);
    assert_string_equal(name, "loop_a_b_c");
    char longsig[400], other[400], n2[160];
    memset(longsig, 'x', 300), longsig[300] = 0;
    memcpy(other, longsig, 301), other[299] = 'y';
    od_file_name(longsig, name, sizeof name);
    od_file_name(other, n2, sizeof n2);
    assert_true(strlen(name) <= 120 + 17);
    assert_true(strcmp(name, n2) != 0);

    /* a report of a folder holding nothing yet is still written */
    char out[128], p[256];
    fl_err e = {0};
    snprintf(out, sizeof out, "%s/o_bare", tmp);
    assert_int_equal(od_prepare(out, 0, &e), FL_OK);
    assert_int_equal(fl_report_write(out, &e), FL_OK);
    snprintf(p, sizeof p, "%s/report.html", out);
    char *h = slurp(p);
    assert_non_null(strstr(h, "No finding."));
    free(h);
    /* and the text table */
    snprintf(p, sizeof p, "%s/table.txt", tmp);
    FILE *f = fopen(p, "w");
    snprintf(out, sizeof out, "%s/o_dedup", tmp);
    assert_int_equal(fl_report_print(out, f, &e), FL_OK);
    fclose(f);
    char *t = slurp(p);
    assert_non_null(strstr(t, "failures/crash/"));
    assert_non_null(strstr(t, "forbidden_output"));
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_stats_plot),
        cmocka_unit_test(test_planted_found_once),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_schedule_none_and_exploit),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_goal_stop_jobs),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_minimize),
        cmocka_unit_test(test_report_units),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
