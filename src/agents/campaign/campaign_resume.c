/* Resume is resume (`-i -`): the settings a campaign recorded in fuzzer_stats (spec, schedule,
 * seed, dictionary, lexicon, max_len; the timeout is taken in campaign_seeds.c, max_len in
 * campaign_run.c) are the resumed
 * session's, unless an option says otherwise, and an option that differs from the record is a
 * warning naming both values. `--spec none` turns the spec off, resuming or not. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/campaign/campaign_int.h"

/* The path as recorded (absolute when it can be resolved), for comparing. */
static char *abs_path(const char *p) {
    char *r = realpath(p, NULL);
    return r ? r : strdup(p);
}

/* A path option: unset takes the record (which must still exist); "none" (spec only) is off;
 * a given one that differs from the record is warned about. */
static fl_status path_opt(camp *cp, const char *key, const char *flag, const char **opt,
                          fl_err *e) {
    const char *rec = od_kv_get(&cp->rec, key);
    if (rec && !*rec) rec = NULL;
    if (*opt && !strcmp(*opt, "none")) {
        if (rec) fl_log(1, "resume: %s none turns off the recorded %s\n", flag, rec);
        *opt = NULL;
        return FL_OK;
    }
    if (!*opt) {
        if (rec && access(rec, R_OK))
            return fl_fail(e, FL_ERR_NOTFOUND, "-i -: the recorded %s %s (%s/fuzzer_stats) is "
                           "gone; give %s FILE, or %s none", flag, rec, cp->o->out_dir, flag,
                           flag);
        *opt = rec;
        return FL_OK;
    }
    char *given = abs_path(*opt);
    if (rec && given && strcmp(given, rec))
        fl_log(1, "warning: resume: %s %s differs from the recorded %s\n", flag, given, rec);
    else if (!rec)
        fl_log(1, "warning: resume: %s %s; the campaign ran without one\n", flag, *opt);
    free(given);
    return FL_OK;
}

fl_status camp_resume_opts(camp *cp, const fl_campaign_opts *o, fl_err *e) {
    cp->eff = *o;
    cp->o = &cp->eff;
    fl_campaign_opts *x = &cp->eff;
    int resuming = o->in_dir && !strcmp(o->in_dir, "-");
    if (!resuming) {
        if (x->spec_path && !strcmp(x->spec_path, "none")) x->spec_path = NULL;
        return FL_OK;
    }
    char p[4096];
    fl_status st = od_path(p, sizeof p, o->out_dir, "fuzzer_stats", e);
    if (st) return st;
    if (od_kv_read(p, &cp->rec, NULL)) { /* no record (a campaign killed at once): the options */
        memset(&cp->rec, 0, sizeof cp->rec);
        if (x->spec_path && !strcmp(x->spec_path, "none")) x->spec_path = NULL;
        return FL_OK;
    }
    const char *v = od_kv_get(&cp->rec, "execs_done");
    cp->salt = v ? strtoull(v, NULL, 10) : 0;
    if ((st = path_opt(cp, "spec", "--spec", &x->spec_path, e)) ||
        (st = path_opt(cp, "dict", "-x", &x->dict_path, e)) ||
        (st = path_opt(cp, "lexicon", "--lexicon", &x->lexicon_path, e)))
        return st;
    if ((v = od_kv_get(&cp->rec, "schedule")) && *v) {
        fl_schedule s;
        if (fl_schedule_parse(v, &s, NULL)) {
            fl_log(1, "warning: resume: %s records schedule '%s'; using %s\n", p, v,
                   fl_schedule_name(x->schedule));
        } else if (!(o->given & FL_CAMP_GIVEN_SCHEDULE)) {
            x->schedule = s;
        } else if (s != x->schedule) {
            fl_log(1, "warning: resume: --schedule %s differs from the recorded %s\n",
                   fl_schedule_name(x->schedule), v);
        }
    }
    if ((v = od_kv_get(&cp->rec, "seed")) && *v) {
        uint64_t s = strtoull(v, NULL, 10);
        if (!(o->given & FL_CAMP_GIVEN_SEED)) x->seed = s;
        else if (s != x->seed)
            fl_log(1, "warning: resume: -s %llu differs from the recorded %llu\n",
                   (unsigned long long)x->seed, (unsigned long long)s);
    }
    if ((v = od_kv_get(&cp->rec, "timeout_ms")) && x->timeout_ms > 0 && atoi(v) > 0 &&
        atoi(v) != x->timeout_ms)
        fl_log(1, "warning: resume: -T %d differs from the recorded %s\n", x->timeout_ms, v);
    if ((v = od_kv_get(&cp->rec, "max_len")) && x->max_len > 0 && atol(v) > 0 &&
        (size_t)atol(v) != x->max_len)
        fl_log(1, "warning: resume: --max-len %zu differs from the recorded %s\n", x->max_len, v);
    fl_log(1, "resume: seed %llu, schedule %s, spec %s, timeout %s\n",
           (unsigned long long)x->seed, fl_schedule_name(x->schedule),
           x->spec_path ? x->spec_path : "none",
           x->timeout_ms > 0 ? "-T" : "recorded");
    return FL_OK;
}
