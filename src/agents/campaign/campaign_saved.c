/* Saved cases: the failure files the campaign writes, read back by replay, min and the
 * report. A plain request ({"turns":[...]}) or a text file is a saved case too, without a
 * finding, so `flare agents min` and `replay` also take hand-written cases. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/campaign/campaign_int.h"
#include "flare/agents/oracle.h"
#include "flare/agents/protocol.h"

static char *str_member(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

/* A failure file's "trace" ({"exit":..., "exit_status":..., "events":[...]}, as
 * fl_trace_report_json writes it) back into a trace; none (or not an object): *out NULL. */
static fl_status trace_member(const cJSON *tj, fl_trace **out, const char *path, fl_err *e) {
    *out = NULL;
    if (!cJSON_IsObject(tj)) return FL_OK;
    fl_trace *t = fl_trace_new();
    if (!t) return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    const cJSON *ev, *evs = cJSON_GetObjectItemCaseSensitive(tj, "events");
    int done = 0;
    cJSON_ArrayForEach(ev, evs) {
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(ev, "t_ms");
        char *line = cJSON_PrintUnformatted(ev);
        fl_status st = line ? fl_trace_feed_line(t, line, strlen(line), cJSON_IsNumber(tm) ? tm->valuedouble : 0, &done)
                            : FL_ERR_NOMEM;
        free(line);
        if (st) {
            fl_trace_free(t);
            return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(tj, "exit"), *s = cJSON_GetObjectItemCaseSensitive(tj, "exit_status"),
                *ms = cJSON_GetObjectItemCaseSensitive(tj, "ms");
    for (int k = FL_EXIT_DONE; cJSON_IsString(x) && k <= FL_EXIT_LIMIT; k++)
        if (!strcmp(x->valuestring, fl_exit_kind_name((fl_exit_kind)k))) t->exit = (fl_exit_kind)k;
    t->exit_status = cJSON_IsNumber(s) ? s->valueint : 0;
    t->ms = cJSON_IsNumber(ms) ? ms->valuedouble : 0;
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(tj, "stderr");
    if (cJSON_IsString(er) && fl_trace_stderr_add(t, er->valuestring, strlen(er->valuestring))) {
        fl_trace_free(t);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = t;
    return FL_OK;
}

fl_status saved_case_load(const char *path, saved_case *out, fl_err *e) {
    memset(out, 0, sizeof *out);
    out->found_time = out->found_exec = -1;
    out->event = -1;
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st) return st;
    st = fl_case_parse((const char *)buf, len, path, &out->c, e);
    if (st == FL_OK) {
        cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
        if (cJSON_IsObject(j)) {
            out->kind = str_member(j, "kind");
            out->signature = str_member(j, "signature");
            out->mast = str_member(j, "mast");
            out->message = str_member(j, "message");
            out->spec = str_member(j, "spec");
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "found");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "time"),
                        *x = cJSON_GetObjectItemCaseSensitive(f, "exec");
            out->found_time = cJSON_IsNumber(t) ? t->valuedouble : -1;
            out->found_exec = cJSON_IsNumber(x) ? x->valuedouble : -1;
            const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
            out->event = cJSON_IsNumber(ev) && ev->valuedouble >= 0 && ev->valuedouble < 1e9 ? (int)ev->valuedouble : -1;
            st = trace_member(cJSON_GetObjectItemCaseSensitive(j, "trace"), &out->trace, path, e);
        }
        cJSON_Delete(j);
        if (!(out->path = strdup(path))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    free(buf);
    if (st) saved_case_free(out);
    return st;
}

void saved_case_free(saved_case *s) {
    fl_case_free(s->c);
    fl_trace_free(s->trace);
    free(s->path);
    free(s->kind);
    free(s->signature);
    free(s->mast);
    free(s->message);
    free(s->spec);
    memset(s, 0, sizeof *s);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Saved cases are *.json files (not min's *.min.json); out/queue holds the corpus, not
 * failures, and out/logs the target's stderr: both skipped when replaying a whole out/. */
static int saved_name(const char *name, int is_dir) {
    if (is_dir) return strcmp(name, "queue") && strcmp(name, "logs");
    return ends_with(name, ".json") && !ends_with(name, ".min.json");
}

fl_status saved_case_list(const char *path, char ***paths, int *n, fl_err *e) {
    *paths = NULL;
    *n = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) return fl_fail(e, FL_ERR_NOTFOUND, "%s: %s", path, strerror(errno));
    camp_paths l = {0};
    fl_status st = FL_OK;
    if (S_ISDIR(sb.st_mode)) /* at most 16 levels down: symlink loops */
        st = camp_paths_list(path, &l, 16, saved_name, e);
    else if (camp_paths_add(&l, path) < 0) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (st) {
        saved_case_list_free(l.v, l.n);
        return st;
    }
    *paths = l.v;
    *n = l.n;
    return FL_OK;
}

/* Why a file under a replayed folder was not taken (saved_case_select). */
static int skip_reason(const char *rel, int in_queue) {
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    if (!strncmp(rel, "logs/", 5) || strstr(rel, "/logs/")) return SAVED_SKIP_LOG;
    if (ends_with(base, ".min.json")) return SAVED_SKIP_MIN;
    if (!strcmp(rel, "edges.json")) return SAVED_SKIP_OTHER; /* a campaign's own file (edge_hits.c) */
    if (in_queue) return strncmp(base, "id:", 3) ? SAVED_SKIP_OTHER : -1;
    if (!strncmp(rel, "queue/", 6) || strstr(rel, "/queue/")) return SAVED_SKIP_QUEUE;
    return ends_with(base, ".json") ? -1 : SAVED_SKIP_OTHER;
}

fl_status saved_case_select(const char *path, char ***paths, int *n, int skipped[SAVED_SKIP_COUNT_], fl_err *e) {
    *paths = NULL;
    *n = 0;
    memset(skipped, 0, SAVED_SKIP_COUNT_ * sizeof *skipped);
    struct stat sb;
    if (stat(path, &sb) != 0) return fl_fail(e, FL_ERR_NOTFOUND, "%s: %s", path, strerror(errno));
    camp_paths all = {0}, l = {0};
    fl_status st = FL_OK;
    if (!S_ISDIR(sb.st_mode)) { /* a file named on its own is always a case */
        if (camp_paths_add(&l, path) < 0) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    } else if (!(st = camp_paths_list(path, &all, 16, NULL, e))) {
        /* a queue folder given itself: every id:... entry (named id:NNNNNN,..., no extension) */
        size_t pl = strlen(path);
        while (pl > 1 && path[pl - 1] == '/') pl--;
        int in_queue = pl >= 5 && !strncmp(path + pl - 5, "queue", 5) && (pl == 5 || path[pl - 6] == '/');
        for (int i = 0; !st && i < all.n; i++) {
            const char *rel = all.v[i] + pl + (all.v[i][pl] == '/');
            int why = skip_reason(rel, in_queue);
            if (why >= 0) skipped[why]++;
            else if (camp_paths_add(&l, all.v[i]) < 0) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
    }
    camp_paths_free(&all);
    if (st) {
        saved_case_list_free(l.v, l.n);
        return st;
    }
    *paths = l.v;
    *n = l.n;
    return FL_OK;
}

const char *saved_skip_name(int why) {
    static const char *const names[SAVED_SKIP_COUNT_] = {
        "shrunk copies (*.min.json)", "the corpus (queue/: replay it by name)", "target logs (logs/)",
        "not a case file (neither *.json nor a queue entry id:...)",
        "named twice (by two of the paths given)"};
    return why >= 0 && why < SAVED_SKIP_COUNT_ ? names[why] : "?";
}

void saved_case_list_free(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

char *saved_case_json(const fl_case *c, const fl_trace *t, const fl_finding *f,
                      const char *spec, const char *target, cJSON *found) {
    char *req = fl_case_to_file_json(c), *res = t ? fl_trace_report_json(NULL, t) : NULL, *txt = NULL;
    cJSON *j = req ? cJSON_Parse(req) : NULL;
    if (!j || (t && !res)) goto out;
    if (f) {
        cJSON_AddStringToObject(j, "kind", fl_finding_kind_name(f->kind));
        if (f->mast) cJSON_AddStringToObject(j, "mast", f->mast);
        else cJSON_AddNullToObject(j, "mast");
        cJSON_AddStringToObject(j, "signature", f->signature);
        cJSON_AddStringToObject(j, "key", f->key);
        if (f->event >= 0) cJSON_AddNumberToObject(j, "event", f->event);
        char *msg = fl_utf8_dup(f->message, strlen(f->message));
        if (msg) cJSON_AddStringToObject(j, "message", msg);
        free(msg);
    }
    if (f && f->stderr_group[0]) {
        cJSON *g = cJSON_AddObjectToObject(j, "stderr_group");
        char *k = fl_utf8_dup(f->stderr_key, strlen(f->stderr_key));
        if (g) cJSON_AddStringToObject(g, "signature", f->stderr_group);
        if (g && k) cJSON_AddStringToObject(g, "key", k);
        free(k);
    }
    if (found) cJSON_AddItemToObject(j, "found", found), found = NULL;
    if (spec) cJSON_AddStringToObject(j, "spec", spec);
    cJSON_AddStringToObject(j, "flare_version", FLARE_VERSION);
    /* how to reproduce it: this file (with its "seed") run again by the same target */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "flare agents run THIS_FILE%s%s %s%s", spec ? " --spec " : "", spec ? spec : "",
             target && !strncmp(target, "http", 4) ? "--target " : "-- ", target ? target : "CMD");
    char *cu = fl_utf8_dup(cmd, strlen(cmd));
    if (cu) cJSON_AddStringToObject(j, "reproduce", cu);
    free(cu);
    if (target) {
        char *tg = fl_utf8_dup(target, strlen(target));
        if (tg) cJSON_AddStringToObject(j, "target", tg);
        free(tg);
    }
    if (res) {
        cJSON *tr = cJSON_Parse(res);
        if (!tr) goto out;
        cJSON_AddItemToObject(j, "trace", tr);
    }
    txt = cJSON_Print(j);
out:
    cJSON_Delete(found);
    cJSON_Delete(j);
    free(req);
    free(res);
    return txt;
}

void saved_argv_line(char *const *argv, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; argv && argv[i] && k + 1 < n; i++) {
        int w = snprintf(buf + k, n - k, "%s%s", i ? " " : "", argv[i]);
        if (w < 0) break;
        k += (size_t)w;
    }
}
