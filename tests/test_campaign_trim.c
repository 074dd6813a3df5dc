/* The campaign's trim (campaign_trim.c, docs/agents-campaign.md "Trimming"): a queue entry
 * padded with text its coverage does not need is cut to what it needs; an entry whose every
 * word matters is left as it is; the budget and the share hold; the trimmed entry's queue file is rewritten
 * atomically; and a whole campaign trims its kept children. Against
 * tests/targets/campaign_tgt.c, whose coverage depends only on the words "math", "search",
 * "please" (counted), "boom" and "leak". */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/campaign_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128];

static int setup(void **state) {
    (void)state;
    strcpy(tmp, "/tmp/flare_camptrim_XXXXXX");
    if (camp_tmp_new(tmp, tgt, sizeof tgt)) return -1;
    char p[256];
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    snprintf(p, sizeof p, "%s/a.txt", seeds), write_file(p, "what is math");
    snprintf(p, sizeof p, "%s/b.txt", seeds), write_file(p, "search the web for cats please");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

/* A campaign with one entry, `text`, kept as a child would be, and its trim run. */
typedef struct fix {
    fl_campaign_opts o;
    camp cp;
    fl_target *t;
    fl_trace *tr;
    fl_rng rng;
    q_entry *x;
    char out[128];
} fix;

/* execs: the campaign's executions before the trim (the trim share is a share of them). */
static void fix_start_at(fix *f, const char *name, const char *text, int trim_execs, uint64_t execs) {
    memset(f, 0, sizeof *f);
    fl_err e = {0};
    snprintf(f->out, sizeof f->out, "%s/%s", tmp, name);
    fl_campaign_opts_default(&f->o);
    f->o.out_dir = f->out;
    f->o.trim_execs = trim_execs;
    f->o.stats_every = 1e9; /* camp_periodic writes nothing */
    f->cp.o = &f->o;
    f->cp.t0 = fl_now();
    f->cp.last_stats = f->cp.last_status = f->cp.t0;
    pthread_mutex_init(&f->cp.mu, NULL);
    assert_int_equal(fl_agcov_new(NULL, NULL, &f->cp.cov, &e), FL_OK);
    assert_int_equal(q_init(&f->cp.q, FL_SCHED_EXPLORE, &e), FL_OK);
    assert_int_equal(od_prepare(f->out, 0, &e), FL_OK);
    char *argv[] = {tgt, NULL};
    fl_target_opts to;
    fl_target_opts_default(&to);
    to.timeout_ms = 2000;
    assert_int_equal(fl_target_new(argv, &to, &f->t, &e), FL_OK);
    assert_non_null(f->tr = fl_trace_new());
    fl_rng_seed(&f->rng, 1);
    const char *turns[] = {text};
    fl_case *c = fl_case_new(1, turns);
    assert_int_equal(fl_target_run(f->t, c, f->tr, &e), FL_OK);
    int n_new;
    assert_true(fl_agcov_commit(f->cp.cov, f->tr, &n_new) > 0);
    fl_agfeature *fv = NULL;
    int nf = fl_agcov_features(f->cp.cov, f->tr, &fv);
    assert_true(nf > 0);
    uint32_t idx[256];
    for (int i = 0; i < nf && i < 256; i++) idx[i] = fv[i].index;
    assert_non_null(f->x = q_add(&f->cp.q, c, -1, n_new, 1, q_path_hash(f->tr), idx, nf));
    f->x->cov_sig = q_cov_sig(fv, nf, f->tr->exit);
    free(fv);
    snprintf(f->x->name, sizeof f->x->name, "id:000000,src:000000,op:long,+cov");
    char rel[300];
    snprintf(rel, sizeof rel, "queue/%s", f->x->name);
    assert_int_equal(od_write_case(f->out, rel, c, &e), FL_OK);
    pthread_mutex_lock(&f->cp.mu);
    f->cp.st.execs = execs;
    camp_trim(&f->cp, f->x, f->t, f->tr, &f->rng);
    pthread_mutex_unlock(&f->cp.mu);
    assert_int_equal(f->cp.err, FL_OK);
}

/* A campaign far enough along that its trim share does not limit this trim. */
static void fix_start(fix *f, const char *name, const char *text, int trim_execs) {
    fix_start_at(f, name, text, trim_execs, 100000);
}

static void fix_end(fix *f) {
    fl_target_free(f->t);
    fl_trace_free(f->tr);
    q_free(&f->cp.q);
    fl_agcov_free(f->cp.cov);
    pthread_mutex_destroy(&f->cp.mu);
}

/* The queue file of f's entry, as a case. */
static fl_case *queue_file(const fix *f) {
    char p[512];
    snprintf(p, sizeof p, "%s/queue/%s", f->out, f->x->name);
    char *txt = slurp(p);
    assert_non_null(txt);
    fl_case *c = NULL;
    fl_err e = {0};
    assert_int_equal(fl_case_parse(txt, strlen(txt), p, &c, &e), FL_OK);
    free(txt);
    return c;
}

/* Files in out/queue: the entry only (no temporary file left behind). */
static int queue_files(const fix *f) {
    char p[512];
    snprintf(p, sizeof p, "%s/queue", f->out);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_padding_trimmed(void **state) {
    (void)state;
    fl_sb b = {0};
    fl_sb_printf(&b, "please ");
    for (int i = 0; i < 50; i++) fl_sb_printf(&b, "Do it now, the same sentence again. ");
    fl_sb_printf(&b, "then math");
    fix f;
    fix_start(&f, "pad", b.p, 400);
    /* what the coverage needs: the route word and the one "please" */
    assert_string_equal(f.x->c->turns[0], "please math");
    assert_int_equal(f.cp.st.trimmed, 1);
    assert_int_equal(f.cp.st.trim_bytes, strlen(b.p) - strlen("please math"));
    assert_true(f.cp.st.execs_trim > 0 && f.cp.st.execs_trim <= 400);
    assert_int_equal(f.cp.st.execs - 100000, f.cp.st.execs_trim);
    assert_int_equal(f.x->cost, strlen("please math"));
    assert_non_null(f.x->untrimmed); /* kept alive for a worker still mutating it */
    fl_case *saved = queue_file(&f);
    assert_int_equal(saved->n_turns, 1);
    assert_string_equal(saved->turns[0], "please math");
    fl_case_free(saved);
    assert_int_equal(queue_files(&f), 1);
    fix_end(&f);
    free(b.p);
}

static void test_budget(void **state) {
    (void)state;
    fl_sb b = {0};
    for (int i = 0; i < 40; i++) fl_sb_printf(&b, "padding words here. ");
    fl_sb_printf(&b, "math");
    fix f;
    fix_start(&f, "budget", b.p, 3);
    assert_int_equal(f.cp.st.execs_trim, 3); /* the cap, exactly */
    assert_true(strlen(f.x->c->turns[0]) < strlen(b.p)); /* first chunks went */
    assert_non_null(strstr(f.x->c->turns[0], "math"));
    fix_end(&f);
    free(b.p);
}

/* Trimming takes at most FL_CAMPAIGN_TRIM_SHARE % of the executions: 50 done, 5 trim runs
 * (the same trim takes more when nothing limits it), whatever the per-entry cap; none at
 * all while the share is under one run. */
static void test_share(void **state) {
    (void)state;
    fl_sb b = {0};
    for (int i = 0; i < 40; i++) fl_sb_printf(&b, "padding words here. ");
    fl_sb_printf(&b, "math");
    fix f;
    fix_start_at(&f, "share", b.p, 400, 50);
    assert_int_equal(f.cp.st.execs_trim, 50 * FL_CAMPAIGN_TRIM_SHARE / 100);
    assert_true(strlen(f.x->c->turns[0]) < strlen(b.p));
    pthread_mutex_lock(&f.cp.mu);
    assert_int_equal(camp_trim_budget(&f.cp), 0); /* 55 runs now: 5.5 allowed, 5 used */
    f.cp.st.execs = 1000;
    assert_int_equal(camp_trim_budget(&f.cp), 95); /* 100 allowed, 5 used; per entry: 400 */
    f.cp.st.execs = 5;
    f.cp.st.execs_trim = 0;
    assert_int_equal(camp_trim_budget(&f.cp), 0);
    pthread_mutex_unlock(&f.cp.mu);
    fix_end(&f);
    fix_start(&f, "share_free", b.p, 400);
    assert_true(f.cp.st.execs_trim > 50 * FL_CAMPAIGN_TRIM_SHARE / 100);
    fix_end(&f);
    free(b.p);
}

static void test_all_parts_matter(void **state) {
    (void)state;
    fix f;
    fix_start(&f, "needed", "please math please", 400);
    assert_string_equal(f.x->c->turns[0], "please math please"); /* two pleases: a bucket */
    assert_int_equal(f.cp.st.trimmed, 0);
    assert_int_equal(f.cp.st.trim_bytes, 0);
    assert_true(f.cp.st.execs_trim > 0);
    assert_null(f.x->untrimmed);
    fl_case *saved = queue_file(&f);
    assert_string_equal(saved->turns[0], "please math please");
    fl_case_free(saved);
    fix_end(&f);
}

/* A whole campaign: kept children are trimmed, within the budget, and the run is a function
 * of its seed; trim_execs -1 turns it off. */
static void test_campaign(void **state) {
    (void)state;
    char out[2][128], *argv[] = {tgt, NULL};
    fl_campaign_result r[2];
    for (int k = 0; k < 2; k++) {
        fl_campaign_opts o;
        fl_err e = {0};
        fl_campaign_opts_default(&o);
        snprintf(out[k], sizeof out[k], "%s/camp%d", tmp, k);
        o.in_dir = seeds, o.out_dir = out[k], o.argv = argv, o.max_execs = 400, o.seed = 3;
        o.timeout_ms = 2000, o.write_report = 0;
        assert_int_equal(fl_campaign_run(&o, &r[k], &e), FL_OK);
    }
    assert_true(r[0].stats.trimmed > 0);
    assert_true(r[0].stats.execs_trim <= (uint64_t)FL_CAMPAIGN_TRIM_EXECS * (uint64_t)r[0].stats.corpus_found);
    assert_true(r[0].stats.execs_trim * 100 <= FL_CAMPAIGN_TRIM_SHARE * r[0].stats.execs);
    assert_int_equal(r[0].stats.execs_trim, r[1].stats.execs_trim);
    assert_int_equal(r[0].stats.trim_bytes, r[1].stats.trim_bytes);
    assert_int_equal(r[0].stats.corpus_count, r[1].stats.corpus_count);
    char *v = stat_val(out[0], "execs_trim");
    assert_non_null(v);
    assert_int_equal(strtoull(v, NULL, 10), r[0].stats.execs_trim);
    free(v);
    fl_campaign_opts o;
    fl_err e = {0};
    fl_campaign_opts_default(&o);
    char off[128];
    snprintf(off, sizeof off, "%s/off", tmp);
    o.in_dir = seeds, o.out_dir = off, o.argv = argv, o.max_execs = 200, o.seed = 3;
    o.timeout_ms = 2000, o.write_report = 0, o.trim_execs = -1;
    fl_campaign_result ro;
    assert_int_equal(fl_campaign_run(&o, &ro, &e), FL_OK);
    assert_int_equal(ro.stats.execs_trim, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padding_trimmed),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_all_parts_matter),
        cmocka_unit_test(test_campaign),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
