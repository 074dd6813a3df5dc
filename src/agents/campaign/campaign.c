/* Module agents/campaign — the fuzzing campaign and the commands around it, on top of every
 * other agents module: the loop (this file, campaign_run.c, campaign_seeds.c, campaign_llm.c,
 * campaign_otlp.c), the queue and its power schedules (queue.c), the output folder (outdir.c,
 * paths.c), saved cases (campaign_saved.c), the reports (report.c, report_data.c,
 * report_html.c, report_table.c), replay (replay.c) and minimisation (minimize.c). API:
 * include/flare/agents/campaign.h; docs/agents-campaign.md.
 *
 * The campaign loop: pick (queue.c), mutate (mutate.h), run (target.h), judge (agcov.h,
 * oracle.h), keep or save (outdir.c). docs/agents-campaign.md describes it for users.
 *
 * Threads. Each of the -j workers owns a target process, a trace and two random streams (one
 * for mutation, one for trace ids, so that the trace ids do not shift mutation decisions).
 * Everything shared (queue, coverage map, statistics, output folder) is touched under one
 * mutex, in camp_process; only mutating and running the target happen outside it. Queue
 * entries never move or change, so a worker may mutate one while another adds entries. With
 * one worker everything runs in the calling thread and a campaign is a function of the seed
 * (and of the target's own determinism).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agents/campaign/campaign_int.h"

void fl_campaign_opts_default(fl_campaign_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_ms = 0; /* calibrate */
    o->jobs = 1;
    o->schedule = FL_SCHED_EXPLORE;
    o->stats_every = 2;
    o->status_every = 0.25;
    o->write_report = 1;
    o->llm_temperature = 0.7, o->judge_threshold = 0.8, o->judge_votes = 1;
    o->otlp_grace_ms = 1000;
}

static const char *const sched_names[] = {"explore", "exploit", "none"};

const char *fl_schedule_name(fl_schedule s) {
    return (unsigned)s < 3 ? sched_names[s] : "?";
}

fl_status fl_schedule_parse(const char *s, fl_schedule *out, fl_err *e) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, sched_names[i])) return *out = (fl_schedule)i, FL_OK;
    return fl_fail(e, FL_ERR_ARG, "unknown power schedule '%s' (explore, exploit, none)",
                   s ? s : "");
}

/* ---- signatures ------------------------------------------------------------------------------ */
static uint64_t str_hash(const char *s) { return fl_aghash_final(fl_aghash_str(FL_AGHASH_INIT, s)); }

typedef struct sig_key {
    const sig_set *s;
    const char *key;
} sig_key;

static int same_sig(const void *ctx, int64_t i) {
    const sig_key *k = ctx;
    return !strcmp(k->s->v[i], k->key);
}

int sig_set_add(sig_set *s, const char *kind, const char *sig) {
    char key[256];
    snprintf(key, sizeof key, "%s/%s", kind, sig);
    if (!fl_index_reserve(&s->ix, s->n + 1)) return -1;
    uint64_t h = str_hash(key);
    int64_t at;
    if (fl_index_find(&s->ix, h, same_sig, &(sig_key){s, key}, &at) >= 0) return 0;
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        s->v = v, s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(key))) return -1;
    fl_index_put(&s->ix, at, h, s->n++);
    return 1;
}

int sig_set_has(const sig_set *s, const char *kind, const char *sig) {
    char key[256];
    snprintf(key, sizeof key, "%s/%s", kind, sig);
    int64_t at;
    return s->n > 0 && fl_index_find(&s->ix, str_hash(key), same_sig, &(sig_key){s, key}, &at) >= 0;
}

void sig_set_free(sig_set *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    fl_index_free(&s->ix);
    memset(s, 0, sizeof *s);
}

/* ---- bookkeeping -------------------------------------------------------------------------------- */
double camp_ok_ms(const camp *cp) {
    uint64_t above = 0; /* cases slower than bucket k */
    for (int k = CAMP_OK_BUCKETS - 1; k >= 0; k--) {
        above += cp->ok_hist[k];
        if ((double)above > 0.01 * (double)cp->n_ok) return (double)(1ull << k) / 100;
    }
    return 0;
}

void camp_restart_add(camp *cp, double ms) {
    fl_campaign_stats *s = &cp->st;
    s->case_seconds += ms / 1000, s->hang_seconds += ms / 1000, s->restart_seconds += ms / 1000;
}

void camp_count_unjudged(camp *cp, const fl_target *t, const fl_trace *tr) {
    fl_campaign_stats *s = &cp->st;
    s->execs++;
    s->case_seconds += tr->ms / 1000;
    if (tr->exit == FL_EXIT_HANG) s->hang_seconds += tr->ms / 1000;
    camp_restart_add(cp, fl_target_restart_ms(t));
}

int camp_stopping(camp *cp) {
    const fl_campaign_opts *o = cp->o;
    if (cp->stop || (o->stop && *o->stop)) return cp->stop = 1;
    if (o->max_execs && cp->reserved >= o->max_execs) return cp->stop = 1;
    if (o->max_seconds > 0 && fl_now() - cp->t0 >= o->max_seconds) return cp->stop = 1;
    return 0;
}

void camp_fail(camp *cp, const fl_err *e) {
    if (cp->err) return;
    cp->err = e->status ? e->status : FL_ERR_IO;
    cp->errmsg = *e;
    cp->stop = 1;
}

static void refresh_cov(camp *cp) {
    fl_agcov_report r;
    fl_agcov_report_get(cp->cov, &r);
    fl_campaign_stats *s = &cp->st;
    s->features = r.features;
    s->edges_allowed = r.has_spec ? r.edges_total : 0;
    s->edges_seen = r.has_spec ? r.edges_seen : r.by_kind[FL_AGF_EDGE];
    s->inter_cov = r.inter;
    s->intra_cov = r.intra;
    s->corpus_count = cp->q.n;
    s->auto_dict = fl_autodict_size(cp->autod);
    s->auto_dict_learnt = fl_autodict_added(cp->autod);
    s->corpus_found = cp->q.n - cp->q.n_seeds;
    if (r.has_spec && r.edges_total > 0 && r.edges_seen == r.edges_total && !s->execs_full_edges)
        s->execs_full_edges = s->execs;
}

static void check_goal(camp *cp) {
    const fl_campaign_opts *o = cp->o;
    fl_campaign_stats *s = &cp->st;
    if (s->execs_goal || (!o->goal_kinds && !o->goal_edges)) return;
    for (int k = 0; k < FL_FIND_COUNT_; k++)
        if ((o->goal_kinds >> k & 1) && s->kind_count[k] == 0) return;
    if (o->goal_edges && !s->execs_full_edges) return;
    s->execs_goal = s->execs;
    if (o->stop_at_goal) cp->stop = 1;
}

static fl_status save_finding(camp *cp, const fl_case *c, const fl_trace *t,
                              const fl_finding *f, const camp_origin *org, fl_err *e) {
    const char *kind = fl_finding_kind_name(f->kind);
    char rel[512], path[4096], fname[160];
    od_file_name(f->signature, fname, sizeof fname);
    if (f->kind == FL_FIND_HANG) snprintf(rel, sizeof rel, "hangs/%s.json", fname);
    else snprintf(rel, sizeof rel, "failures/%s/%s.json", kind, fname);
    fl_status st = od_path(path, sizeof path, cp->o->out_dir, rel, e);
    if (st) return st;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    if ((st = fl_mkdirs(dir, e))) return st;
    cJSON *found = cJSON_CreateObject();
    if (!found) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", rel);
    cJSON_AddNumberToObject(found, "exec", (double)cp->st.execs);
    cJSON_AddNumberToObject(found, "time", (double)(int64_t)(cp->st.run_time * 1000) / 1000);
    if (org->parent) cJSON_AddNumberToObject(found, "src", org->parent->id);
    if (org->op) cJSON_AddStringToObject(found, "op", org->op);
    if (org->name) cJSON_AddStringToObject(found, "queue_entry", org->name);
    char *txt = saved_case_json(c, t, f, cp->spec_abs, cp->target_desc, found);
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", rel);
    st = fl_file_write_atomic(path, txt, strlen(txt), e);
    free(txt);
    return st;
}

void camp_periodic(camp *cp, int force) {
    double now = fl_now();
    fl_campaign_stats *s = &cp->st;
    double session = now - cp->t0;
    s->run_time = cp->run_time0 + session;
    s->execs_per_sec = session > 0 ? (double)(s->execs - cp->execs0) / session : 0;
    if (force || now - cp->last_stats >= cp->o->stats_every) {
        fl_err e = {0};
        refresh_cov(cp);
        camp_llm_stats(cp);
        camp_otlp_stats(cp);
        if (od_write_stats(cp->o->out_dir, s, &cp->meta, &e) ||
            camp_edges_write(&cp->edges, cp->o->out_dir, &e))
            camp_fail(cp, &e);
        od_plot_row(cp->plot, s);
        cp->last_stats = now;
    }
    if (cp->o->on_status && (force || now - cp->last_status >= cp->o->status_every)) {
        refresh_cov(cp);
        cp->o->on_status(s, cp->o->user);
        cp->last_status = now;
    }
}

void camp_process(camp *cp, fl_case *c, const fl_trace *t, const camp_origin *org) {
    fl_campaign_stats *s = &cp->st;
    fl_err e = {0};
    s->execs++;
    if (t->exit == FL_EXIT_CRASH) s->crashes++;
    if (t->exit == FL_EXIT_HANG) s->hangs++, s->hang_seconds += t->ms / 1000;
    camp_stall_learn(cp, t); /* a timeout: its stall point is a known hang's (campaign_stall.c) */
    s->case_seconds += t->ms / 1000;
    if (t->exit == FL_EXIT_DONE) {
        int k = 0;
        while (k < CAMP_OK_BUCKETS - 1 && t->ms * 100 >= (double)(1ull << k)) k++;
        cp->ok_hist[k]++, cp->n_ok++;
    }
    uint64_t path = q_path_hash(t);
    q_hit(&cp->q, path);
    if (org->parent) q_child(&cp->q, org->parent, t->exit == FL_EXIT_CRASH || t->exit == FL_EXIT_HANG,
                                     t->exit == FL_EXIT_HANG ? Q_HANG_COST : 1);

    int n_new = 0, r = fl_agcov_commit(cp->cov, t, &n_new);
    if (r < 0 || camp_edges_count(&cp->edges, t, cp->spec) < 0) {
        fl_fail(&e, FL_ERR_NOMEM, "coverage: out of memory");
        camp_fail(cp, &e);
    }
    /* findings first: the case is saved with its own id before the queue may take it */
    fl_findings f = {0};
    int n_found = 0;
    if (fl_oracle_check(cp->spec, c, t, &cp->oo, &f, &e)) camp_fail(cp, &e);
    camp_llm_judge(cp, c, t, r, &f); /* when no rule fired (campaign_llm.c) */
    for (int i = 0; i < f.n; i++) {
        const char *kind = fl_finding_kind_name(f.v[i].kind);
        int fresh = sig_set_add(&cp->sigs, kind, f.v[i].signature);
        if (fresh < 0) {
            fl_fail(&e, FL_ERR_NOMEM, "out of memory");
            camp_fail(cp, &e);
        }
        if (fresh <= 0) continue;
        n_found++;
        if (save_finding(cp, c, t, &f.v[i], org, &e)) camp_fail(cp, &e);
        s->findings++;
        if (!s->kind_count[f.v[i].kind]++) s->kind_first_exec[f.v[i].kind] = s->execs;
        s->last_find_time = cp->wall0 + (fl_now() - cp->t0);
        s->execs_last_find = s->execs;
        snprintf(s->last_find, sizeof s->last_find, "%s: %.140s", kind, f.v[i].message);
        if (org->parent) org->parent->finds++;
    }
    fl_findings_free(&f);

    /* A child that timed out is not kept, whatever coverage it added (AFL adds only inputs
     * that ran normally to its queue; a timeout goes to hangs/): most of its mutants stop at
     * the same point and cost a timeout each, and the explore schedule would favour it, its
     * path being rare. What it reached stays in the coverage map; its hang is saved. */
    int keep = org->name || (r > 0 && cp->o->schedule != FL_SCHED_NONE && t->exit != FL_EXIT_HANG);
    if (org->op && !strcmp(org->op, "llm")) /* what the generator's cases are worth */
        s->llm_gen_cases++, s->llm_gen_kept += keep, s->llm_gen_finds += n_found > 0;
    if (keep) {
        int src = org->parent ? org->parent->id : org->name ? org->src : -1;
        fl_agfeature *fv = NULL;
        int nf = fl_agcov_features(cp->cov, t, &fv);
        uint32_t *idx = nf > 0 ? malloc((size_t)nf * sizeof *idx) : NULL;
        for (int i = 0; idx && i < nf; i++) idx[i] = fv[i].index;
        uint64_t sig = q_cov_sig(fv, nf > 0 ? nf : 0, t->exit);
        free(fv);
        q_entry *x = nf < 0 || (nf > 0 && !idx)
                         ? NULL
                         : q_add(&cp->q, c, src, n_new, r == 2, path, idx, nf > 0 ? nf : 0);
        free(idx);
        if (!x) {
            fl_fail(&e, FL_ERR_NOMEM, "queue: out of memory");
            camp_fail(cp, &e);
            fl_case_free(c);
        } else {
            x->cov_sig = sig;
            /* the system's own words, from a case that added coverage (issue 15 §2) */
            if (cp->autod && fl_autodict_learn(cp->autod, cp->mut, t, c) < 0)
                fl_fail(&e, FL_ERR_NOMEM, "out of memory"), camp_fail(cp, &e);
            /* kept children are trimmed when first picked; seeds are the user's, resumed
             * entries were kept in an earlier session, a hang or crash costs too much */
            x->trim = org->name || t->exit != FL_EXIT_DONE || cp->o->trim_execs < 0;
            if (org->name) snprintf(x->name, sizeof x->name, "%s", org->name);
            else if (org->other)
                snprintf(x->name, sizeof x->name, "id:%06d,src:%06d+%06d,op:%s%s", x->id, src,
                         org->other->id, org->op, r == 2 ? ",+cov" : "");
            else
                snprintf(x->name, sizeof x->name, "id:%06d,src:%06d,op:%s%s", x->id, src,
                         org->op ? org->op : "?", r == 2 ? ",+cov" : "");
            if (!org->name) {
                if (org->parent) org->parent->kept++;
                s->last_cov_time = cp->wall0 + (fl_now() - cp->t0);
            }
            if (!org->name || org->write) {
                char rel[300];
                snprintf(rel, sizeof rel, "queue/%s", x->name);
                snprintf(c->id, sizeof c->id, "%06d", x->id);
                if (od_write_case(cp->o->out_dir, rel, c, &e)) camp_fail(cp, &e);
            }
        }
    } else {
        fl_case_free(c);
    }
    if (r > 0 || n_found) refresh_cov(cp);
    check_goal(cp);
    camp_periodic(cp, 0);
}
