/* flare nn info: a model's inputs, outputs and layers (fl_model_layers), as an aligned table
 * or one JSON object. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"

/* "[batch,1,28,28]": input i's declared shape, a symbolic dimension by the name the file
 * gives it, an unnamed free one as N (first) or ? (others). */
static void decl_str(const fl_model *m, int i, char *buf, size_t n) {
    const fl_value *v = &m->values[m->inputs[i]];
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < v->decl_ndim && k < n; d++) {
        const char *name = m->input_dim_name[i][d];
        if (v->decl_shape[d] > 0)
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)v->decl_shape[d]);
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%s", d ? "," : "", name ? name : d ? "?" : "N");
    }
    if (k < n) snprintf(buf + k, n - k, "]");
}

static cJSON *shape_json(int ndim, const int64_t *shape) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < ndim; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(shape[d] > 0 ? (double)shape[d] : -1));
    return a;
}

static void print_json(const cli_opts *o, const fl_model *m, const fl_layer_info *L, int n) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    if (m->producer_name) cJSON_AddStringToObject(j, "producer", m->producer_name);
    cJSON_AddNumberToObject(j, "opset", m->opset);
    cJSON *ins = cJSON_AddArrayToObject(j, "inputs");
    for (int i = 0; i < m->n_inputs; i++) {
        const fl_value *v = &m->values[m->inputs[i]];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", v->name);
        cJSON_AddItemToObject(x, "shape", shape_json(v->decl_ndim, v->decl_shape));
        cJSON *names = cJSON_AddArrayToObject(x, "dim_names"); /* symbolic dims, as declared */
        for (int d = 0; d < v->decl_ndim; d++)
            cJSON_AddItemToArray(names, m->input_dim_name[i][d]
                                            ? cJSON_CreateString(m->input_dim_name[i][d])
                                            : cJSON_CreateNull());
        cJSON_AddItemToArray(ins, x);
    }
    cJSON *outs = cJSON_AddArrayToObject(j, "outputs");
    for (int i = 0; i < m->n_outputs; i++) {
        const char *name = fl_model_output_name(m, i);
        const fl_tensor *t = fl_model_tensor(m, name);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", name);
        cJSON_AddItemToObject(x, "shape", shape_json(t ? t->ndim : 0, t ? t->shape : NULL));
        cJSON_AddItemToArray(outs, x);
    }
    cJSON *ls = cJSON_AddArrayToObject(j, "layers");
    for (int i = 0; i < n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", L[i].name);
        cJSON_AddStringToObject(x, "node", L[i].node ? L[i].node : "");
        cJSON_AddStringToObject(x, "op", L[i].op);
        cJSON_AddItemToObject(x, "shape", shape_json(L[i].ndim, L[i].shape));
        cJSON_AddNumberToObject(x, "params", (double)L[i].n_params);
        cJSON_AddItemToArray(ls, x);
    }
    cJSON_AddNumberToObject(j, "params", (double)fl_model_param_count(m));
    char *txt = cJSON_Print(j);
    if (txt) printf("%s\n", txt);
    free(txt);
    cJSON_Delete(j);
}

static void print_table(const cli_opts *o, const fl_model *m, const fl_layer_info *L, int n) {
    char shp[128];
    printf("model   %s", o->model);
    if (m->producer_name && *m->producer_name) printf("  (producer %s", m->producer_name);
    printf("%sopset %d%s\n", m->producer_name && *m->producer_name ? ", " : "  (", m->opset, ")");
    for (int i = 0; i < m->n_inputs; i++) {
        decl_str(m, i, shp, sizeof shp);
        printf("input   %s %s\n", m->values[m->inputs[i]].name, shp);
    }
    for (int i = 0; i < m->n_outputs; i++) {
        const fl_tensor *t = fl_model_tensor(m, fl_model_output_name(m, i));
        printf("output  %s %s\n", fl_model_output_name(m, i),
               t ? fl_shape_str(t, shp, sizeof shp) : "[?]");
    }

    int wn = 5, wo = 2, ws = 5;
    for (int i = 0; i < n; i++) {
        fl_tensor t = {0};
        fl_tensor_set_shape(&t, L[i].ndim, L[i].shape);
        int a = (int)strlen(L[i].name), b = (int)strlen(L[i].op),
            c = (int)strlen(fl_shape_str(&t, shp, sizeof shp));
        if (a > wn) wn = a;
        if (b > wo) wo = b;
        if (c > ws) ws = c;
    }
    printf("\nlayers (shapes for a batch of %lld; NAME is what --layers takes):\n",
           n > 0 && L[0].ndim > 0 ? (long long)L[0].shape[0] : 1LL);
    printf("%3s  %-*s  %-*s  %-*s  %10s\n", "#", wn, "name", wo, "op", ws, "shape", "params");
    for (int i = 0; i < n; i++) {
        fl_tensor t = {0};
        fl_tensor_set_shape(&t, L[i].ndim, L[i].shape);
        printf("%3d  %-*s  %-*s  %-*s  %10lld\n", i, wn, L[i].name, wo, L[i].op, ws,
               fl_shape_str(&t, shp, sizeof shp), (long long)L[i].n_params);
    }
    printf("total parameters: %lld\n", (long long)fl_model_param_count(m));
}

int cmd_nn_info(const cli_opts *o) {
    fl_err e = {0};
    fl_model *m = NULL;
    fl_layer_info *L = NULL;
    fl_threads_set((int)o->threads);
    if (fl_onnx_load(o->model, &m, &e) != FL_OK) return cli_fail(&e);
    int n = fl_model_layers(m, &L, &e);
    if (n < 0) {
        fl_model_free(m);
        return cli_fail(&e);
    }
    if (o->json) print_json(o, m, L, n);
    else print_table(o, m, L, n);
    free(L);
    fl_model_free(m);
    return CLI_OK;
}
