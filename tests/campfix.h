/* Helpers shared by the agents campaign tests (test_campaign, test_campaign_timeout,
 * test_campaign_resume, test_campaign_trim): read a whole file, write one, read one key of a
 * campaign's fuzzer_stats, make and remove a temporary folder with the test target. Each fails the running test on an error. Include after testutil.h and
 * agents/campaign/campaign_int.h (od_kv). */
#ifndef FLARE_TESTS_CAMPFIX_H
#define FLARE_TESTS_CAMPFIX_H

/* The file at path, NUL-terminated (malloc'd). */
static inline char *slurp(const char *path) {
    uint8_t *b;
    size_t n;
    fl_err e = {0};
    if (fl_file_read(path, &b, &n, &e) != FL_OK) fail_msg("%s", e.msg);
    char *s = realloc(b, n + 1);
    s[n] = 0;
    return s;
}

static inline void write_file(const char *path, const char *text) {
    fl_err e = {0};
    if (fl_file_write_atomic(path, text, strlen(text), &e) != FL_OK) fail_msg("%s", e.msg);
}

/* fuzzer_stats' value of key in the campaign folder out (malloc'd); a missing key fails. */
static inline char *stat_val(const char *out, const char *key) {
    char p[256];
    fl_err e = {0};
    od_kv kv;
    snprintf(p, sizeof p, "%s/fuzzer_stats", out);
    if (od_kv_read(p, &kv, &e) != FL_OK) fail_msg("%s", e.msg);
    const char *v = od_kv_get(&kv, key);
    if (!v) fail_msg("fuzzer_stats has no key '%s'", key);
    char *r = strdup(v);
    od_kv_free(&kv);
    return r;
}

/* A fresh temporary folder from pattern ("/tmp/flare_x_XXXXXX", rewritten in place) with
 * tests/targets/campaign_tgt.c built into it as tgt; -1 on failure (a cmocka setup's result). */
static inline int camp_tmp_new(char *pattern, char *tgt, size_t n) {
    if (!mkdtemp(pattern)) return -1;
    snprintf(tgt, n, "%s/campaign_tgt", pattern);
    return tu_build_target("campaign_tgt", tgt) != 0 ? -1 : 0;
}

/* rm -rf dir; 0 or -1 (a cmocka teardown's result). */
static inline int camp_tmp_remove(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* camp_tmp_new for /tmp/flare_<name>_XXXXXX into tmp (64 bytes), tgt 128 bytes. */
static inline int camp_fix_dir(char *tmp, const char *name, char *tgt) {
    snprintf(tmp, 64, "/tmp/flare_%s_XXXXXX", name);
    return camp_tmp_new(tmp, tgt, 128);
}

#endif
