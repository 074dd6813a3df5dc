/* The agents campaign's report.html as a person sees it: a short campaign against
 * tests/targets/campaign_tgt.c (as test_campaign runs it), its report rendered in headless
 * Chromium (Debian's `chromium`) at 1280 px — a screenshot, and the DOM after a script opened
 * the first finding with events: the findings count shown is the campaign's, the opened finding shows its
 * trace with one highlighted row, and the page does not scroll sideways. Then what the HTML
 * says without a spec (n/a, no coverage line at 0 %) and that its axes end at the run with
 * whole-number ticks on count axes. Without chromium the Chromium case is a SKIP (TU_NEED). */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "agents/campaign/report_int.h"
#include "flare/agents/campaign.h"
#include "campfix.h"

static char tmp[64], tgt[128], seeds[128], spec[128];

static int setup(void **state) {
    (void)state;
    if (camp_fix_dir(tmp, "report", tgt)) return -1;
    snprintf(seeds, sizeof seeds, "%s/seeds", tmp);
    mkdir(seeds, 0755);
    static const char *const s[] = {"what is math", "search the web for cats", "please boom the bridge",
                                    "leak it please"}; /* a crash and a forbidden output */
    for (int i = 0; i < 4; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%c.txt", seeds, 'a' + i), write_file(p, s[i]);
    }
    snprintf(spec, sizeof spec, "%s/spec.json", tmp);
    /* Checker is left out of the edges: Master->Checker is an undeclared edge, observed */
    write_file(spec, "{\"agents\": [{\"name\": \"Master\", \"decisions\": {\"route\": [\"math\", \"search\", "
                     "\"chat\"]}}, {\"name\": \"Worker\", \"tools\": [\"calc\", \"web\"]}, {\"name\": \"Checker\"}], "
                     "\"entry\": \"Master\", \"edges\": [[\"user\", \"Master\"], [\"Master\", \"Worker\"], "
                     "[\"Worker\", \"Master\"], [\"Master\", \"output\"], [\"Worker\", \"output\"]], "
                     "\"forbidden_output\": [\"SECRET-[0-9]+\"]}");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return camp_tmp_remove(tmp);
}

static fl_campaign_result campaign_in(const char *in, const char *out, const char *spec_path, uint64_t execs) {
    fl_campaign_opts o;
    fl_campaign_opts_default(&o);
    char *argv[] = {tgt, NULL};
    o.in_dir = in, o.out_dir = out, o.argv = argv, o.max_execs = execs, o.seed = 1;
    o.timeout_ms = 3000, o.spec_path = spec_path, o.write_report = 1;
    fl_campaign_result r;
    fl_err e = {0};
    if (fl_campaign_run(&o, &r, &e) != FL_OK) fail_msg("fl_campaign_run: %s", e.msg);
    return r;
}

static fl_campaign_result campaign(const char *out, const char *spec_path, uint64_t execs) {
    return campaign_in(seeds, out, spec_path, execs);
}

/* Executions of from -> to recorded in out/edges.json (0 when absent). */
static uint64_t edge_execs(const char *out, const char *from, const char *to) {
    char p[256];
    snprintf(p, sizeof p, "%s/edges.json", out);
    camp_edges h = {0};
    fl_err e = {0};
    if (camp_edges_read(&h, p, &e)) fail_msg("%s", e.msg);
    uint64_t n = 0;
    for (int i = 0; i < h.n; i++)
        if (!strcmp(h.v[i].from, from) && !strcmp(h.v[i].to, to)) n = h.v[i].execs;
    camp_edges_free(&h);
    return n;
}

/* The number after "key=" in s, -1 when absent. */
static long num_after(const char *s, const char *key) {
    const char *p = strstr(s, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static void test_chromium(void **state) {
    (void)state;
    char out[128], p[256], cp[256], png[256], prof[256];
    snprintf(out, sizeof out, "%s/o_spec", tmp);
    fl_campaign_result r = campaign(out, spec, 300);
    assert_true(r.stats.findings >= 2); /* the crash ("boom") and the forbidden output ("leak") */
    snprintf(p, sizeof p, "%s/report.html", out);
    char *html = slurp(p);
    assert_null(strstr(html, "<script")); /* the report itself runs nothing */
    assert_non_null(strstr(html, "not declared, observed")); /* Master->Checker */
    assert_non_null(strstr(html, "class=\"hl\""));

    TU_NEED(access("/usr/bin/chromium", X_OK) == 0, "chromium (Debian package chromium, for the report's rendering)");
    snprintf(prof, sizeof prof, "%s/chromium-profile", tmp);
    snprintf(png, sizeof png, "%s/report.png", tmp);
    const char *flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                        "--window-size=1280,900";
    int rc = tu_sh(NULL, "timeout 60 /usr/bin/chromium %s --user-data-dir=%s --screenshot=%s file://%s", flags, prof,
                   png, p);
    assert_int_equal(rc, 0);
    char *img = slurp(png); /* a PNG of 1280 x 900, with something drawn (not a blank page) */
    struct stat sb;
    assert_int_equal(stat(png, &sb), 0);
    assert_memory_equal(img, "\x89PNG\r\n\x1a\n", 8);
    const unsigned char *u = (const unsigned char *)img;
    assert_int_equal((u[16] << 24 | u[17] << 16 | u[18] << 8 | u[19]), 1280);
    assert_true(sb.st_size > 20000);
    free(img);

    /* a copy with a script that opens the first finding and writes what it measured into the
     * title; --dump-dom prints the DOM after it ran */
    char *end = strstr(html, "</body>");
    assert_non_null(end);
    snprintf(cp, sizeof cp, "%s/check.html", tmp);
    FILE *f = fopen(cp, "w");
    assert_non_null(f);
    fprintf(f, "%.*s<script>var a=[].slice.call(document.querySelectorAll('details.finding'));"
               "var d=a.filter(function(x){return x.querySelector('text.ix')})[0]||a[0];d.open=true;"
               "var r=document.documentElement;document.title='CHECK sw='+r.scrollWidth+' cw='+r.clientWidth"
               "+' open='+document.querySelectorAll('details.finding[open]').length"
               "+' svg='+d.querySelectorAll('svg').length+' hl='+d.querySelectorAll('rect.hl').length"
               "+' rows='+d.querySelectorAll('text.ix').length"
               "+' details='+document.querySelectorAll('details.finding').length"
               "+' n='+document.getElementById('n-findings').textContent+' end';</script>%s",
            (int)(end - html), html, end);
    fclose(f);
    char *dom = NULL;
    rc = tu_sh(&dom, "timeout 60 /usr/bin/chromium %s --user-data-dir=%s --dump-dom file://%s 2>/dev/null", flags,
               prof, cp);
    assert_int_equal(rc, 0);
    char *t = strstr(dom, "<title>CHECK");
    if (!t) fail_msg("the check script did not run: %.300s", dom);
    printf("chromium: %.*s\n", (int)(strstr(t, " end") ? strstr(t, " end") - t - 7 : 0), t + 7);
    assert_int_equal(num_after(t, " n="), r.stats.findings);       /* the count shown */
    assert_int_equal(num_after(t, " details="), r.stats.findings); /* one <details> a finding */
    assert_int_equal(num_after(t, " open="), 1);
    assert_true(num_after(t, " svg=") >= 1);                         /* its sequence diagram */
    assert_int_equal(num_after(t, " hl="), 1);                       /* one highlighted row */
    assert_true(num_after(t, " rows=") >= 3); /* a row per event (the forbidden output's trace) */
    long sw = num_after(t, "sw="), cw = num_after(t, " cw=");
    assert_true(cw > 1000);
    if (sw > cw) fail_msg("the page scrolls sideways at 1280 px: scrollWidth %ld > clientWidth %ld", sw, cw);
    free(dom);
    free(html);
}

/* The labels of class cls in html, as numbers ("12", "20%", "1.5k" read as their leading
 * number), into v; their count. */
static int labels(const char *html, const char *cls, double *v, int max, const char **bad) {
    char key[64];
    snprintf(key, sizeof key, "class=\"%s\">", cls);
    int n = 0;
    for (const char *s = strstr(html, key); s && n < max; s = strstr(s + 1, key)) {
        const char *x = s + strlen(key);
        if (*x < '0' || *x > '9') continue; /* "seconds" */
        v[n++] = strtod(x, NULL);
        if (bad && strchr("0123456789", *x)) {
            const char *q = x;
            while (*q && *q != '<' && *q != '%') q++;
            if (*q != '%' && memchr(x, '.', (size_t)(q - x))) *bad = x; /* a fraction on a count axis */
        }
    }
    return n;
}

static void test_no_spec_axes(void **state) {
    (void)state;
    char out[128], p[256];
    snprintf(out, sizeof out, "%s/o_nospec", tmp);
    fl_campaign_result r = campaign(out, NULL, 120);
    snprintf(p, sizeof p, "%s/report.html", out);
    char *html = slurp(p);
    assert_non_null(strstr(html, "n/a"));
    assert_null(strstr(html, "inter- and intra-agent coverage</title>")); /* no line at 0 % */
    assert_null(strstr(html, "declared, seen</td>"));                    /* nothing declared */
    assert_non_null(strstr(html, "observed</td>"));
    char num[32];
    snprintf(num, sizeof num, "id=\"n-findings\">%d<", (int)r.stats.findings);
    assert_non_null(strstr(html, num));
    /* y labels of the count plots: whole numbers */
    double v[256];
    const char *bad = NULL;
    assert_true(labels(html, "yl", v, 256, &bad) >= 4);
    if (bad) fail_msg("a count axis tick with a fraction: %.20s", bad);
    /* x labels end at the run: none past the last plot_data row's time */
    rp_data d = {.out_dir = out};
    rp_read(&d);
    assert_true(d.n_rows >= 1);
    double last = d.rows[d.n_rows - 1][PD_TIME];
    int nx = labels(html, "xl", v, 256, NULL);
    assert_true(nx >= 2);
    for (int i = 0; i < nx; i++)
        if (v[i] > last * 1.0001 + 1e-9) fail_msg("x tick %g past the run's end %g", v[i], last);
    rp_free(&d);
    free(html);
}

/* edges.json counts each execution once per edge it took, and a resumed campaign goes on from
 * the recorded counts; a broken file is an error naming it. */
static void test_edges_resume(void **state) {
    (void)state;
    char out[128], p[256];
    snprintf(out, sizeof out, "%s/o_edges", tmp);
    fl_campaign_result r = campaign(out, spec, 60);
    uint64_t first = edge_execs(out, "user", "Master");
    assert_true(first > 0 && first <= r.stats.execs); /* once per execution at most */
    assert_true(edge_execs(out, "Master", "Checker") > 0);
    campaign_in("-", out, spec, 40);
    assert_true(edge_execs(out, "user", "Master") > first);
    snprintf(p, sizeof p, "%s/bad_edges.json", tmp);
    write_file(p, "{\"edges\": [{\"from\": \"a\"}]}");
    camp_edges h = {0};
    fl_err e = {0};
    assert_int_equal(camp_edges_read(&h, p, &e), FL_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "bad_edges.json"));
    assert_non_null(strstr(e.msg, "edges[0]"));
    camp_edges_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chromium),
        cmocka_unit_test(test_no_spec_axes),
        cmocka_unit_test(test_edges_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
