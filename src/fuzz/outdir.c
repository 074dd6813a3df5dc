/* The network campaign's output folder (layout in fuzz.h and docs/nn-fuzz.md).
 *
 * Every file but plot_data is written whole through fl_file_write_atomic (tmp + rename), so
 * a reader or a killed campaign never sees half a file; plot_data is append-only, one write
 * per row, and readers skip a truncated last line. Queue files are written as entries are
 * kept; fuzzer_stats about once a second.
 *
 * A resumed campaign reads its queue back from queue/id:*.json (and .npy) and its counters and
 * settings from fuzzer_stats.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz/fuzz_int.h"

fl_status fz_path(char *buf, size_t n, const char *out_dir, const char *rel, fl_err *e) {
    return fl_path_join(buf, n, out_dir, rel, e);
}


fl_status fz_out_check(const char *out_dir, int resume, fl_err *e) {
    char p[4096];
    fl_status st;
    struct stat sb;
    if (stat(out_dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return fl_fail(e, FL_ERR_ARG, "-o %s: exists and is not a folder", out_dir);
    if ((st = fz_path(p, sizeof p, out_dir, "fuzzer_stats", e))) return st;
    int has_stats = access(p, F_OK) == 0;
    if (resume && !has_stats)
        return fl_fail(e, FL_ERR_NOTFOUND, "-i -: %s holds no campaign to resume (no fuzzer_stats)",
                       out_dir);
    if (!resume && (has_stats || fl_dir_has_entries(out_dir)))
        return fl_fail(e, FL_ERR_ARG,
                       "-o %s is not empty%s: resume it with -i -, or choose another -o", out_dir,
                       has_stats ? " (it holds a campaign)" : "");
    return FL_OK;
}

fl_status fz_out_create(const char *out_dir, fl_err *e) {
    static const char *const sub[] = {"queue", "failures"};
    char p[4096];
    fl_status st = fl_mkdirs(out_dir, e);
    for (size_t i = 0; !st && i < sizeof sub / sizeof *sub; i++)
        if (!(st = fz_path(p, sizeof p, out_dir, sub[i], e))) st = fl_mkdirs(p, e);
    return st;
}

/* "queue/id:000012,src:000003,op:rotate" (no extension) */
static void entry_stem(const fz_campaign *cp, const fz_entry *x, const char *last_op, char *buf,
                       size_t n) {
    if (x->src < 0 && x->seed_index < 0) { /* generated (fuzzgan): ops is "gen:c3,n17" */
        snprintf(buf, n, "%s/queue/id:%06lld,%s", cp->o->out_dir, (long long)x->id, x->ops);
        return;
    }
    if (x->src < 0) {
        snprintf(buf, n, "%s/queue/id:%06lld,orig:%lld", cp->o->out_dir, (long long)x->id,
                 (long long)x->seed_index);
        return;
    }
    char kind[32];
    snprintf(kind, sizeof kind, "%s", last_op ? last_op : "none");
    kind[strcspn(kind, ":")] = 0;
    snprintf(buf, n, "%s/queue/id:%06lld,src:%06lld,op:%s", cp->o->out_dir, (long long)x->id,
             (long long)x->src, kind);
}

fl_status fz_out_entry(fz_campaign *cp, int64_t id, const char *last_op, fl_err *e) {
    const fz_entry *x = &cp->q.e[id];
    char path[4096];
    entry_stem(cp, x, last_op, path, sizeof path - 16);
    size_t stem = strlen(path);
    float *f = malloc(sizeof(float) * (size_t)cp->n);
    if (!f) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fz_to_input(cp, x->px, 1, f);
    int64_t shape[4] = {1, cp->c, cp->h, cp->w};
    strcpy(path + stem, ".npy");
    fl_status st = fl_npy_write(path, FL_DT_F32, 4, shape, f, e);
    for (int64_t i = 0; i < cp->n; i++) f[i] = x->px[i];
    strcpy(path + stem, ".png");
    if (!st) st = fl_png_write(path, f, cp->c, cp->h, cp->w, 0, 255, e);
    free(f);
    if (st) return st;
    char aff[64];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", (double)x->id);
    cJSON_AddNumberToObject(j, "src", (double)x->src);
    cJSON_AddNumberToObject(j, "root", (double)x->root);
    cJSON_AddNumberToObject(j, "batch", (double)x->batch);
    cJSON_AddNumberToObject(j, "seed_index", (double)x->seed_index);
    cJSON_AddNumberToObject(j, "label", x->label);
    if (x->affine) cJSON_AddStringToObject(j, "affine", fl_xform_str(&x->affine_t, aff, sizeof aff));
    cJSON_AddStringToObject(j, "ops", x->ops ? x->ops : "");
    cJSON_AddNumberToObject(j, "exec", (double)cp->execs);
    strcpy(path + stem, ".json");
    return fz_json_write(path, j, 0, e);
}

cJSON *fz_json_read(const char *path, fl_err *e) {
    uint8_t *buf;
    size_t len;
    if (fl_file_read(path, &buf, &len, e)) return NULL;
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    if (!j) fl_fail(e, FL_ERR_FORMAT, "%s: not JSON", path);
    return j;
}

fl_status fz_json_write(const char *path, cJSON *j, int pretty, fl_err *e) {
    char *txt = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!txt) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    fl_status st = fl_file_write_atomic(path, txt, strlen(txt), e);
    free(txt);
    return st;
}

/* ---- fuzzer_stats and plot_data ------------------------------------------------------------ */
static double coverage_pct(const fl_fuzz_status *s) {
    return s->total ? 100.0 * (double)s->covered / (double)s->total : 0.0;
}

fl_status fz_out_stats(fz_campaign *cp, int final, fl_err *e) {
    const fl_fuzz_opts *o = cp->o;
    const fl_fuzz_status *s = &cp->st;
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    if (!f) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    time_t now = time(NULL);
    fprintf(f, "start_time        : %lld\n", (long long)(now - (time_t)s->elapsed));
    fprintf(f, "last_update       : %lld\n", (long long)now);
    fprintf(f, "run_time          : %.0f\n", cp->time_before + s->elapsed);
    fprintf(f, "fuzzer_pid        : %d\n", (int)getpid());
    fprintf(f, "session           : %d\n", cp->session);
    fprintf(f, "seed              : %llu\n", (unsigned long long)o->seed);
    fprintf(f, "execs_done        : %lld\n", (long long)s->execs);
    fprintf(f, "execs_per_sec     : %.1f\n", s->execs_per_s);
    fprintf(f, "corpus_count      : %lld\n", (long long)s->corpus);
    fprintf(f, "seeds             : %lld\n", (long long)cp->q.n_seeds);
    fprintf(f, "covered           : %lld\n", (long long)s->covered);
    fprintf(f, "total             : %lld\n", (long long)s->total);
    if (s->total) fprintf(f, "coverage          : %.2f%%\n", coverage_pct(s));
    fprintf(f, "failures          : %lld\n", (long long)s->failures);
    fprintf(f, "failures_total    : %lld\n", (long long)s->failures_total);
    fprintf(f, "misclassification : %lld\n", (long long)cp->fs.by_oracle[FZ_OR_MISCLASS]);
    fprintf(f, "disagreement      : %lld\n", (long long)cp->fs.by_oracle[FZ_OR_DISAGREE]);
    fprintf(f, "nonfinite         : %lld\n", (long long)cp->fs.by_oracle[FZ_OR_NONFINITE]);
    fprintf(f, "last_find         : %lld\n", (long long)s->last_new_s);
    fprintf(f, "strategy          : %s\n", fl_fuzz_strategy_name(o->strategy));
    fprintf(f, "select            : %s\n", fl_fuzz_select_name(cp->q.sel));
    fprintf(f, "preset            : %s\n", o->preset == FL_PRESET_NLC ? "nlc" : "deephunter");
    fprintf(f, "criterion         : %s\n", o->criterion);
    fprintf(f, "layers            : %s\n", o->layers ? o->layers : "all");
    fprintf(f, "alpha             : %g\n", cp->alpha);
    fprintf(f, "beta              : %g\n", cp->beta);
    fprintf(f, "try_num           : %d\n", cp->try_num);
    fprintf(f, "k                 : %d\n", cp->k);
    if (o->model_path) fprintf(f, "model             : %s\n", o->model_path);
    fprintf(f, "model_hash        : %016llx\n", (unsigned long long)cp->model_hash);
    if (o->gen_path) fprintf(f, "gen               : %s\n", o->gen_path);
    if (o->gen) fprintf(f, "gen_hash          : %016llx\n", (unsigned long long)cp->gen_hash);
    if (o->model2_path) fprintf(f, "model2            : %s\n", o->model2_path);
    if (o->seeds_spec) fprintf(f, "seeds_spec        : %s\n", o->seeds_spec);
    char sc[96];
    fprintf(f, "scale             : %s\n", fl_scale_str(&cp->scale, sc, sizeof sc));
    fprintf(f, "state             : %s\n", final ? "stopped" : "running");
    if (o->command_line) fprintf(f, "command_line      : %s\n", o->command_line);
    fclose(f);
    char path[4096];
    fl_status st = fz_path(path, sizeof path, o->out_dir, "fuzzer_stats", e);
    if (!st) st = fl_file_write_atomic(path, b, len, e);
    free(b);
    return st;
}

fl_status fz_out_plot_row(fz_campaign *cp, fl_err *e) {
    if (!cp->plot) {
        char path[4096];
        fl_status st = fz_path(path, sizeof path, cp->o->out_dir, "plot_data", e);
        if (st) return st;
        int fresh = access(path, F_OK) != 0;
        if (!(cp->plot = fopen(path, "a")))
            return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        setvbuf(cp->plot, NULL, _IOLBF, 0);
        if (fresh)
            fprintf(cp->plot, "# relative_time, execs_done, corpus_count, covered, total, coverage, "
                              "failures, failures_total, execs_per_sec\n");
    }
    const fl_fuzz_status *s = &cp->st;
    fprintf(cp->plot, "%.1f, %lld, %lld, %lld, %lld, %.4f, %lld, %lld, %.1f\n",
            cp->time_before + s->elapsed, (long long)s->execs, (long long)s->corpus,
            (long long)s->covered, (long long)s->total, coverage_pct(s), (long long)s->failures,
            (long long)s->failures_total, s->execs_per_s);
    return FL_OK;
}

int fl_fuzz_stats_get(const char *out_dir, const char *key, char *buf, size_t n) {
    char path[4096], line[4096];
    if (n == 0) return 0; /* nowhere to write even the empty string */
    buf[0] = 0;
    if (fz_path(path, sizeof path, out_dir, "fuzzer_stats", NULL)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t kl = strlen(key);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != ':')) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' '; v++) {}
        v[strcspn(v, "\n")] = 0;
        snprintf(buf, n, "%s", v);
        found = 1;
    }
    fclose(f);
    return found;
}

/* ---- resume ------------------------------------------------------------------------------- */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entry files sorted by name (ids are zero-padded: name order is id order). */
static fl_status list_entries(const char *qdir, char ***out, int64_t *n_out, fl_err *e) {
    DIR *d = opendir(qdir);
    if (!d) return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", qdir, strerror(errno));
    char **v = NULL;
    int64_t n = 0, cap = 0;
    struct dirent *de;
    fl_status st = FL_OK;
    while (!st && (de = readdir(d))) {
        size_t k = strlen(de->d_name);
        if (strncmp(de->d_name, "id:", 3) || k < 6 || strcmp(de->d_name + k - 5, ".json") ||
            strstr(de->d_name, ".tmp."))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            char **p = realloc(v, sizeof *v * (size_t)cap);
            if (!p) { st = fl_fail(e, FL_ERR_NOMEM, "out of memory"); break; }
            v = p;
        }
        if (!(v[n] = strdup(de->d_name))) st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
        else n++;
    }
    closedir(d);
    if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return st;
}

/* Queue entry stem.json/.npy into x; *batch = its recorded batch (-1 when not recorded). */
static fl_status read_entry(fz_campaign *cp, const char *stem, fz_entry *x, int64_t *batch,
                            fl_err *e) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s.json", stem) >= (int)sizeof path)
        return fl_fail(e, FL_ERR_ARG, "%s: path too long", stem);
    cJSON *j = fz_json_read(path, e);
    if (!j) return e ? e->status : FL_ERR_FORMAT;
    fl_status st;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"),
                *src = cJSON_GetObjectItemCaseSensitive(j, "src"),
                *root = cJSON_GetObjectItemCaseSensitive(j, "root"),
                *si = cJSON_GetObjectItemCaseSensitive(j, "seed_index"),
                *lab = cJSON_GetObjectItemCaseSensitive(j, "label"),
                *aff = cJSON_GetObjectItemCaseSensitive(j, "affine"),
                *ops = cJSON_GetObjectItemCaseSensitive(j, "ops"),
                *bat = cJSON_GetObjectItemCaseSensitive(j, "batch");
    memset(x, 0, sizeof *x);
    *batch = cJSON_IsNumber(bat) && fl_whole(bat->valuedouble, 0, 0x1p62) ? (int64_t)bat->valuedouble
                                                                          : -1;
    if (!cJSON_IsNumber(id) || !cJSON_IsNumber(src) || !cJSON_IsNumber(root) ||
        !cJSON_IsNumber(si) || !cJSON_IsNumber(lab) || !cJSON_IsString(ops) ||
        id->valuedouble != (double)cp->q.n || !fl_whole(src->valuedouble, -1, cp->q.n - 1) ||
        !fl_whole(root->valuedouble, -1, 0x1p62) /* 2^62: exact as a double */ ||
        (src->valuedouble >= 0 && !fl_whole(root->valuedouble, 0, cp->q.n - 1)) ||
        !fl_whole(si->valuedouble, -1, 0x1p62) ||
        !fl_whole(lab->valuedouble, -1, INT32_MAX)) {
        cJSON_Delete(j);
        return fl_fail(e, FL_ERR_FORMAT, "%s: not queue entry %lld of this campaign", path,
                       (long long)cp->q.n);
    }
    x->src = (int64_t)src->valuedouble;
    x->root = x->src < 0 ? cp->q.n : (int64_t)root->valuedouble;
    x->seed_index = (int64_t)si->valuedouble;
    x->label = (int32_t)lab->valuedouble;
    if (cJSON_IsString(aff)) {
        if ((st = fl_xform_parse(aff->valuestring, &x->affine_t, e))) {
            cJSON_Delete(j);
            return st;
        }
        x->affine = 1;
    }
    x->ops = strdup(ops->valuestring);
    cJSON_Delete(j);
    if (snprintf(path, sizeof path, "%s.npy", stem) >= (int)sizeof path)
        return free(x->ops), fl_fail(e, FL_ERR_ARG, "%s: path too long", stem);
    fl_tensor t = {0};
    if (!x->ops) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if ((st = fl_npy_read_tensor(path, &t, e))) return free(x->ops), st;
    if (t.size != cp->n) {
        fl_tensor_free(&t);
        free(x->ops);
        return fl_fail(e, FL_ERR_SHAPE, "%s: %lld values, the campaign's images have %lld", path,
                       (long long)t.size, (long long)cp->n);
    }
    fl_scale_unapply(&cp->scale, t.data, 1, cp->c, (int64_t)cp->h * cp->w);
    x->px = malloc((size_t)cp->n);
    for (int64_t i = 0; x->px && i < cp->n; i++) {
        float v = roundf(t.data[i] * 255.0f);
        x->px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    fl_tensor_free(&t);
    if (!x->px) return free(x->ops), fl_fail(e, FL_ERR_NOMEM, "out of memory");
    const fz_entry *r = x->src < 0 ? x : &cp->q.e[x->root];
    if (x->affine) {
        if (!(x->i0 = malloc((size_t)cp->n))) {
            free(x->px);
            free(x->ops);
            return fl_fail(e, FL_ERR_NOMEM, "out of memory");
        }
        fl_rng unused;
        fl_rng_seed(&unused, 0);
        fl_xform_apply(&x->affine_t, r->px, x->i0, cp->c, cp->h, cp->w, &unused);
        x->own_i0 = 1;
    } else {
        x->i0 = x->src < 0 ? x->px : r->px;
    }
    return FL_OK;
}

uint64_t fz_weights_hash(const fl_model *m) {
    uint64_t h = FL_FNV_BASIS;
    for (int v = 0; v < m->n_values; v++) {
        const fl_tensor *t = &m->values[v].t;
        if ((m->values[v].kind != FL_VAL_PARAM && m->values[v].kind != FL_VAL_CONST) || !t->data)
            continue;
        h = fl_fnv1a(h, t->shape, sizeof(int64_t) * (size_t)t->ndim);
        h = fl_fnv1a(h, t->data, sizeof(float) * (size_t)t->size);
    }
    return h;
}

/* The weights recorded under key (when recorded: older folders lack it) must be these. */
static fl_status same_weights(const fz_campaign *cp, const char *key, const char *file_key,
                              uint64_t now, const char *given, fl_err *e) {
    char v[64], file[4096];
    if (!fl_fuzz_stats_get(cp->o->out_dir, key, v, sizeof v) ||
        strtoull(v, NULL, 16) == now)
        return FL_OK;
    if (!fl_fuzz_stats_get(cp->o->out_dir, file_key, file, sizeof file)) snprintf(file, sizeof file, "?");
    return fl_fail(e, FL_ERR_ARG,
                   "-i -: %s/fuzzer_stats records %s %s with weights %s; %s has other weights "
                   "(%016llx): resume with the %s the campaign ran against",
                   cp->o->out_dir, file_key, file, v, given ? given : "the one given",
                   (unsigned long long)now, file_key);
}

/* What a resumed campaign must share with the recorded one. */
static fl_status same_campaign(const fz_campaign *cp, fl_err *e) {
    char v[256];
    const fl_fuzz_opts *o = cp->o;
    static const struct { const char *key; int which; } must[] = {{"strategy", 0}, {"criterion", 1}};
    for (size_t i = 0; i < sizeof must / sizeof *must; i++) {
        fl_fuzz_stats_get(o->out_dir, must[i].key, v, sizeof v);
        const char *now = must[i].which ? o->criterion : fl_fuzz_strategy_name(o->strategy);
        if (strcmp(v, now))
            return fl_fail(e, FL_ERR_ARG, "-i -: %s/fuzzer_stats records %s '%s', not '%s'",
                           o->out_dir, must[i].key, v, now);
    }
    fl_status st = same_weights(cp, "model_hash", "model", cp->model_hash, o->model_path, e);
    if (!st && o->gen) st = same_weights(cp, "gen_hash", "gen", cp->gen_hash, o->gen_path, e);
    /* fuzzgan's cases come from the session's stream alone (no seeds to reload): another seed
     * would be another campaign in the same folder */
    if (!st && o->gen && fl_fuzz_stats_get(o->out_dir, "seed", v, sizeof v) &&
        strtoull(v, NULL, 10) != o->seed)
        st = fl_fail(e, FL_ERR_ARG, "-i -: %s/fuzzer_stats records seed %s, not %llu: resume "
                     "with -s %s (or without -s)", o->out_dir, v, (unsigned long long)o->seed, v);
    return st;
}

fl_status fz_out_resume(fz_campaign *cp, fl_err *e) {
    char v[256], qdir[4096];
    const fl_fuzz_opts *o = cp->o;
    const int gan = o->strategy == FL_FUZZ_FUZZGAN; /* generated cases only, no seeds */
    fl_status st = same_campaign(cp, e);
    if (st) return st;
    fl_fuzz_stats_get(o->out_dir, "session", v, sizeof v);
    cp->session = atoi(v) + 1;
    fl_fuzz_stats_get(o->out_dir, "execs_done", v, sizeof v);
    cp->execs = cp->execs_before = atoll(v);
    fl_fuzz_stats_get(o->out_dir, "run_time", v, sizeof v);
    cp->time_before = atof(v);
    fl_fuzz_stats_get(o->out_dir, "failures_total", v, sizeof v);
    cp->fs.total = atoll(v); /* fz_findings_load raises it to the findings it reads */
    fl_fuzz_stats_get(o->out_dir, "seeds", v, sizeof v);
    int64_t n_seeds = atoll(v);
    st = fz_path(qdir, sizeof qdir, o->out_dir, "queue", e);
    char **names = NULL;
    int64_t n = 0, last_batch = -1;
    if (!st) st = list_entries(qdir, &names, &n, e);
    if (!st && (gan ? n_seeds != 0 : n_seeds <= 0 || n < n_seeds))
        st = fl_fail(e, FL_ERR_FORMAT, "%s: %lld entries, fuzzer_stats records %lld seeds", qdir,
                     (long long)n, (long long)n_seeds);
    for (int64_t i = 0; !st && i < n; i++) {
        char stem[4096];
        if (snprintf(stem, sizeof stem, "%s/%.*s", qdir, (int)(strlen(names[i]) - 5), names[i]) >=
            (int)sizeof stem) {
            st = fl_fail(e, FL_ERR_ARG, "%s/%s: path too long", qdir, names[i]);
            break;
        }
        fz_entry x;
        int64_t batch = -1;
        if ((st = read_entry(cp, stem, &x, &batch, e))) break;
        /* the recorded batches again (a folder without them: one entry each) */
        if (batch < 0 || batch != last_batch) fz_queue_seal(&cp->q);
        last_batch = batch;
        if (gan && (x.src >= 0 || x.seed_index >= 0 || x.label < 0 || x.label >= cp->n_classes))
            st = fl_fail(e, FL_ERR_FORMAT, "%s.json: not a generated case of %d classes", stem,
                         cp->n_classes);
        else if (!gan && (i < n_seeds) != (x.src < 0))
            st = fl_fail(e, FL_ERR_FORMAT, "%s.json: seeds must come first", stem);
        if (!st) st = fz_queue_add(&cp->q, &x, e);
        if (st) { /* not queued: still ours */
            free(x.px);
            free(x.ops);
            if (x.own_i0) free(x.i0);
        }
        if (i + 1 == n_seeds) cp->q.n_seeds = n_seeds;
    }
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}
