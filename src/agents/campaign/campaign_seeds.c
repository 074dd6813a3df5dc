/* The campaign's starting corpus: the seeds of -i, or, resuming with `-i -`, the queue, the
 * saved findings and the counters of the interrupted campaign in -o.
 *
 * Every entry is run once before fuzzing starts (AFL's dry run): that rebuilds the coverage
 * map, gives the schedules each entry's behaviour path, and reports seeds that already fail.
 * A resumed campaign does not rewrite its queue files and does not save again a finding whose
 * signature is already in failures/ or hangs/. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/campaign/campaign_int.h"

enum { MAX_SEED_BYTES = 1 << 20 };

/* Run c once and hand it to camp_process as a kept entry named `name`. */
static fl_status run_entry(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_case *c,
                           const char *name, int src, int write, fl_err *e) {
    snprintf(c->id, sizeof c->id, "%06d", cp->q.n);
    fl_case_new_trace(c, trace_rng);
    fl_status st = fl_target_run(t, c, tr, e);
    if (!st) st = fl_otlp_src_collect(cp->otlp, c, tr, e);
    if (st) {
        fl_case_free(c);
        return st;
    }
    camp_origin org = {.name = name, .src = src, .write = write};
    pthread_mutex_lock(&cp->mu);
    if (tr->exit == FL_EXIT_DONE && fl_target_first_case(t) && tr->ms > cp->dry_first_ms)
        cp->dry_first_ms = tr->ms;
    camp_restart_add(cp, fl_target_restart_ms(t));
    if (tr->exit == FL_EXIT_DONE) camp_stall_note(cp, fl_target_silence_ms(t));
    camp_process(cp, c, tr, &org);
    st = cp->err;
    if (st) *e = cp->errmsg;
    pthread_mutex_unlock(&cp->mu);
    return st;
}

/* Why buf is not a text seed, or NULL when it is one. A seed is a prompt: a file with a NUL
 * byte, bytes that are not UTF-8 or control bytes other than tab, newline, carriage return and
 * form feed is an image, an archive or a compiled file that landed in -i by mistake, and its
 * bytes sent as a prompt would only test the target's input decoding. */
static const char *binary_why(const uint8_t *buf, size_t len, char *why, size_t n) {
    for (size_t i = 0; i < len; i++)
        if (buf[i] < 0x20 && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '\f') {
            snprintf(why, n, "%s byte 0x%02x at offset %zu", buf[i] ? "control" : "NUL", buf[i], i);
            return why;
        }
    if (!fl_utf8_valid((const char *)buf, len)) return snprintf(why, n, "not UTF-8 text"), why;
    return NULL;
}

typedef struct seed_read {
    fl_case **c;
    char binary[96]; /* set when the file was skipped as binary */
} seed_read;

static fl_status parse_seed(const uint8_t *buf, size_t len, const char *path, void *ctx,
                            fl_err *e) {
    seed_read *r = ctx;
    if (len > MAX_SEED_BYTES)
        return fl_fail(e, FL_ERR_FORMAT, "%s: %zu bytes; seeds are at most %d bytes", path, len,
                       MAX_SEED_BYTES);
    if (binary_why(buf, len, r->binary, sizeof r->binary)) return FL_OK;
    return fl_case_parse((const char *)buf, len, path, r->c, e);
}

/* A queue entry of a resumed campaign: flare wrote it, so binary bytes are damage. */
static fl_status read_case(const char *path, fl_case **c, fl_err *e) {
    seed_read r = {.c = c};
    fl_status st = fl_file_parse(path, parse_seed, &r, e);
    if (!st && r.binary[0]) st = fl_fail(e, FL_ERR_FORMAT, "%s: not a case file (%s)", path, r.binary);
    return st;
}

/* 1 when path, a file found under in_dir, is in a campaign's output folder (one holding
 * fuzzer_stats) without being one of its queue entries: -i pointed at an earlier campaign's
 * out/ takes its corpus, never its logs, reports, findings or statistics. */
static int in_campaign_not_queue(const char *in_dir, const char *path) {
    char dir[4096], p[4200];
    size_t top = strlen(in_dir);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *slash; (slash = strrchr(dir, '/')) && (size_t)(slash - dir) >= top;) {
        *slash = 0;
        snprintf(p, sizeof p, "%s/fuzzer_stats", dir);
        if (access(p, F_OK) != 0) continue;
        size_t dl = strlen(dir);
        const char *rest = path + dl + 1;
        return strncmp(rest, "queue/id:", 9) != 0 || strchr(rest + 6, '/') != NULL;
    }
    return 0;
}

/* Every seed file of in_dir, read and parsed: l lists them, (*cs)[i] is l.v[i]'s case. Binary
 * files and an earlier campaign's own files are left out, each kind said once with a count.
 * (say 1: the setup's check, which runs first, says it; the run reads them again quietly).
 * A folder without seeds or with a bad one is an error; what was read is then still in l and
 * *cs for the caller to free. */
static fl_status read_seeds(const char *in_dir, int say, camp_paths *l, fl_case ***cs, fl_err *e) {
    camp_paths all = {0};
    fl_status st = camp_paths_list(in_dir, &all, 8, NULL, e); /* AFL++ reads -i recursively */
    *cs = all.n ? calloc((size_t)all.n, sizeof **cs) : NULL;
    if (!st && all.n && !*cs) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    int n_binary = 0, n_campaign = 0;
    for (int i = 0; !st && i < all.n; i++) {
        if (in_campaign_not_queue(in_dir, all.v[i])) {
            n_campaign++;
            continue;
        }
        seed_read r = {.c = &(*cs)[l->n]};
        if ((st = fl_file_parse(all.v[i], parse_seed, &r, e))) break;
        if (r.binary[0]) {
            if (n_binary++ < 3 && say) fl_log(1, "warning: -i: skipped %s: not a text seed (%s)\n", all.v[i], r.binary);
            continue;
        }
        if (camp_paths_add(l, all.v[i]) < 0) {
            fl_case_free((*cs)[l->n]), (*cs)[l->n] = NULL;
            st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
    }
    if (n_binary > 3 && say) fl_log(1, "warning: -i: skipped %d binary files in all\n", n_binary);
    if (n_campaign && say)
        fl_log(1, "note: -i %s: %d file%s of a campaign's output folder left out (its logs, reports, "
               "findings and statistics; only queue/id:* entries are seeds)\n", in_dir, n_campaign,
               n_campaign == 1 ? "" : "s");
    camp_paths_free(&all);
    if (!st && l->n == 0)
        st = fl_fail(e, FL_ERR_NOTFOUND, "%s: no seed files (text files with one instruction "
                     "each, or JSON requests {\"turns\":[...]})%s", in_dir,
                     n_binary ? "; the binary files there were skipped" : "");
    return st;
}

static void free_seeds(camp_paths *l, fl_case **cs) {
    for (int i = 0; cs && i < l->n; i++) fl_case_free(cs[i]);
    free(cs);
    camp_paths_free(l);
}

fl_status camp_seeds_check(const char *in_dir, size_t *longest, fl_err *e) {
    camp_paths l = {0};
    fl_case **cs = NULL;
    fl_status st = read_seeds(in_dir, 1, &l, &cs, e);
    *longest = 0;
    for (int i = 0; !st && i < l.n; i++) {
        size_t n = fl_case_bytes(cs[i]);
        if (n > *longest) *longest = n;
    }
    free_seeds(&l, cs);
    return st;
}

size_t camp_max_len_default(size_t longest) {
    size_t n = FL_CAMPAIGN_LEN_MULT * longest;
    return n < FL_CAMPAIGN_LEN_FLOOR ? FL_CAMPAIGN_LEN_FLOOR : n > FL_CAMPAIGN_LEN_CAP ? FL_CAMPAIGN_LEN_CAP : n;
}

/* The dry run's checks on one seed (AFL's "test case results in a crash/timeout"): a seed that
 * already fails is named in a warning. Returns 1 when it crashed or timed out. */
static int dry_check(camp *cp, const char *path, const fl_trace *tr, int first, int new_findings) {
    if (tr->exit == FL_EXIT_DONE && !first && tr->ms > cp->dry_slowest_ms) cp->dry_slowest_ms = tr->ms;
    if (tr->exit == FL_EXIT_HANG)
        fl_log(1, "warning: seed %s timed out (%d ms) in the dry run; its mutants will too\n",
               path, cp->timeout_ms);
    else if (tr->exit == FL_EXIT_CRASH)
        fl_log(1, "warning: seed %s crashed in the dry run (exit status %d)\n", path,
               tr->exit_status);
    else if (new_findings > 0)
        fl_log(1, "warning: seed %s already fails (%d finding%s saved in the dry run)\n", path,
               new_findings, new_findings == 1 ? "" : "s");
    return tr->exit == FL_EXIT_HANG || tr->exit == FL_EXIT_CRASH;
}

/* Without -T: FL_CAMPAIGN_TIMEOUT_MULT times the slowest normal seed, rounded up to 100 ms,
 * within [FLOOR, CAP]; every seed hanging or crashing was refused before. */
int camp_timeout_calibrate(double slowest_ms) {
    double ms = FL_CAMPAIGN_TIMEOUT_MULT * slowest_ms;
    int v = (int)(ms / 100 + 0.999) * 100;
    if (v < FL_CAMPAIGN_TIMEOUT_FLOOR) v = FL_CAMPAIGN_TIMEOUT_FLOOR;
    if (v > FL_CAMPAIGN_TIMEOUT_CAP) v = FL_CAMPAIGN_TIMEOUT_CAP;
    return v;
}

static void set_timeout(camp *cp, fl_target *t, int ms, const char *source) {
    cp->timeout_ms = cp->meta.timeout_ms = cp->st.timeout_ms = ms;
    snprintf(cp->st.timeout_source, sizeof cp->st.timeout_source, "%s", source);
    fl_target_set_timeout(t, ms);
}

static void calibrate(camp *cp, fl_target *t) {
    /* one seed only, and it was the process's first case: its time is all there is */
    double slowest = cp->dry_slowest_ms > 0 ? cp->dry_slowest_ms : cp->dry_first_ms;
    int ms = camp_timeout_calibrate(slowest);
    set_timeout(cp, t, ms, "calibrated");
    fl_log(1, "timeout: %d ms (%d x the slowest seed, %.0f ms, within %d..%d; -T sets it)\n", ms,
           FL_CAMPAIGN_TIMEOUT_MULT, slowest, FL_CAMPAIGN_TIMEOUT_FLOOR, FL_CAMPAIGN_TIMEOUT_CAP);
}

/* A new process's first case may take FL_CAMPAIGN_TIMEOUT_MULT x the dry run's slowest first
 * case more than the timeout (an interpreter loading an agent framework takes seconds; the
 * timeout is for what a case costs). With or without -T. */
static void startup_allowance(camp *cp, fl_target *t) {
    int ms = cp->dry_first_ms > 0 ? camp_timeout_calibrate(cp->dry_first_ms) : 0;
    cp->st.startup_ms = ms;
    fl_target_set_startup(t, ms);
    if (cp->dry_first_ms > 2 * cp->dry_slowest_ms && cp->dry_first_ms >= 50)
        fl_log(1, "start-up: a new process's first case took %.0f ms; it gets %d ms more than "
                  "the timeout\n", cp->dry_first_ms, ms);
}

/* The dry run's first case on a new process, run again for its time alone (AFL runs every
 * seed several times to calibrate): twice at most, as a seed that crashed after it left a new
 * process again. Counted as executions, judged by nobody. */
static void time_again(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_case *c) {
    for (int k = 0; k < 2; k++) {
        fl_err e = {0};
        if (fl_otlp_src_run(cp->otlp, t, c, trace_rng, tr, &e) != FL_OK) return;
        pthread_mutex_lock(&cp->mu);
        camp_count_unjudged(cp, t, tr);
        int first = fl_target_first_case(t), done = tr->exit == FL_EXIT_DONE;
        if (done && !first && tr->ms > cp->dry_slowest_ms) cp->dry_slowest_ms = tr->ms;
        pthread_mutex_unlock(&cp->mu);
        if (!done || !first) return;
    }
}

static fl_status load_seeds(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_err *e) {
    camp_paths l = {0};
    fl_case **cs = NULL;
    /* every seed is read before any runs (setup checked them before -o was made: the files may
     * have changed since) */
    fl_status st = read_seeds(cp->o->in_dir, 0, &l, &cs, e);
    size_t skip = strlen(cp->o->in_dir) + 1;
    int n_bad = 0; /* seeds that crashed or timed out */
    fl_case *again = NULL; /* a seed that was a process's first case, to be timed again */
    for (int i = 0; !st && i < l.n; i++) {
        char orig[160], name[256];
        od_file_name(l.v[i] + skip, orig, sizeof orig);
        snprintf(name, sizeof name, "id:%06d,orig:%s", cp->q.n, orig);
        int found0 = cp->st.findings;
        fl_case *copy = again ? NULL : fl_case_copy(cs[i]);
        st = run_entry(cp, t, tr, trace_rng, cs[i], name, -1, 1, e);
        cs[i] = NULL; /* run_entry owns it */
        int first = !st && fl_target_first_case(t);
        if (!st) n_bad += dry_check(cp, l.v[i], tr, first, cp->st.findings - found0);
        if (first && tr->exit == FL_EXIT_DONE && !again) again = copy, copy = NULL;
        fl_case_free(copy);
    }
    if (!st && again && cp->o->timeout_ms <= 0) time_again(cp, t, tr, trace_rng, again);
    fl_case_free(again);
    if (!st && n_bad == l.n)
        st = fl_fail(e, FL_ERR_ARG,
                     "-i %s: every seed (%d) crashed or timed out at %d ms in the dry run; "
                     "check the target command and its log (%s/logs), or raise -T",
                     cp->o->in_dir, l.n, cp->timeout_ms, cp->o->out_dir);
    free_seeds(&l, cs);
    if (!st && cp->o->timeout_ms <= 0) calibrate(cp, t);
    if (!st) startup_allowance(cp, t);
    return st;
}

/* failures/<kind>/<sig>.json and hangs/<sig>.json: signatures and per-kind counts. */
static fl_status load_findings(camp *cp, fl_err *e) {
    static const char *const sub[] = {"failures", "hangs"};
    for (int s = 0; s < 2; s++) {
        char dir[4096], **paths;
        int n;
        if (od_path(dir, sizeof dir, cp->o->out_dir, sub[s], e)) return e->status;
        if (saved_case_list(dir, &paths, &n, NULL)) continue;
        for (int i = 0; i < n; i++) {
            char *base = strrchr(paths[i], '/') + 1, kind[64] = "hang";
            if (s == 0) { /* the folder above the file names the kind */
                char *slash = base - 1, *start = slash;
                while (start > paths[i] && start[-1] != '/') start--;
                snprintf(kind, sizeof kind, "%.*s", (int)(slash - start), start);
            }
            char sig[160];
            snprintf(sig, sizeof sig, "%.*s", (int)(strlen(base) - 5), base);
            int k = fl_finding_kind_parse(kind);
            int fresh = sig_set_add(&cp->sigs, kind, sig);
            if (fresh < 0) {
                saved_case_list_free(paths, n);
                return fl_fail(e, FL_ERR_NOMEM, "out of memory");
            }
            if (fresh && k >= 0) cp->st.kind_count[k]++, cp->st.findings++;
        }
        saved_case_list_free(paths, n);
    }
    return FL_OK;
}

static double kv_num(const od_kv *kv, const char *key) {
    const char *v = od_kv_get(kv, key);
    return v ? strtod(v, NULL) : 0;
}

static fl_status resume(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_err *e) {
    char p[4096];
    fl_status st = od_path(p, sizeof p, cp->o->out_dir, "fuzzer_stats", e);
    if (st) return st;
    od_kv kv;
    if (od_kv_read(p, &kv, NULL) == FL_OK) { /* counters carry over; a missing file: zeros */
        cp->execs0 = cp->st.execs = (uint64_t)kv_num(&kv, "execs_done");
        cp->run_time0 = kv_num(&kv, "run_time");
        if (kv_num(&kv, "start_time") > 0) cp->st.start_time = kv_num(&kv, "start_time");
        cp->st.crashes = (uint64_t)kv_num(&kv, "total_crashes");
        cp->st.hangs = (uint64_t)kv_num(&kv, "total_hangs");
        cp->st.last_cov_time = kv_num(&kv, "last_find");
        cp->st.last_find_time = kv_num(&kv, "last_finding");
        cp->st.execs_last_find = (uint64_t)kv_num(&kv, "execs_last_finding");
        cp->st.execs_full_edges = (uint64_t)kv_num(&kv, "execs_full_edges");
        cp->st.case_seconds = kv_num(&kv, "case_time");
        cp->st.hang_seconds = kv_num(&kv, "hang_time");
        cp->st.restart_seconds = kv_num(&kv, "restart_time");
        int rec = (int)kv_num(&kv, "timeout_ms"); /* the recorded timeout, unless -T */
        fl_target_set_startup(t, (int)kv_num(&kv, "startup_ms")); /* measured again below */
        if (cp->o->timeout_ms <= 0 && rec > 0) {
            set_timeout(cp, t, rec, "resumed");
            fl_log(1, "timeout: %d ms (recorded in %s; -T sets it)\n", rec, p);
        }
        od_kv_free(&kv);
    }
    if ((st = load_findings(cp, e))) return st;
    camp_paths l = {0};
    if ((st = od_path(p, sizeof p, cp->o->out_dir, "queue", e)) ||
        (st = camp_paths_list(p, &l, 0, NULL, e)))
        return camp_paths_free(&l), st;
    for (int i = 0; !st && i < l.n; i++) {
        const char *base = strrchr(l.v[i], '/') + 1, *src = strstr(base, ",src:");
        if (strncmp(base, "id:", 3)) continue; /* not a queue entry */
        fl_case *c;
        if ((st = read_case(l.v[i], &c, e))) break;
        st = run_entry(cp, t, tr, trace_rng, c, base, src ? atoi(src + 5) : -1, 0, e);
    }
    camp_paths_free(&l);
    if (!st) startup_allowance(cp, t);
    return st;
}

fl_status camp_load_corpus(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_err *e) {
    if (cp->o->in_dir && !strcmp(cp->o->in_dir, "-")) return resume(cp, t, tr, trace_rng, e);
    return load_seeds(cp, t, tr, trace_rng, e);
}
