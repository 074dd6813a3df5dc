/* flare nn quality: the Inception Score of the real set and of every --fake set, and the FID of
 * every fake set against the real one, on the features of --features (quality.h). A table, or
 * one JSON object (--json); -o writes the object to a file too. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"
#include "flare/quality.h"

typedef struct set_score {
    const char *spec;
    int64_t n;
    int splits;
    double is, is_std, fid; /* fid: fake sets only */
    fl_moments mom;
} set_score;

/* Run d through m, score its IS and keep its moments. */
static fl_status score_images(const cli_opts *o, fl_model *m, const fl_dataset *d, set_score *s,
                              fl_quality_feats *f, fl_err *e) {
    fl_status st = fl_quality_features(m, o->set[F_q_layer] ? o->q_layer : NULL, d,
                                       (int)o->q_batch, f, e);
    if (st != FL_OK) return st;
    s->n = f->n;
    if (f->n < 2)
        return fl_fail(e, FL_ERR_ARG, "IS and FID need at least 2 images, the set has %lld",
                       (long long)f->n);
    s->splits = o->q_splits <= f->n ? (int)o->q_splits : 1;
    if (s->splits != o->q_splits)
        cli_note("%s: fewer images than --splits %lld, its IS is taken over the whole set\n",
                 s->spec, (long long)o->q_splits);
    st = !o->q_in_order ? fl_quality_shuffle_rows(f->prob, f->n, f->k, o->q_seed, e) : FL_OK;
    if (st == FL_OK) st = fl_quality_is(f->prob, f->n, f->k, s->splits, &s->is, &s->is_std, e);
    if (st == FL_OK) st = fl_quality_moments(f->x, f->n, f->d, &s->mom, e);
    return st;
}

/* Load spec and score it; an error past loading (whose errors name the file) names the set. */
static fl_status score_set(const cli_opts *o, fl_model *m, const fl_scale *sc, const char *spec,
                           set_score *s, fl_quality_feats *f, fl_err *e) {
    fl_dataset *d = NULL;
    s->spec = spec;
    fl_status st = fl_quality_images_load(spec, sc, o->q_limit, &d, e);
    if (st != FL_OK) return st;
    cli_note("%s: %lld images\n", spec, (long long)d->n);
    st = score_images(o, m, d, s, f, e);
    fl_dataset_free(d);
    if (st != FL_OK) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        fl_fail(e, st, "%s: %s", spec, msg);
    }
    return st;
}

static cJSON *set_json(const set_score *s, int fake) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "spec", s->spec);
    cJSON_AddNumberToObject(j, "n", (double)s->n);
    cJSON_AddNumberToObject(j, "is", s->is);
    cJSON_AddNumberToObject(j, "is_std", s->is_std);
    cJSON_AddNumberToObject(j, "is_splits", s->splits);
    if (fake) cJSON_AddNumberToObject(j, "fid", s->fid);
    return j;
}

static cJSON *result_json(const cli_opts *o, const fl_quality_feats *f, const set_score *s,
                          int n_sets) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "features", o->q_features);
    cJSON_AddStringToObject(j, "layer", f->layer);
    cJSON_AddNumberToObject(j, "dim", f->d);
    cJSON_AddNumberToObject(j, "classes", f->k);
    cJSON_AddBoolToObject(j, "shuffle", !o->q_in_order);
    if (!o->q_in_order) cJSON_AddNumberToObject(j, "seed", (double)o->q_seed);
    cJSON_AddItemToObject(j, "real", set_json(&s[0], 0));
    cJSON *fk = cJSON_AddArrayToObject(j, "fake");
    for (int i = 1; i < n_sets; i++) cJSON_AddItemToArray(fk, set_json(&s[i], 1));
    return j;
}

static void print_table(const cli_opts *o, const fl_quality_feats *f, const set_score *s,
                        int n_sets) {
    printf("features  %s: layer %s (%d values), %d classes\n\n", o->q_features, f->layer, f->d,
           f->k);
    printf("%-4s  %8s  %9s  %7s  %6s  %10s  %s\n", "set", "images", "IS", "IS std", "splits",
           "FID", "spec");
    for (int i = 0; i < n_sets; i++) {
        printf("%-4s  %8lld  %9.4f  %7.4f  %6d  ", i ? "fake" : "real", (long long)s[i].n, s[i].is,
               s[i].is_std, s[i].splits);
        if (i) printf("%10.4f", s[i].fid);
        else printf("%10s", "-");
        printf("  %s\n", s[i].spec);
    }
}

int cmd_nn_quality(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    fl_threads_set((int)o->q_threads);
    if (fl_scale_parse(o->q_scale, &sc, &e) != FL_OK) return cli_usage(o->cmd, "--scale: %s", e.msg);

    int n_sets = 1 + o->q_fake.n, rc = CLI_FAIL;
    set_score *s = calloc((size_t)n_sets, sizeof *s);
    fl_quality_feats first = {0}, f = {0};
    fl_model *m = NULL;
    if (!s) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (o->set[F_q_output] && fl_file_check_writable(o->q_output, &e) != FL_OK) goto out;
    if (fl_onnx_load(o->q_features, &m, &e) != FL_OK) goto out;
    if (o->set[F_q_layer] && /* a misspelt layer: usage error, did you mean */
        (rc = cli_layers_check(o->cmd, "layers", o->q_features, m, o->q_layer)) != CLI_OK)
        goto out;
    rc = CLI_FAIL;
    for (int i = 0; i < n_sets; i++) {
        fl_quality_feats *fi = i ? &f : &first; /* the real set's sizes are the table's */
        if (score_set(o, m, &sc, i ? o->q_fake.v[i - 1] : o->q_real, &s[i], fi, &e) != FL_OK)
            goto out;
        if (!i) continue; /* the real set's moments stay for every FID */
        if (fl_quality_fid(&s[0].mom, &s[i].mom, &s[i].fid, &e) != FL_OK) goto out;
        fl_quality_feats_free(&f);
        fl_moments_free(&s[i].mom);
    }
    rc = CLI_OK;
out:;
    cJSON *j = rc == CLI_OK ? result_json(o, &first, s, n_sets) : NULL;
    char *txt = j ? cJSON_Print(j) : NULL;
    if (rc == CLI_OK && !txt) rc = (fl_fail(&e, FL_ERR_NOMEM, "out of memory"), CLI_FAIL);
    if (rc == CLI_OK && o->set[F_q_output]) {
        if (fl_file_write_atomic(o->q_output, txt, strlen(txt), &e) != FL_OK) rc = CLI_FAIL;
        else cli_note("wrote %s\n", o->q_output);
    }
    if (rc == CLI_OK) {
        if (o->q_json) printf("%s\n", txt);
        else print_table(o, &first, s, n_sets);
    }
    if (rc == CLI_FAIL) cli_fail(&e);
    free(txt);
    cJSON_Delete(j);
    for (int i = 0; s && i < n_sets; i++) fl_moments_free(&s[i].mom);
    free(s);
    fl_quality_feats_free(&first);
    fl_quality_feats_free(&f);
    fl_model_free(m);
    return rc;
}
