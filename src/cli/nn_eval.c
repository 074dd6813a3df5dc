/* flare nn eval: accuracy, per-class accuracy and the confusion matrix (fl_eval), as
 * tables or as one JSON object. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"
#include "flare/train.h"

static const char *class_name(const fl_dataset *d, int k) {
    return k < d->n_classes && d->class_names && d->class_names[k] ? d->class_names[k] : "";
}

static int digits(int64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static void print_tables(const cli_opts *o, const fl_dataset *d, const fl_eval_result *r) {
    int K = r->n_classes, namew = 5;
    for (int k = 0; k < K; k++) {
        int l = (int)strlen(class_name(d, k));
        if (l > namew) namew = l;
    }
    printf("model     %s\ndata      %s (%lld images)\n", o->model, o->eval_data, (long long)r->n);
    printf("accuracy  %.4f  (%lld / %lld correct)\nloss      %.4f\n\n", r->accuracy,
           (long long)r->correct, (long long)r->n, r->loss);

    printf("%3s  %-*s  %7s  %8s\n", "#", namew, "class", "images", "accuracy");
    for (int k = 0; k < K; k++) /* a class without images has no accuracy, not 0 */
        if (r->class_n[k])
            printf("%3d  %-*s  %7lld  %8.4f\n", k, namew, class_name(d, k),
                   (long long)r->class_n[k], r->class_acc[k]);
        else
            printf("%3d  %-*s  %7lld  %s\n", k, namew, class_name(d, k), 0LL, "no images");

    /* Columns as wide as the largest count, headed by the predicted class index. */
    int64_t mx = K;
    for (int i = 0; i < K * K; i++)
        if (r->confusion[i] > mx) mx = r->confusion[i];
    int cw = digits(mx) + 1;
    printf("\nconfusion matrix (rows: true class, columns: predicted class)\n%3s  %-*s ", "",
           namew, "");
    for (int p = 0; p < K; p++) printf("%*d", cw, p);
    printf("\n");
    for (int t = 0; t < K; t++) {
        printf("%3d  %-*s ", t, namew, class_name(d, t));
        for (int p = 0; p < K; p++) printf("%*lld", cw, (long long)r->confusion[t * K + p]);
        printf("\n");
    }
}

static void print_json(const cli_opts *o, const fl_dataset *d, const fl_eval_result *r) {
    int K = r->n_classes;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "data", o->eval_data);
    cJSON_AddStringToObject(j, "data_source", d->source);
    cJSON_AddNumberToObject(j, "n", (double)r->n);
    cJSON_AddNumberToObject(j, "correct", (double)r->correct);
    cJSON_AddNumberToObject(j, "accuracy", r->accuracy);
    cJSON_AddNumberToObject(j, "loss", r->loss);
    cJSON *cls = cJSON_AddArrayToObject(j, "classes");
    for (int k = 0; k < K; k++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", k);
        cJSON_AddStringToObject(c, "name", class_name(d, k));
        cJSON_AddNumberToObject(c, "n", (double)r->class_n[k]);
        if (r->class_n[k]) cJSON_AddNumberToObject(c, "accuracy", r->class_acc[k]);
        else cJSON_AddNullToObject(c, "accuracy"); /* no images */
        cJSON_AddItemToArray(cls, c);
    }
    cJSON *cm = cJSON_AddArrayToObject(j, "confusion");
    for (int t = 0; t < K; t++) {
        cJSON *row = cJSON_CreateArray();
        for (int p = 0; p < K; p++)
            cJSON_AddItemToArray(row, cJSON_CreateNumber((double)r->confusion[t * K + p]));
        cJSON_AddItemToArray(cm, row);
    }
    char *txt = cJSON_Print(j);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(j);
}

int cmd_nn_eval(const cli_opts *o) {
    fl_err e = {0};
    fl_model *m = NULL;
    fl_dataset *d = NULL;
    fl_eval_result r;
    fl_scale sc;
    memset(&r, 0, sizeof r);
    fl_threads_set((int)o->threads);
    if (o->given[F_scale] && fl_scale_parse(o->scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);

    int rc = CLI_FAIL;
    if (fl_onnx_load(o->model, &m, &e) != FL_OK) goto out;
    if (fl_dataset_load(o->eval_data, o->given[F_scale] ? &sc : NULL, o->limit, &d, &e) != FL_OK)
        goto out;
    if (fl_eval(m, d, (int)o->eval_batch, &r, &e) != FL_OK) goto out;
    if (o->json) print_json(o, d, &r);
    else print_tables(o, d, &r);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) cli_fail(&e);
    fl_eval_result_free(&r);
    fl_dataset_free(d);
    fl_model_free(m);
    return rc;
}
