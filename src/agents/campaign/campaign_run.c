/* fl_campaign_run: set up (spec, coverage, mutators, output folder, targets), load the corpus,
 * run the workers, and finish (final statistics, plot row, report) however the loop ended. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/http_target.h"

typedef struct worker {
    camp *cp;
    int idx;
    int timeout_ms;   /* its target's timeout now (tight_timeout) */
    fl_target *t;
    fl_trace *tr;
    fl_rng rng;       /* mutation and scheduling */
    fl_rng trace_rng; /* trace ids only */
    fl_status st;
    fl_err e;
    pthread_t th;
} worker;

/* Known failures cost less. Once a hang is saved, cases run with a tighter timeout:
 * TIGHT_MULT x the time within which 99 % of the campaign's normal cases ended (camp_ok_ms;
 * at least TIGHT_FLOOR ms, at most the timeout). A case that times out under it and whose hang signature is not known
 * yet is run again with the whole timeout before it counts (AFL++ confirms hangs the same
 * way), so a slow case is not reported as a new hang; one with a known signature is the known
 * hang again, and costs the tight timeout only. Under cp->mu. */
#define TIGHT_MULT 3
#define TIGHT_FLOOR 20
static int tight_timeout(const camp *cp) {
    if (!cp->st.kind_count[FL_FIND_HANG]) return cp->timeout_ms;
    int ms = (int)(TIGHT_MULT * camp_ok_ms(cp)) + 1;
    return ms < TIGHT_FLOOR ? TIGHT_FLOOR : ms > cp->timeout_ms ? cp->timeout_ms : ms;
}

/* Under cp->mu: did a tight-timeout hang produce a hang signature not saved yet? */
static int new_hang(camp *cp, const fl_case *c, const fl_trace *t) {
    fl_findings f = {0};
    fl_err e = {0};
    int fresh = 0;
    if (fl_oracle_check(cp->spec, c, t, &cp->oo, &f, &e)) return 1; /* unsure: confirm */
    for (int i = 0; i < f.n; i++)
        if (f.v[i].kind == FL_FIND_HANG && !sig_set_has(&cp->sigs, "hang", f.v[i].signature))
            fresh = 1;
    fl_findings_free(&f);
    return fresh;
}

static void set_worker_timeout(worker *w, int ms) {
    if (w->timeout_ms != ms) fl_target_set_timeout(w->t, ms), w->timeout_ms = ms;
}

/* Under cp->mu: the stall check for the next runs (campaign_stall.c), off until a hang is known. */
static void set_worker_stall(worker *w) {
    fl_target_set_stall(w->t, camp_stall_idle_ms(w->cp), camp_stall_check, w->cp);
}

/* One child of p: a single random operator half of the time (a clean name for the queue
 * file), else an AFL havoc stack ("havoc,rep:N"). */
static fl_case *make_child(worker *w, const fl_case *pc, const fl_case *sp,
                           const fl_mutate_extra *x, char *op, size_t n) {
    camp *cp = w->cp;
    fl_case *child = NULL;
    fl_mutate_info info;
    if (fl_rng_below(&w->rng, 2)) {
        for (int tries = 0; tries < 4 && !child; tries++) {
            int k = (int)fl_rng_below(&w->rng, (uint32_t)fl_mutate_op_count());
            if (fl_mutate_with(cp->mut, x, &w->rng, pc, sp, k, &child, &info) != FL_OK) child = NULL;
        }
    }
    if (!child && fl_mutate_with(cp->mut, x, &w->rng, pc, sp, FL_MUTATE_HAVOC, &child, &info) != FL_OK)
        return NULL;
    if (!strcmp(info.op_name, "havoc")) snprintf(op, n, "havoc,rep:%d", info.n_ops);
    else snprintf(op, n, "%s", info.op_name);
    return child;
}

static void *work(void *arg) {
    worker *w = arg;
    camp *cp = w->cp;
    pthread_mutex_lock(&cp->mu);
    while (!camp_stopping(cp)) {
        int energy;
        q_entry *p = q_pick(&cp->q, &w->rng, &energy);
        if (!p) break;
        if (!p->trim && camp_trim_budget(cp) > 0) { /* AFL trims an entry when first fuzzed */
            set_worker_timeout(w, tight_timeout(cp));
            set_worker_stall(w);
            camp_trim(cp, p, w->t, w->tr, &w->trace_rng);
        }
        for (int k = 0; k < energy && !camp_stopping(cp); k++) {
            uint64_t nexec = cp->execs0 + ++cp->reserved;
            const q_entry *other = q_other(&cp->q, &w->rng, p);
            fl_case *gen = camp_llm_next(cp, &w->rng); /* usually NULL (campaign_llm.c) */
            int tight = tight_timeout(cp);
            set_worker_stall(w);
            /* read under the lock: another worker's trim may replace an entry's case */
            const fl_case *pc = p->c, *sp = other ? other->c : NULL;
            const fl_mutate_extra *words = gen ? NULL : fl_autodict_snapshot(cp->autod);
            pthread_mutex_unlock(&cp->mu);
            set_worker_timeout(w, tight);

            char op[64] = "llm";
            fl_case *child = gen ? gen : make_child(w, pc, sp, words, op, sizeof op);
            fl_status st = FL_OK;
            double restart = 0; /* fl_target_restart_ms of the run that gave the result */
            if (child) {
                fl_case_new_trace(child, &w->trace_rng);
                snprintf(child->id, sizeof child->id, "%06llu",
                         (unsigned long long)(nexec % 1000000000000ull));
                st = fl_target_run(w->t, child, w->tr, &w->e);
                restart = fl_target_restart_ms(w->t);
                int stalled = fl_target_stalled(w->t);
                if (!st && w->tr->exit == FL_EXIT_HANG && (tight < cp->timeout_ms || stalled)) {
                    pthread_mutex_lock(&cp->mu);
                    int confirm = new_hang(cp, child, w->tr);
                    if (!confirm) cp->st.hangs_known++, cp->st.hangs_stalled += stalled;
                    pthread_mutex_unlock(&cp->mu);
                    if (confirm) { /* its time waiting under the tight timeout counts too */
                        double lost = w->tr->ms, lost_restart = restart;
                        set_worker_timeout(w, cp->timeout_ms);
                        fl_target_set_stall(w->t, 0, NULL, NULL);
                        st = fl_target_run(w->t, child, w->tr, &w->e);
                        restart = fl_target_restart_ms(w->t);
                        pthread_mutex_lock(&cp->mu);
                        camp_restart_add(cp, lost_restart);
                        cp->st.hang_confirms++;
                        cp->st.case_seconds += lost / 1000, cp->st.hang_seconds += lost / 1000;
                        pthread_mutex_unlock(&cp->mu);
                    }
                }
                if (!st) st = fl_otlp_src_collect(cp->otlp, child, w->tr, &w->e); /* spans */
            }
            pthread_mutex_lock(&cp->mu);
            camp_restart_add(cp, restart);
            if (!st && child && w->tr->exit == FL_EXIT_DONE)
                camp_stall_note(cp, fl_target_silence_ms(w->t));
            if (words) fl_autodict_release(cp->autod, words);
            if (!child) {
                fl_fail(&w->e, FL_ERR_NOMEM, "mutation: out of memory");
                camp_fail(cp, &w->e);
            } else if (st) {
                camp_fail(cp, &w->e);
                fl_case_free(child);
            } else {
                camp_origin org = {.parent = p, .op = op};
                org.other = strncmp(op, "splice", 6) ? NULL : other;
                camp_process(cp, child, w->tr, &org);
            }
        }
    }
    pthread_mutex_unlock(&cp->mu);
    return NULL;
}

/* -i equal to -o or inside it is refused: the seeds would be read from the campaign's own
 * queue, logs and reports, and grow with every run. */
static fl_status in_not_in_out(const char *in, const char *out, fl_err *e) {
    char *a = realpath(in, NULL), *b = realpath(out, NULL);
    size_t nb = b ? strlen(b) : 0;
    int bad = a && b && !strncmp(a, b, nb) && (a[nb] == 0 || a[nb] == '/' || nb == 1);
    int same = bad && a[nb] == 0;
    free(a), free(b);
    if (!bad) return FL_OK;
    return fl_fail(e, FL_ERR_ARG, "-i %s is %s -o %s: seeds must live outside the output folder",
                   in, same ? "the same folder as" : "inside", out);
}

static fl_status setup(camp *cp, const fl_campaign_opts *o, fl_err *e) {
    fl_status st;
    if (!o->out_dir || !o->in_dir || (!o->http && (!o->argv || !o->argv[0])))
        return fl_fail(e, FL_ERR_ARG, "campaign: -i, -o and a target command are required");
    if (o->jobs < 1 || o->jobs > 256) return fl_fail(e, FL_ERR_ARG, "-j %d: 1 to 256", o->jobs);
    if (o->spec_path && (st = fl_spec_load(o->spec_path, &cp->spec, e))) return st;
    /* failure files record the spec's absolute path: replay may run from another folder */
    if (o->spec_path && !(cp->spec_abs = realpath(o->spec_path, NULL)))
        return fl_fail(e, FL_ERR_NOMEM, "%s: cannot resolve the path", o->spec_path);
    if ((st = fl_agcov_new(cp->spec, NULL, &cp->cov, e))) return st;
    struct stat sb; /* a wrong -i fails before anything is created in -o */
    int resuming = !strcmp(o->in_dir, "-");
    if (!resuming && (stat(o->in_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return fl_fail(e, FL_ERR_NOTFOUND, "-i %s: not a folder of seed files", o->in_dir);
    if (!resuming && (st = in_not_in_out(o->in_dir, o->out_dir, e))) return st;
    size_t longest = 0;
    if (!resuming && (st = camp_seeds_check(o->in_dir, &longest, e))) return st;
    fl_mutate_opts mo;
    fl_mutate_opts_default(&mo);
    const char *rec_len = resuming ? od_kv_get(&cp->rec, "max_len") : NULL;
    mo.max_len = o->max_len > 0 ? o->max_len
                 : rec_len && atol(rec_len) >= 16 ? (size_t)atol(rec_len)
                 : resuming ? FL_CAMPAIGN_LEN_CAP : camp_max_len_default(longest);
    if (o->max_len > 0 && o->max_len < 16)
        return fl_fail(e, FL_ERR_ARG, "--max-len %zu: at least 16 bytes", o->max_len);
    cp->st.max_len = cp->meta.max_len = mo.max_len;
    mo.mix_lang = o->mix_lang;
    if ((st = fl_mutator_new(&mo, &cp->mut, e))) return st;
    if ((st = fl_mutator_add_spec_words(cp->mut, cp->spec, e))) return st; /* issue 15 §2 */
    if (o->auto_dict > 0 && !(cp->autod = fl_autodict_new(o->auto_dict)))
        return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (o->dict_path && (st = fl_mutator_load_dict(cp->mut, o->dict_path, e))) return st;
    if (o->lexicon_path && (st = fl_mutator_load_lexicon(cp->mut, o->lexicon_path, e))) return st;
    /* recorded as absolute paths: a resumed campaign reuses them (campaign_resume.c) */
    if ((o->dict_path && !(cp->dict_abs = realpath(o->dict_path, NULL))) ||
        (o->lexicon_path && !(cp->lexicon_abs = realpath(o->lexicon_path, NULL))))
        return fl_fail(e, FL_ERR_NOMEM, "%s: cannot resolve the path",
                       cp->dict_abs || !o->dict_path ? o->lexicon_path : o->dict_path);
    fl_oracle_opts_default(&cp->oo);
    if ((st = q_init(&cp->q, o->schedule, e))) return st;
    if ((st = camp_otlp_start(cp, e))) return st; /* a port in use fails before -o is made */
    if ((st = od_prepare(o->out_dir, !strcmp(o->in_dir, "-"), e))) return st;
    char ep[4096]; /* resumed: the recorded handoff counts go on (a folder from before has none) */
    if (resuming && !od_path(ep, sizeof ep, o->out_dir, "edges.json", NULL) && access(ep, F_OK) == 0 &&
        (st = camp_edges_read(&cp->edges, ep, e)))
        return st;
    if ((st = camp_llm_start(cp, e))) return st; /* its cache may live in -o */
    saved_argv_line(o->argv, cp->target_desc, sizeof cp->target_desc);
    if (o->http) snprintf(cp->target_desc, sizeof cp->target_desc, "%s", o->http->url);
    cp->meta = (od_meta){.seed = o->seed, .schedule = fl_schedule_name(o->schedule),
                         .command_line = o->command_line ? o->command_line : cp->target_desc,
                         .target = cp->target_desc, .spec = cp->spec_abs, .jobs = o->jobs,
                         .dict = cp->dict_abs, .lexicon = cp->lexicon_abs,
                         .max_len = cp->meta.max_len,
                         .fresh = o->fresh};
    /* without -T the dry run runs with the cap; camp_load_corpus calibrates or resumes */
    cp->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : FL_CAMPAIGN_TIMEOUT_CAP;
    cp->meta.timeout_ms = cp->st.timeout_ms = cp->timeout_ms;
    snprintf(cp->st.timeout_source, sizeof cp->st.timeout_source, "%s",
             o->timeout_ms > 0 ? "flag" : "calibrated");
    cp->st.seed = o->seed;
    snprintf(cp->st.schedule, sizeof cp->st.schedule, "%s", fl_schedule_name(o->schedule));
    cp->st.n_kinds = FL_FIND_COUNT_;
    for (int i = 0; i < FL_FIND_COUNT_; i++)
        snprintf(cp->st.kind_name[i], sizeof cp->st.kind_name[i], "%s",
                 fl_finding_kind_name((fl_finding_kind)i));
    cp->st.inter_cov = cp->st.intra_cov = -1;
    return od_plot_open(o->out_dir, &cp->plot, e);
}

static fl_status start_worker(camp *cp, worker *w, int idx, fl_err *e) {
    const fl_campaign_opts *o = cp->o;
    w->cp = cp;
    w->idx = idx;
    /* a resumed session goes on from the recorded seed; its execs (salt) keep it from
     * repeating the first session's decisions */
    uint64_t seed = o->seed + 0xd1b54a32d192ed03ull * cp->salt;
    fl_rng_seed(&w->rng, seed + 0x9e3779b97f4a7c15ull * (uint64_t)idx);
    fl_rng_seed(&w->trace_rng, ~seed - (uint64_t)idx);
    if (!(w->tr = fl_trace_new())) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_target_opts to;
    fl_target_opts_default(&to);
    w->timeout_ms = cp->timeout_ms;
    to.fresh = o->fresh;
    to.spare = !o->no_spare;
    to.timeout_ms = cp->timeout_ms;
    to.mem_limit_mb = o->mem_limit_mb;
    to.instance = idx;
    to.http = o->http; /* an HTTP target: one curl handle per worker */
    to.seed = o->seed + (uint64_t)idx;
    char logs[4096];
    fl_status st = od_path(logs, sizeof logs, o->out_dir, "logs", e);
    to.log_dir = logs;
    return st ? st : fl_target_new(o->argv, &to, &w->t, e);
}

fl_status fl_campaign_run(const fl_campaign_opts *o, fl_campaign_result *r, fl_err *e) {
    camp *cp = calloc(1, sizeof *cp);
    worker *ws = o->jobs > 0 && o->jobs <= 256 ? calloc((size_t)o->jobs, sizeof *ws) : NULL;
    if (r) memset(r, 0, sizeof *r);
    if (!cp || !ws) {
        free(cp), free(ws);
        return o->jobs < 1 || o->jobs > 256 ? fl_fail(e, FL_ERR_ARG, "-j %d: 1 to 256", o->jobs)
                                            : fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    cp->o = o;
    pthread_mutex_init(&cp->mu, NULL);
    cp->t0 = fl_now();
    cp->wall0 = (double)time(NULL);
    cp->st.start_time = cp->wall0;
    cp->last_stats = cp->last_status = cp->t0; /* the first report comes after the corpus ran */
    int started = 0, threads = 0;
    fl_status st = camp_resume_opts(cp, o, e);
    if (!st) st = setup(cp, cp->o, e);
    for (; !st && started < o->jobs; started++) st = start_worker(cp, &ws[started], started, e);
    if (!st) st = camp_load_corpus(cp, ws[0].t, ws[0].tr, &ws[0].trace_rng, e);
    int loaded = !st; /* else nothing is written: the folder stays free for a corrected rerun */
    for (int i = 0; !st && i < o->jobs; i++)
        fl_target_set_timeout(ws[i].t, cp->timeout_ms), ws[i].timeout_ms = cp->timeout_ms,
        fl_target_set_startup(ws[i].t, cp->st.startup_ms);
    if (!st) {
        pthread_mutex_lock(&cp->mu);
        camp_periodic(cp, 1);
        pthread_mutex_unlock(&cp->mu);
        for (threads = 1; threads < o->jobs; threads++)
            if (pthread_create(&ws[threads].th, NULL, work, &ws[threads])) break;
        work(&ws[0]);
        for (int i = 1; i < threads; i++) pthread_join(ws[i].th, NULL);
        if (cp->err) st = cp->err, *e = cp->errmsg;
    }
    if (loaded) { /* finish whatever happened: the counters and the report */
        fl_err e2 = {0};
        pthread_mutex_lock(&cp->mu);
        cp->st.done = 1;
        camp_periodic(cp, 1);
        pthread_mutex_unlock(&cp->mu);
        if (o->write_report && fl_report_write(o->out_dir, &e2) && !st) st = e2.status, *e = e2;
    }
    if (cp->plot) fclose(cp->plot);
    if (r) {
        r->stats = cp->st;
        r->stopped = o->stop && *o->stop;
    }
    for (int i = 0; i < o->jobs; i++) {
        fl_target_free(ws[i].t);
        fl_trace_free(ws[i].tr);
    }
    q_free(&cp->q);
    sig_set_free(&cp->sigs);
    camp_edges_free(&cp->edges);
    free(cp->stalls);
    fl_mutator_free(cp->mut);
    fl_autodict_free(cp->autod);
    fl_agcov_free(cp->cov);
    camp_llm_free(cp);
    fl_otlp_src_free(cp->otlp); /* after the targets: no case is collecting */
    fl_spec_free(cp->spec);
    free(cp->spec_abs);
    od_kv_free(&cp->rec);
    free(cp->dict_abs), free(cp->lexicon_abs);
    pthread_mutex_destroy(&cp->mu);
    free(cp);
    free(ws);
    return st;
}
