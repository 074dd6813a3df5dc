/* Tests for behavioural coverage: trace views (edges, actors, turns), AFL hit-count buckets,
 * every feature family, check vs commit, spec coverage, the embedding and the clustering. */
#include "testutil.h"

#include "agtrace.h"
#include "flare/agents/agcov.h"
#include "flare/agents/target.h"

static fl_agcov *cov_new(const fl_spec *s, unsigned families) {
    fl_agcov_opts o;
    fl_agcov_opts_default(&o);
    if (families) o.families = families;
    fl_agcov *c;
    fl_err e = {0};
    if (fl_agcov_new(s, &o, &c, &e) != FL_OK) fail_msg("%s", e.msg);
    return c;
}

/* check, then commit, of a script; returns the check's verdict and asserts commit agrees */
static int feed(fl_agcov *c, const char *script) {
    fl_trace *t = tr(script);
    int n1, n2, r = fl_agcov_check(c, t, &n1);
    assert_int_equal(fl_agcov_check(c, t, NULL), r); /* check does not modify */
    assert_int_equal(fl_agcov_commit(c, t, &n2), r);
    assert_int_equal(n1, n2);
    assert_true(r == 0 ? n1 == 0 : n1 > 0);
    assert_int_equal(fl_agcov_check(c, t, &n1), 0); /* committed: nothing new any more */
    assert_int_equal(n1, 0);
    fl_trace_free(t);
    return r;
}

/* Does the feature list of script (against c) hold a feature whose text starts with `text`,
 * and with which is_new? Returns is_new, or -1 when absent. */
static int has_feature(const fl_agcov *c, const char *script, const char *text) {
    fl_trace *t = tr(script);
    fl_agfeature *f;
    int n = fl_agcov_features(c, t, &f), found = -1;
    assert_true(n >= 0);
    for (int i = 0; i < n; i++)
        if (!strncmp(f[i].text, text, strlen(text))) found = f[i].is_new;
    free(f);
    fl_trace_free(t);
    return found;
}

static void test_buckets(void **state) {
    (void)state;
    /* AFL's count_class_lookup8: bucket bit for every count around each boundary */
    static const struct { uint64_t lo, hi; uint8_t b; const char *name; } tab[] = {
        {0, 0, 0, "0"},     {1, 1, 1, "1"},         {2, 2, 2, "2"},           {3, 3, 4, "3"},
        {4, 7, 8, "4-7"},   {8, 15, 16, "8-15"},    {16, 31, 32, "16-31"},    {32, 127, 64, "32-127"},
        {128, 100000, 128, "128+"}};
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++) {
        assert_int_equal(fl_agcov_bucket(tab[k].lo), tab[k].b);
        assert_int_equal(fl_agcov_bucket(tab[k].hi), tab[k].b);
        assert_string_equal(fl_agcov_bucket_name(tab[k].b), tab[k].name);
        if (tab[k].lo > 0) assert_int_not_equal(fl_agcov_bucket(tab[k].lo - 1), tab[k].b);
    }
}

static void test_edges_actors_turns(void **state) {
    (void)state;
    fl_trace *t = tr("m user Master q; b Master route math; m Master Worker t; c Worker calc; r Worker calc ok 4;"
                     "m Worker Master r; o the answer; d");
    fl_agedge *e;
    int n = fl_agtrace_edges(t, NULL, &e);
    assert_int_equal(n, 4);
    const char *want[4][2] = {{"user", "Master"}, {"Master", "Worker"}, {"Worker", "Master"}, {"Master", "output"}};
    for (int i = 0; i < n; i++) {
        assert_string_equal(e[i].from, want[i][0]);
        assert_string_equal(e[i].to, want[i][1]);
    }
    assert_int_equal(e[0].event, 0);
    assert_int_equal(e[3].event, 6);
    free(e);
    assert_string_equal(fl_agtrace_actor(t, 6, NULL), "Master"); /* the receiver of the last message */
    assert_string_equal(fl_agtrace_actor(t, 3, NULL), "Worker");
    assert_null(fl_agtrace_actor(t, 7, NULL)); /* done */
    assert_int_equal(fl_agtrace_turns(t), 2); /* Master (branch, message), Worker (call, result, message) */
    assert_int_equal(fl_agtrace_messages(t), 3);
    assert_int_equal(fl_agtrace_last_output(t), 6);
    fl_trace_free(t);

    /* no user message: implicit user -> first agent; output after a message to the user
     * comes from its sender */
    t = tr("c Helper search; r Helper search ok x; m Helper user which one?; o this one; d");
    n = fl_agtrace_edges(t, NULL, &e);
    assert_int_equal(n, 3);
    assert_string_equal(e[0].from, "user");
    assert_string_equal(e[0].to, "Helper");
    assert_int_equal(e[0].event, -1);
    assert_string_equal(e[1].to, "user");
    assert_string_equal(e[2].from, "Helper");
    assert_string_equal(e[2].to, "output");
    free(e);
    assert_int_equal(fl_agtrace_turns(t), 1);
    fl_trace_free(t);

    /* an output with nothing before it: unknown producer without a spec */
    t = tr("o hi; d");
    n = fl_agtrace_edges(t, NULL, &e);
    assert_int_equal(n, 1);
    assert_string_equal(e[0].from, "?");
    free(e);
    assert_null(fl_agtrace_actor(t, 0, NULL));
    assert_int_equal(fl_agtrace_last_output(t), 0);
    fl_trace_free(t);

    /* turns are speaker runs; the user's messages do not count, and do not end a run */
    t = tr("m user A x; m A B x; m B A x; c A t; m A B x; m user A y; m A C y; m C A y; d");
    assert_int_equal(fl_agtrace_turns(t), 4); /* A, B, A (call, message, user skipped, message), C */
    assert_int_equal(fl_agtrace_messages(t), 7);
    fl_trace_free(t);
}

static void test_check_commit(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 0);
    assert_int_equal(feed(c, "m user A q; m A B x; m B A y; o done; d"), 2);
    /* the same behaviour with other words: nothing new (same cluster, same everything) */
    assert_int_equal(feed(c, "m user A q2; m A B x2; m B A y2; o done; d"), 0);
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.cases, 2);
    assert_true(r.features > 0);
    assert_int_equal(r.bits, r.features); /* one bit per entry so far */
    int sum = 0;
    for (int k = 0; k < FL_AGF_COUNT_; k++) sum += r.by_kind[k];
    assert_int_equal(sum, r.features);
    assert_int_equal(r.by_kind[FL_AGF_EDGE], 4); /* user>A, A>B, B>A, A>output */
    assert_int_equal(r.by_kind[FL_AGF_PATH3], 2);
    assert_int_equal(r.by_kind[FL_AGF_TURNS], 2); /* turns bucket, messages bucket */
    assert_int_equal(r.by_kind[FL_AGF_CLUSTER], 1);
    assert_int_equal(r.clusters, 1);
    assert_false(r.has_spec);
    assert_true(r.inter < 0 && r.intra < 0);
    fl_agcov_free(c);
}

/* An edge A->B taken n times (and B->A n times). */
static char *pingpong(int n) {
    char *s = malloc((size_t)n * 40 + 16);
    size_t k = 0;
    for (int i = 0; i < n; i++) k += (size_t)sprintf(s + k, "m A B x; m B A y; ");
    sprintf(s + k, "d");
    return s;
}

static void test_hit_buckets(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 1u << FL_AGF_EDGE);
    /* counts in increasing order: a new bucket is 1 (new hit count), a count in a bucket
     * already seen is 0 */
    static const struct { int n, want; } seq[] = {{1, 2}, {1, 0}, {2, 1}, {3, 1}, {4, 1}, {7, 0}, {5, 0}, {8, 1},
                                                  {15, 0}, {16, 1}, {31, 0}, {32, 1}, {127, 0}, {128, 1}, {200, 0}};
    for (size_t k = 0; k < sizeof seq / sizeof seq[0]; k++) {
        char *s = pingpong(seq[k].n);
        int got = feed(c, s);
        if (got != seq[k].want) fail_msg("edge x%d: check %d, want %d", seq[k].n, got, seq[k].want);
        free(s);
    }
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.features, 3); /* user>A (implicit), A>B, B>A */
    assert_int_equal(r.bits, 1 + 2 * 8); /* user>A once; both edges in all 8 buckets */
    /* a new edge is a new feature */
    assert_int_equal(feed(c, "m A C x; d"), 2);
    /* features list shows the bucket */
    assert_int_equal(has_feature(c, "m A B x; m A B x; m A B x; m A B x; d", "edge A->B x4-7"), 0);
    fl_agcov_free(c);
}

static void test_tools_branches(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 1u << FL_AGF_TOOL | 1u << FL_AGF_TOOL2 | 1u << FL_AGF_TOOL3 | 1u << FL_AGF_BRANCH);
    const char *abc = "c W a; r W a ok 1; c X z; c W b; c W c; d";
    assert_int_equal(has_feature(c, abc, "tool W: a"), 2);
    assert_int_equal(has_feature(c, abc, "tool2 W: a>b"), 2);   /* per agent: X's call in between */
    assert_int_equal(has_feature(c, abc, "tool2 W: a>z"), -1);
    assert_int_equal(has_feature(c, abc, "tool2 W: b>c"), 2);
    assert_int_equal(has_feature(c, abc, "tool3 W: a>b>c"), 2);
    assert_int_equal(has_feature(c, abc, "tool X: z"), 2);
    assert_int_equal(has_feature(c, abc, "tool2 X"), -1);
    assert_int_equal(feed(c, abc), 2);
    assert_int_equal(feed(c, "c W a; c W b; d"), 0);      /* all seen */
    assert_int_equal(feed(c, "c W b; c W a; d"), 2);      /* bigram b>a */
    assert_int_equal(feed(c, "c X a; d"), 2);             /* same tool, other agent */
    assert_int_equal(feed(c, "c W b; c W a; c W b; d"), 2); /* trigram b>a>b */
    assert_int_equal(feed(c, "b M route math; d"), 2);
    assert_int_equal(feed(c, "b M route math; b M route math; d"), 0);
    assert_int_equal(feed(c, "b M route chat; d"), 2);
    assert_int_equal(feed(c, "b M mood chat; d"), 2);
    assert_int_equal(has_feature(c, "b M route chat; d", "branch M: route=chat"), 0);
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.by_kind[FL_AGF_TOOL], 5); /* W:a W:b W:c X:z X:a */
    assert_int_equal(r.by_kind[FL_AGF_BRANCH], 3);
    assert_int_equal(r.by_kind[FL_AGF_EDGE], 0); /* family disabled */
    fl_agcov_free(c);
}

static void test_paths_errors_turns(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 1u << FL_AGF_PATH3);
    assert_int_equal(has_feature(c, "m A B x; m B C x; m C A x; d", "path3 user>A>B>C"), 2);
    assert_int_equal(has_feature(c, "m A B x; m B C x; m C A x; d", "path3 A>B>C>A"), 2);
    assert_int_equal(has_feature(c, "m A B x; m C D x; m B A x; d", "path3 A->B, C->D, B->A"), 2);
    assert_int_equal(feed(c, "m A B x; m B C x; m C A x; d"), 2);
    assert_int_equal(feed(c, "m A B y; m B C y; m C A y; d"), 0);
    assert_int_equal(feed(c, "m A C y; m C B y; m B A y; d"), 2);
    fl_agcov_free(c);

    c = cov_new(NULL, 1u << FL_AGF_ERROR);
    assert_int_equal(feed(c, "e W ZeroDivisionError: division by zero; d"), 2);
    assert_int_equal(feed(c, "e W ZeroDivisionError: float division; d"), 0); /* same kind */
    assert_int_equal(feed(c, "e W KeyError('x'); d"), 2);
    assert_int_equal(has_feature(c, "e W KeyError('y'); d", "error W: KeyError"), 0);
    assert_int_equal(feed(c, "e V ZeroDivisionError: x; d"), 2);                     /* other agent */
    assert_int_equal(has_feature(c, "e W   ; d", "error W: (empty)"), 2);
    assert_int_equal(feed(c, "c W calc; r W calc fail boom; d"), 2);
    assert_int_equal(feed(c, "c W calc; r W calc fail other words; d"), 0);
    assert_int_equal(feed(c, "c W calc; r W calc ok 3; d"), 0); /* success: not an error */
    fl_trace *t = tr("m A B x");
    t->exit = FL_EXIT_CRASH;
    assert_int_equal(fl_agcov_commit(c, t, NULL), 2);
    t->exit = FL_EXIT_HANG;
    assert_int_equal(fl_agcov_check(c, t, NULL), 2);
    t->exit = FL_EXIT_DONE;
    t->n_protocol = 1;
    assert_int_equal(fl_agcov_check(c, t, NULL), 2);
    fl_trace_free(t);
    fl_agcov_free(c);

    c = cov_new(NULL, 1u << FL_AGF_TURNS);
    assert_int_equal(feed(c, "m A B x; d"), 2);       /* turns 1, messages 1 */
    assert_int_equal(feed(c, "c A t; m A B x; d"), 0); /* still one turn, one message */
    assert_int_equal(feed(c, "m A B x; m B A x; d"), 2);
    assert_int_equal(feed(c, "m A B x; m B A x; m A B x; m B A x; d"), 2); /* 4-7 */
    assert_int_equal(feed(c, "m A B x; m B A x; m A B x; m B A x; m A B x; d"), 0);
    fl_agcov_free(c);
}

static void test_embedding(void **state) {
    (void)state;
    float a[512], b[512];
    assert_int_equal(fl_embed_text("", 0, 3, a, 512), 0);
    assert_int_equal(fl_embed_text(" \t\n ", 4, 3, a, 512), 0);
    for (int k = 0; k < 512; k++) assert_true(a[k] == 0);
    /* case, white space runs and digit runs are normalised */
    assert_true(fl_embed_text("The  Answer\tis 42", 17, 3, a, 512) > 0);
    fl_embed_text("the answer is 7", 15, 3, b, 512);
    double dot = 0, na = 0;
    for (int k = 0; k < 512; k++) dot += a[k] * b[k], na += a[k] * a[k];
    assert_true(fabs(na - 1) < 1e-5);
    assert_true(fabs(dot - 1) < 1e-5);
    /* a one-character text and an n-gram longer than the text still embed */
    assert_int_equal(fl_embed_text("x", 1, 3, a, 512), 1);
    assert_int_equal(fl_embed_text("ab", 2, 8, a, 512), 1);
    /* UTF-8: Chinese characters are single code points; invalid bytes do not crash */
    assert_int_equal(fl_embed_text("答案", strlen("答案"), 3, a, 512), 2); /* " 答案 " */
    const char bad[] = {'a', (char)0xff, (char)0xc3, 'b', (char)0xe4, (char)0xbd};
    assert_int_equal(fl_embed_text(bad, sizeof bad, 3, a, 512), 6); /* " a?" "a??" ... 8 points */
    na = 0;
    for (int k = 0; k < 512; k++) na += a[k] * a[k];
    assert_true(fabs(na - 1) < 1e-5);
}

static double cosine(const char *x, const char *y) {
    float a[512], b[512];
    fl_embed_text(x, strlen(x), 3, a, 512);
    fl_embed_text(y, strlen(y), 3, b, 512);
    double d = 0;
    for (int k = 0; k < 512; k++) d += a[k] * b[k];
    return d;
}

static void test_clusters(void **state) {
    (void)state;
    /* similar outputs are close, different ones far, in both languages */
    const char *same[][2] = {
        {"The result of 3 * 4 is 12.", "The result of 17 + 5 is 22."},
        {"The answer to your question is 42.", "The answer is 42."},
        {"答案是四十二。", "答案是四十三。"},
    };
    const char *diff[][2] = {
        {"The result of 3 * 4 is 12.", "I cannot help with that request, sorry."},
        {"The capital of France is Paris.", "Error: the calculator tool failed."},
        {"答案是四十二。", "对不起，我无法帮助你。"},
    };
    for (int i = 0; i < 3; i++) {
        double s = cosine(same[i][0], same[i][1]), d = cosine(diff[i][0], diff[i][1]);
        if (!(s >= 0.5)) fail_msg("similar pair %d: cos %.3f", i, s);
        if (!(d < 0.5)) fail_msg("different pair %d: cos %.3f", i, d);
    }
    fl_agcov *c = cov_new(NULL, 1u << FL_AGF_CLUSTER);
    assert_int_equal(feed(c, "o The result of 3 * 4 is 12.; d"), 2);
    assert_int_equal(feed(c, "o The result of 17 + 5 is 22.; d"), 0);
    assert_int_equal(has_feature(c, "o I cannot help with that request, sorry.; d", "cluster 1 (new)"), 2);
    assert_int_equal(feed(c, "o I cannot help with that request, sorry.; d"), 2);
    assert_int_equal(feed(c, "o Sorry, I cannot help with that request.; d"), 0);
    assert_int_equal(has_feature(c, "o The result of 1 - 1 is 0.; d", "cluster 0"), 0);
    assert_int_equal(feed(c, "o 答案是四十二。; d"), 2);
    assert_int_equal(feed(c, "o 答案是四十三。; d"), 0);
    assert_int_equal(feed(c, "d"), 2);     /* no output */
    assert_int_equal(feed(c, "o ; d"), 2); /* blank output */
    assert_int_equal(feed(c, "o   ; d"), 0);
    assert_int_equal(has_feature(c, "d", "cluster none"), 0);
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.clusters, 3);
    assert_int_equal(r.by_kind[FL_AGF_CLUSTER], 5);
    fl_agcov_free(c);

    /* deterministic, and bounded: with 2 clusters at most, a third kind joins the nearest */
    fl_agcov_opts o;
    fl_agcov_opts_default(&o);
    o.max_clusters = 2;
    o.families = 1u << FL_AGF_CLUSTER;
    fl_err e;
    assert_int_equal(fl_agcov_new(NULL, &o, &c, &e), FL_OK);
    assert_int_equal(feed(c, "o The result of 3 * 4 is 12.; d"), 2);
    assert_int_equal(feed(c, "o I cannot help with that request, sorry.; d"), 2);
    assert_int_equal(feed(c, "o The capital of France is Paris.; d"), 0);
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.clusters, 2);
    fl_agcov_free(c);

    /* the clustering directly: leaders never move, ties go to the older cluster */
    fl_clusters *cl = fl_clusters_new(4, 0.9f, 10);
    float x[4] = {1, 0, 0, 0}, y[4] = {0, 1, 0, 0}, z[4] = {0.70710678f, 0.70710678f, 0, 0};
    assert_int_equal(fl_clusters_find(cl, x), -1);
    assert_int_equal(fl_clusters_assign(cl, x), 0);
    assert_int_equal(fl_clusters_assign(cl, y), 1);
    float cs;
    assert_int_equal(fl_clusters_nearest(cl, z, &cs), 0);
    assert_true(fabsf(cs - 0.70710678f) < 1e-5f);
    assert_int_equal(fl_clusters_assign(cl, z), 2);
    assert_int_equal(fl_clusters_assign(cl, x), 0);
    assert_int_equal(fl_clusters_count(cl), 3);
    fl_clusters_free(cl);
    /* Hartigan's rule: the first leader within the radius, not the nearest */
    cl = fl_clusters_new(4, 0.5f, 10);
    float v[4] = {0.8f, 0.6f, 0, 0};
    assert_int_equal(fl_clusters_assign(cl, y), 0);
    assert_int_equal(fl_clusters_assign(cl, x), 1);
    assert_int_equal(fl_clusters_nearest(cl, v, &cs), 1);
    assert_int_equal(fl_clusters_find(cl, v), 0);
    assert_int_equal(fl_clusters_assign(cl, v), 0);
    fl_clusters_free(cl);
}

static const char *spec_text =
    "{\"agents\": [{\"name\": \"Master\", \"decisions\": {\"route\": [\"math\", \"chat\"]}},"
    "              {\"name\": \"Worker\", \"tools\": [\"calc\", \"search\"]}, {\"name\": \"Checker\"}],"
    " \"entry\": \"Master\","
    " \"edges\": [[\"Master\", \"Worker\"], [\"Worker\", \"Master\"], [\"Master\", \"Checker\"], [\"Checker\", \"Master\"],"
    "           [\"Master\", \"output\"]]}";

/* An external embedder (what --llm-embed plugs in): outputs mentioning "cat" land on one axis,
 * "dog" on another; anything else falls back to the built-in n-grams. */
static int embed_calls;
static int fake_embed(void *user, const char *text, float **v, int *n) {
    (void)user;
    embed_calls++;
    if (!strstr(text, "cat") && !strstr(text, "dog")) return -1;
    *n = 700; /* longer than embed_dim: folded */
    *v = calloc(700, sizeof(float));
    (*v)[strstr(text, "cat") ? 3 : 600] = 2.0f;
    return 0;
}

static void test_external_embedder(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 1u << FL_AGF_CLUSTER);
    fl_agcov_set_embedder(c, fake_embed, NULL);
    /* wholly different words, one cluster: the embedder says they are the same */
    assert_int_equal(feed(c, "o a cat sat on the mat; d"), 2);
    assert_int_equal(feed(c, "o cats are everywhere today, said nobody; d"), 0);
    assert_int_equal(feed(c, "o my dog; d"), 2);
    /* the embedder declines: the built-in embedding decides */
    assert_int_equal(feed(c, "o The result of 3 * 4 is 12.; d"), 2);
    assert_int_equal(feed(c, "o The result of 17 + 5 is 22.; d"), 0);
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.clusters, 3);
    assert_true(embed_calls >= 5);
    fl_agcov_free(c);
}

static void test_spec_coverage(void **state) {
    (void)state;
    fl_spec *s;
    fl_err e;
    assert_int_equal(fl_spec_parse(spec_text, strlen(spec_text), "spec.json", &s, &e), FL_OK);
    fl_agcov *c = cov_new(s, 0);
    fl_agcov_report r;
    fl_agcov_report_get(c, &r);
    assert_true(r.has_spec);
    assert_int_equal(r.edges_total, 6);
    assert_int_equal(r.edges_seen, 0);
    assert_true(r.inter == 0 && r.intra == 0);
    /* without a user message the implicit user -> Master edge counts; the output producer
     * falls back to the entry agent */
    feed(c, "b Master route math; m Master Worker x; c Worker calc; c Worker calc; c Worker nope; m Worker Master y; o 4; d");
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.edges_seen, 4); /* user>Master, Master>Worker, Worker>Master, Master>output */
    assert_true(fabs(r.inter - 4.0 / 6) < 1e-12);
    int seen, declared;
    fl_agcov_agent(c, 0, &seen, &declared);
    assert_int_equal(seen, 1);
    assert_int_equal(declared, 2);
    fl_agcov_agent(c, 1, &seen, &declared);
    assert_int_equal(seen, 1); /* calc; "nope" is undeclared and does not count */
    assert_int_equal(declared, 2);
    fl_agcov_agent(c, 2, &seen, &declared);
    assert_int_equal(declared, 0);
    /* Checker declares nothing: left out of the average */
    assert_true(fabs(r.intra - 0.5) < 1e-12);
    assert_true(fl_agcov_edge_seen(c, fl_spec_edge_find(s, 0, 1)));
    assert_false(fl_agcov_edge_seen(c, fl_spec_edge_find(s, 0, 2)));
    /* undeclared edges are features, never in the numerator */
    feed(c, "m Master Worker x; m Worker Checker z; o q; d");
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.edges_seen, 4);
    feed(c, "m user Master hi; m Master Checker x; m Checker Master ok; b Master route chat; c Worker search; o q; d");
    fl_agcov_report_get(c, &r);
    assert_int_equal(r.edges_seen, 6);
    assert_true(r.inter == 1.0);
    assert_true(r.intra == 1.0);
    fl_agcov_free(c);
    fl_spec_free(s);
}

static void test_features_list(void **state) {
    (void)state;
    fl_agcov *c = cov_new(NULL, 0);
    fl_trace *t = tr("m user A q; c A t; r A t fail x; e A Timeout after 3s; m A B x; o fine; d");
    fl_agfeature *f;
    int n = fl_agcov_features(c, t, &f);
    assert_true(n > 8);
    /* the output comes from B, who received the last message */
    const char *want[] = {"edge user->A x1", "edge A->B x1", "edge B->output x1", "path3 user>A>B>output",
                          "tool A: t", "error A: tool t failed", "error A: Timeout", "turns agent 1", "turns messages 2",
                          "cluster 0 (new)"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= !strncmp(f[i].text, want[k], strlen(want[k])) && f[i].is_new == 2;
        if (!found) fail_msg("feature '%s' missing", want[k]);
    }
    for (int i = 0; i < n; i++) {
        assert_true(f[i].index < FL_AGCOV_MAP_SIZE);
        assert_int_equal(strncmp(f[i].text, fl_agfeat_name(f[i].kind), strlen(fl_agfeat_name(f[i].kind))), 0);
    }
    free(f);
    assert_int_equal(fl_agcov_commit(c, t, NULL), 2);
    n = fl_agcov_features(c, t, &f);
    for (int i = 0; i < n; i++) assert_int_equal(f[i].is_new, 0);
    free(f);
    fl_trace_free(t);
    fl_agcov_free(c);
}

static void test_opts(void **state) {
    (void)state;
    fl_agcov_opts o;
    fl_agcov *c = NULL;
    fl_err e;
    fl_agcov_opts_default(&o);
    o.embed_dim = 8;
    assert_int_equal(fl_agcov_new(NULL, &o, &c, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "dimensions"));
    fl_agcov_opts_default(&o);
    o.cluster_cos = 1.5f;
    assert_int_equal(fl_agcov_new(NULL, &o, &c, &e), FL_ERR_ARG);
    assert_null(c);
    assert_int_equal(fl_agcov_new(NULL, NULL, &c, &e), FL_OK);
    fl_agcov_free(c);
    fl_agcov_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets),      cmocka_unit_test(test_edges_actors_turns),
        cmocka_unit_test(test_check_commit), cmocka_unit_test(test_hit_buckets),
        cmocka_unit_test(test_tools_branches), cmocka_unit_test(test_paths_errors_turns),
        cmocka_unit_test(test_embedding),    cmocka_unit_test(test_clusters),
        cmocka_unit_test(test_spec_coverage), cmocka_unit_test(test_features_list),
        cmocka_unit_test(test_opts),         cmocka_unit_test(test_external_embedder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
