/* flare nn cover: coverage of a data set under a list of criteria (fl_coverset_run), as
 * tables (one summary line per criterion, then each criterion per layer) or one JSON object. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/cover.h"
#include "flare/onnx.h"

static void on_progress(void *user, int64_t done, int64_t total) {
    (void)total;
    progress_update(user, done, NULL);
}

/* "12.34%" or "-" for an unbounded criterion. */
static const char *pct(int64_t covered, int64_t total, char *buf, size_t n) {
    if (total <= 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.2f%%", 100.0 * (double)covered / (double)total);
    return buf;
}

static void print_tables(const cli_opts *o, const fl_dataset *d, const fl_layerset *ls,
                         const char *layers, const fl_profile *p, const fl_coverset *s) {
    char b[32];
    printf("model     %s\ndata      %s (%lld inputs)\nlayers    %s (%d layers, %lld neurons)\n",
           o->cov_model, o->cov_data, (long long)d->n, layers ? layers : "those of the profile",
           ls->n, (long long)ls->total);
    if (p) printf("profile   %s (%lld inputs)\n", o->cov_profile, (long long)p->count);
    int w = 9, lw = 5;
    for (int i = 0; i < s->n; i++)
        if ((int)strlen(s->c[i]->spec) > w) w = (int)strlen(s->c[i]->spec);
    for (int l = 0; l < ls->n; l++)
        if ((int)strlen(ls->name[l]) > lw) lw = (int)strlen(ls->name[l]);
    printf("\n%-*s  %10s  %10s  %8s\n", w, "criterion", "covered", "total", "coverage");
    for (int i = 0; i < s->n; i++) {
        int64_t c, t;
        fl_cover_stats(s->c[i], &c, &t);
        char tb[24];
        snprintf(tb, sizeof tb, "%lld", (long long)t);
        printf("%-*s  %10lld  %10s  %8s\n", w, s->c[i]->spec, (long long)c, t > 0 ? tb : "-",
               pct(c, t, b, sizeof b));
    }
    for (int i = 0; i < s->n; i++) /* what lsc / dsc chose: the layer and the bounds */
        if (s->c[i]->detail) printf("%s: %s\n", s->c[i]->spec, s->c[i]->detail);
    for (int i = 0; i < s->n; i++) {
        const fl_cover *c = s->c[i];
        if (c->n_groups < 2) continue;
        printf("\n%s per layer\n  %-*s  %10s  %10s  %8s\n", c->spec, lw, "layer", "covered",
               "total", "coverage");
        for (int g = 0; g < c->n_groups; g++) {
            int64_t cv, t;
            fl_cover_group_stats(c, g, &cv, &t);
            printf("  %-*s  %10lld  %10lld  %8s\n", lw, c->group_name[g], (long long)cv,
                   (long long)t, pct(cv, t, b, sizeof b));
        }
    }
}

static cJSON *stats_json(cJSON *o, int64_t covered, int64_t total) {
    cJSON_AddNumberToObject(o, "covered", (double)covered);
    if (total > 0) {
        cJSON_AddNumberToObject(o, "total", (double)total);
        cJSON_AddNumberToObject(o, "coverage", (double)covered / (double)total);
    } else {
        cJSON_AddNullToObject(o, "total");
        cJSON_AddNullToObject(o, "coverage");
    }
    return o;
}

static void print_json(const cli_opts *o, const fl_dataset *d, const fl_layerset *ls,
                       const char *layers, const fl_profile *p, const fl_coverset *s) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->cov_model);
    cJSON_AddStringToObject(j, "data", o->cov_data);
    cJSON_AddNumberToObject(j, "n", (double)d->n);
    if (p) cJSON_AddStringToObject(j, "profile", o->cov_profile);
    else cJSON_AddNullToObject(j, "profile");
    cJSON_AddStringToObject(j, "layer_set", layers);
    cJSON *jl = cJSON_AddArrayToObject(j, "layers");
    for (int l = 0; l < ls->n; l++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", ls->name[l]);
        cJSON_AddNumberToObject(x, "neurons", (double)ls->width[l]);
        cJSON_AddItemToArray(jl, x);
    }
    cJSON *jc = cJSON_AddArrayToObject(j, "criteria");
    for (int i = 0; i < s->n; i++) {
        const fl_cover *c = s->c[i];
        int64_t cv, t;
        fl_cover_stats(c, &cv, &t);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "criterion", c->spec);
        if (c->detail) cJSON_AddStringToObject(x, "detail", c->detail);
        stats_json(x, cv, t);
        cJSON *per = cJSON_AddArrayToObject(x, "groups");
        for (int g = 0; g < c->n_groups; g++) {
            fl_cover_group_stats(c, g, &cv, &t);
            cJSON *y = cJSON_CreateObject();
            cJSON_AddStringToObject(y, "name", c->group_name[g]);
            cJSON_AddItemToArray(per, stats_json(y, cv, t));
        }
        cJSON_AddItemToArray(jc, x);
    }
    char *txt = cJSON_Print(j);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(j);
}

int cmd_nn_cover(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    if (o->given[F_cov_scale] && fl_scale_parse(o->cov_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    fl_threads_set((int)o->cov_threads);
    fl_model *m = NULL;
    fl_dataset *d = NULL, *train = NULL;
    fl_layerset *ls = NULL;
    fl_profile *p = NULL;
    fl_coverset *s = NULL;
    char *from_profile = NULL;
    const char *layers = o->set[F_cov_layers] ? o->cov_layers : "all";
    int rc = CLI_FAIL;
    if (o->set[F_cov_profile] && fl_profile_load(o->cov_profile, &p, &e) != FL_OK) goto out;
    if (p && !o->set[F_cov_layers]) {
        if (!(layers = from_profile = fl_profile_layers(p))) {
            fl_fail(&e, FL_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (fl_onnx_load(o->cov_model, &m, &e) != FL_OK) goto out;
    if (o->set[F_cov_layers] &&
        (rc = cli_layers_check(o->cmd, "layers", o->cov_model, m, layers)) != CLI_OK)
        goto out;
    rc = CLI_FAIL;
    if (fl_layerset_make(m, layers, &ls, &e) != FL_OK) {
        if (e.status == FL_ERR_NOTFOUND && !from_profile) {
            rc = cli_usage(o->cmd, "--layers %s: %s", layers, e.msg);
            e.status = FL_OK;
        } else if (from_profile) {
            char msg[sizeof e.msg];
            memcpy(msg, e.msg, sizeof msg);
            fl_fail(&e, e.status, "%s was made for another model: %s", o->cov_profile, msg);
        }
        goto out;
    }
    if (p && fl_profile_match(p, ls, &e) != FL_OK) {
        char msg[sizeof e.msg];
        memcpy(msg, e.msg, sizeof msg);
        fl_fail(&e, e.status, "%s: %s", o->cov_profile, msg);
        goto out;
    }
    if (o->set[F_cov_train] &&
        fl_dataset_load(o->cov_train, o->given[F_cov_scale] ? &sc : NULL, 0, &train, &e) != FL_OK)
        goto out;
    fl_cover_ctx ctx = {.m = m, .ls = ls, .profile = p, .train = train,
                        .aux = o->set[F_cov_important] ? o->cov_important : NULL};
    if (fl_coverset_new(&ctx, o->criteria, &s, &e) != FL_OK) {
        if (e.status == FL_ERR_ARG) {
            rc = cli_usage(o->cmd, "--criteria: %s", e.msg);
            e.status = FL_OK;
        }
        goto out;
    }
    if (fl_dataset_load(o->cov_data, o->given[F_cov_scale] ? &sc : NULL, o->cov_limit, &d, &e) !=
        FL_OK)
        goto out;
    cli_progress bar;
    progress_start(&bar, stderr, "cover", d->n, "img", cli_quiet);
    double t0 = fl_now();
    fl_status st = fl_coverset_run(s, m, d, (int)o->cov_batch, on_progress, &bar, &e);
    progress_clear(&bar);
    if (st != FL_OK) goto out;
    cli_note("%lld inputs measured in %.2f s\n", (long long)d->n, fl_now() - t0);
    /* the spec as given; a profile's long name list is summarised */
    const char *shown = from_profile ? NULL : layers;
    if (o->cov_json) print_json(o, d, ls, shown ? shown : layers, p, s);
    else print_tables(o, d, ls, shown, p, s);
    rc = CLI_OK;
out:
    if (rc == CLI_FAIL && e.status != FL_OK) cli_fail(&e);
    free(from_profile);
    fl_coverset_free(s);
    fl_profile_free(p);
    fl_layerset_free(ls);
    fl_dataset_free(d);
    fl_dataset_free(train);
    fl_model_free(m);
    return rc;
}
