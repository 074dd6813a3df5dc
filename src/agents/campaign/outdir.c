/* The campaign's output folder, laid out as AFL++ lays out its own so that the habits (and
 * scripts such as afl-plot readers) carry over:
 *
 *     out/queue/id:000000,orig:seed1.txt            the corpus: seeds, then kept children
 *     out/queue/id:000007,src:000002,op:synonym,+cov
 *     out/failures/<kind>/<signature>.json          one file per distinct finding
 *     out/hangs/<signature>.json                    timeouts
 *     out/fuzzer_stats                              "key : value", rewritten atomically
 *     out/plot_data                                 CSV, one row every few seconds
 *     out/logs/target.N.log                         the targets' stderr (capped)
 *     out/report.md, out/report.html                at the end
 *
 * Every file but plot_data is written with fl_file_write_atomic, so a reader (or a campaign
 * killed halfway) never sees half a file. plot_data is append-only: one write(2) per row
 * through a line-buffered stream, and readers skip a truncated last line.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents/campaign/campaign_int.h"

fl_status od_path(char *buf, size_t n, const char *out_dir, const char *rel, fl_err *e) {
    return fl_path_join(buf, n, out_dir, rel, e);
}


fl_status od_prepare(const char *out_dir, int resume, fl_err *e) {
    char p[4096];
    fl_status st;
    if ((st = od_path(p, sizeof p, out_dir, "fuzzer_stats", e))) return st;
    int has_stats = access(p, F_OK) == 0;
    if ((st = od_path(p, sizeof p, out_dir, "queue", e))) return st;
    int has_queue = fl_dir_has_entries(p);
    if (resume && !has_queue)
        return fl_fail(e, FL_ERR_NOTFOUND,
                       "-i -: %s/queue holds no campaign to resume", out_dir);
    if (!resume && (has_stats || has_queue))
        return fl_fail(e, FL_ERR_ARG,
                       "%s already holds a campaign: resume it with -i -, or choose another -o",
                       out_dir);
    static const char *const sub[] = {"", "queue", "failures", "hangs", "logs"};
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        if ((st = od_path(p, sizeof p, out_dir, sub[i], e))) return st;
        if ((st = fl_mkdirs(p, e))) return st;
    }
    return FL_OK;
}

void od_file_name(const char *sig, char *buf, size_t n) {
    size_t len = strlen(sig), keep = len <= 120 ? len : 103, k = 0;
    for (size_t i = 0; i < keep && k + 1 < n; i++) {
        char c = sig[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        buf[k++] = ok && !(i == 0 && c == '.') ? c : '_';
    }
    buf[k] = 0;
    if (len > keep) snprintf(buf + k, n - k, "-%016llx", (unsigned long long)fl_fnv1a(FL_FNV_BASIS, sig, len));
    if (!buf[0]) snprintf(buf, n, "_");
}

int fl_campaign_recorded_timeout(const char *path) {
    char dir[4096], p[4200];
    if (!path || snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return 0;
    for (int up = 0; up <= 3; up++) {
        snprintf(p, sizeof p, "%s/fuzzer_stats", dir);
        od_kv kv;
        if (od_kv_read(p, &kv, NULL) == FL_OK) {
            const char *v = od_kv_get(&kv, "timeout_ms");
            int ms = v ? atoi(v) : 0;
            od_kv_free(&kv);
            return ms > 0 ? ms : 0;
        }
        char *slash = strrchr(dir, '/');
        while (slash && slash > dir && slash[1] == 0) *slash = 0, slash = strrchr(dir, '/');
        if (!slash) {
            if (!strcmp(dir, ".")) return 0;
            snprintf(dir, sizeof dir, ".");
        } else if (slash == dir) {
            dir[1] = 0;
        } else {
            *slash = 0;
        }
    }
    return 0;
}

/* ---- fuzzer_stats -------------------------------------------------------------------------- */
/* A value on one line: newlines would start a bogus key. */
static void kv_str(fl_sb *b, const char *key, const char *v) {
    fl_sb_printf(b, "%-18s: ", key);
    for (const char *s = v ? v : ""; *s; s++) fl_sb_printf(b, "%c", *s == '\n' || *s == '\r' ? ' ' : *s);
    fl_sb_printf(b, "\n");
}

fl_status od_write_case(const char *out_dir, const char *rel, const fl_case *c, fl_err *e) {
    char p[4096];
    char *txt = fl_case_to_file_json(c); /* with its expect: a resume keeps it */
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", rel);
    fl_status st = od_path(p, sizeof p, out_dir, rel, e);
    if (!st) st = fl_file_write_atomic(p, txt, strlen(txt), e);
    free(txt);
    return st;
}

fl_status od_write_stats(const char *out_dir, const fl_campaign_stats *s, const od_meta *m,
                         fl_err *e) {
    fl_sb b = {0};
    double now = (double)time(NULL);
#define KV(key, fmt, ...) fl_sb_printf(&b, "%-18s: " fmt "\n", key, __VA_ARGS__)
    KV("start_time", "%.0f", s->start_time);
    KV("last_update", "%.0f", now);
    KV("run_time", "%.0f", s->run_time);
    KV("fuzzer_pid", "%d", (int)getpid());
    KV("execs_done", "%llu", (unsigned long long)s->execs);
    KV("execs_per_sec", "%.2f", s->execs_per_sec);
    KV("corpus_count", "%d", s->corpus_count);
    KV("corpus_found", "%d", s->corpus_found);
    KV("features", "%lld", (long long)s->features);
    KV("edges_found", "%d", s->edges_seen);
    KV("edges_allowed", "%d", s->edges_allowed);
    if (s->inter_cov >= 0) KV("inter_agent_cov", "%.2f%%", 100 * s->inter_cov);
    else kv_str(&b, "inter_agent_cov", "n/a");
    if (s->intra_cov >= 0) KV("intra_agent_cov", "%.2f%%", 100 * s->intra_cov);
    else kv_str(&b, "intra_agent_cov", "n/a");
    KV("saved_findings", "%d", s->findings);
    for (int i = 0; i < s->n_kinds; i++) {
        char key[40];
        snprintf(key, sizeof key, "findings_%s", s->kind_name[i]);
        KV(key, "%d", s->kind_count[i]);
    }
    KV("total_crashes", "%llu", (unsigned long long)s->crashes);
    KV("total_hangs", "%llu", (unsigned long long)s->hangs);
    KV("case_time", "%.3f", s->case_seconds);
    KV("hang_time", "%.3f", s->hang_seconds);
    KV("restart_time", "%.3f", s->restart_seconds);
    KV("hangs_known", "%llu", (unsigned long long)s->hangs_known);
    KV("hang_confirms", "%llu", (unsigned long long)s->hang_confirms);
    KV("hangs_stalled", "%llu", (unsigned long long)s->hangs_stalled);
    KV("execs_trim", "%llu", (unsigned long long)s->execs_trim);
    KV("trim_bytes", "%llu", (unsigned long long)s->trim_bytes);
    KV("trimmed", "%d", s->trimmed);
    KV("auto_dict", "%d", s->auto_dict);
    KV("auto_dict_learnt", "%llu", (unsigned long long)s->auto_dict_learnt);
    KV("hang_share", "%.2f%%", s->case_seconds > 0 ? 100 * s->hang_seconds / s->case_seconds : 0);
    KV("last_find", "%.0f", s->last_cov_time);
    KV("last_finding", "%.0f", s->last_find_time);
    KV("execs_last_finding", "%llu", (unsigned long long)s->execs_last_find);
    KV("execs_full_edges", "%llu", (unsigned long long)s->execs_full_edges);
    if (s->llm_on) {
        KV("llm_calls", "%lld", (long long)s->llm_calls);
        KV("llm_tokens", "%lld", (long long)s->llm_tokens);
        KV("llm_cache_hits", "%lld", (long long)s->llm_cache_hits);
        KV("llm_failures", "%lld", (long long)s->llm_failures);
        KV("llm_malformed", "%lld", (long long)s->llm_malformed);
        KV("llm_gen_cases", "%llu", (unsigned long long)s->llm_gen_cases);
        KV("llm_gen_kept", "%llu", (unsigned long long)s->llm_gen_kept);
        KV("llm_gen_finds", "%llu", (unsigned long long)s->llm_gen_finds);
        KV("llm_budget_exhausted", "%d", s->llm_budget_exhausted);
    }
    if (s->otlp_on) KV("otlp_spans", "%ld", s->otlp_spans);
    if (s->otlp_on) KV("otlp_late", "%ld", s->otlp_late);
    KV("seed", "%llu", (unsigned long long)m->seed);
    kv_str(&b, "schedule", m->schedule);
    KV("jobs", "%d", m->jobs);
    kv_str(&b, "target_mode", m->fresh ? "fresh" : "persistent");
    KV("timeout_ms", "%d", m->timeout_ms);
    kv_str(&b, "timeout_source", s->timeout_source);
    KV("startup_ms", "%d", s->startup_ms);
    KV("max_len", "%zu", m->max_len);
    kv_str(&b, "spec", m->spec ? m->spec : "");
    kv_str(&b, "dict", m->dict ? m->dict : "");
    kv_str(&b, "lexicon", m->lexicon ? m->lexicon : "");
    kv_str(&b, "target", m->target);
    kv_str(&b, "command_line", m->command_line);
    kv_str(&b, "flare_version", FLARE_VERSION);
#undef KV
    fl_status st;
    char path[4096];
    if (b.oom) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    else if ((st = od_path(path, sizeof path, out_dir, "fuzzer_stats", e)) == FL_OK)
        st = fl_file_write_atomic(path, b.p, b.n, e);
    free(b.p);
    return st;
}

void od_kv_free(od_kv *kv) {
    for (int i = 0; i < kv->n; i++) free(kv->key[i]), free(kv->val[i]);
    free(kv->key);
    free(kv->val);
    memset(kv, 0, sizeof *kv);
}

static char *trim_dup(const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    return strndup(s, n);
}

fl_status od_kv_read(const char *path, od_kv *kv, fl_err *e) {
    memset(kv, 0, sizeof *kv);
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st) return st;
    const char *p = (const char *)buf, *end = p + len;
    int cap = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            if (kv->n == cap) {
                cap = cap ? 2 * cap : 64;
                char **k = realloc(kv->key, (size_t)cap * sizeof *k);
                if (k) kv->key = k;
                char **v = realloc(kv->val, (size_t)cap * sizeof *v);
                if (v) kv->val = v;
                if (!k || !v) goto oom;
            }
            kv->key[kv->n] = trim_dup(p, (size_t)(colon - p));
            kv->val[kv->n] = trim_dup(colon + 1, (size_t)(le - colon - 1));
            if (!kv->key[kv->n] || !kv->val[kv->n]) {
                free(kv->key[kv->n]), free(kv->val[kv->n]);
                goto oom;
            }
            kv->n++;
        }
        p = le + 1;
    }
    free(buf);
    return FL_OK;
oom:
    free(buf);
    od_kv_free(kv);
    return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
}

const char *od_kv_get(const od_kv *kv, const char *key) {
    for (int i = kv->n - 1; i >= 0; i--)
        if (!strcmp(kv->key[i], key)) return kv->val[i];
    return NULL;
}

/* ---- plot_data ------------------------------------------------------------------------------ */
const char od_plot_header[] =
    "# relative_time, execs_done, execs_per_sec, corpus_count, features, edges_found, "
    "edges_allowed, inter_agent_cov, intra_agent_cov, saved_findings, total_hangs\n";

fl_status od_plot_open(const char *out_dir, FILE **f, fl_err *e) {
    char path[4096];
    fl_status st = od_path(path, sizeof path, out_dir, "plot_data", e);
    if (st) return st;
    *f = fopen(path, "a");
    if (!*f) return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    setvbuf(*f, NULL, _IOLBF, 0);
    fseek(*f, 0, SEEK_END);
    if (ftell(*f) == 0) fputs(od_plot_header, *f);
    return FL_OK;
}

void od_plot_row(FILE *f, const fl_campaign_stats *s) {
    if (!f) return;
    fprintf(f, "%.1f, %llu, %.2f, %d, %lld, %d, %d, %.4f, %.4f, %d, %llu\n", s->run_time,
            (unsigned long long)s->execs, s->execs_per_sec, s->corpus_count,
            (long long)s->features, s->edges_seen, s->edges_allowed,
            s->inter_cov >= 0 ? s->inter_cov : 0, s->intra_cov >= 0 ? s->intra_cov : 0,
            s->findings, (unsigned long long)s->hangs);
}
