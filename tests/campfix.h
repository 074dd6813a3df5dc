/* Helpers shared by the agents campaign tests (test_campaign, test_campaign_timeout,
 * test_campaign_resume): read a whole file, write one, and read one key of a campaign's
 * fuzzer_stats; make and remove the test's folder. Each fails the running test on an error. Include after testutil.h and
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

/* A new folder /tmp/flare_<name>_XXXXXX into tmp (64 bytes) with tests/targets/campaign_tgt.c
 * compiled in it, its path into tgt (128 bytes): the setup of the campaign tests. 0, or -1. */
static inline int camp_fix_dir(char *tmp, const char *name, char *tgt) {
    snprintf(tmp, 64, "/tmp/flare_%s_XXXXXX", name);
    if (!mkdtemp(tmp)) return -1;
    snprintf(tgt, 128, "%s/campaign_tgt", tmp);
    return tu_build_target("campaign_tgt", tgt);
}

/* rm -rf tmp, for a teardown: 0, or -1. */
static inline int camp_fix_rm(const char *tmp) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
