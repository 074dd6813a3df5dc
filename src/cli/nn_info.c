/* flare nn info: a model's inputs, outputs and layers (fl_model_layers), as an aligned table
 * or one JSON object. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"

static cJSON *shape_json(int ndim, const int64_t *shape) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < ndim; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(shape[d] > 0 ? (double)shape[d] : -1));
    return a;
}

/* "[batch,1,28,28]": a declared shape, a symbolic dimension by the name the file gives it
 * (names[d]), an unnamed free one as N (first) or ? (others). */
static void decl_str(int ndim, const int64_t *shape, char *const *names, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++) {
        if (shape[d] > 0)
            k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)shape[d]);
        else
            k += (size_t)snprintf(buf + k, n - k, "%s%s", d ? "," : "",
                                  names[d] ? names[d] : d ? "?" : "N");
    }
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* {"shape": [...], "dim_names": [...]} of a declared shape into x: -1 for a free dimension,
 * its name (or null) in dim_names. */
static void decl_json(cJSON *x, int ndim, const int64_t *shape, char *const *names) {
    cJSON_AddItemToObject(x, "shape", shape_json(ndim, shape));
    cJSON *a = cJSON_AddArrayToObject(x, "dim_names");
    for (int d = 0; d < ndim; d++)
        cJSON_AddItemToArray(a, names[d] ? cJSON_CreateString(names[d]) : cJSON_CreateNull());
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
        decl_json(x, v->decl_ndim, v->decl_shape, m->input_dim_name[i]);
        cJSON_AddItemToArray(ins, x);
    }
    cJSON *outs = cJSON_AddArrayToObject(j, "outputs");
    for (int i = 0; i < m->n_outputs; i++) {
        const char *name = fl_model_output_name(m, i);
        const fl_tensor *t = fl_model_tensor(m, name);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", name);
        if (m->output_decl_ndim[i] > 0) /* as declared; else as computed for a batch of 1 */
            decl_json(x, m->output_decl_ndim[i], m->output_decl_shape[i], m->output_dim_name[i]);
        else
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
        const fl_value *v = &m->values[m->inputs[i]];
        decl_str(v->decl_ndim, v->decl_shape, m->input_dim_name[i], shp, sizeof shp);
        printf("input   %s %s\n", v->name, shp);
    }
    for (int i = 0; i < m->n_outputs; i++) {
        const fl_tensor *t = fl_model_tensor(m, fl_model_output_name(m, i));
        if (m->output_decl_ndim[i] > 0)
            decl_str(m->output_decl_ndim[i], m->output_decl_shape[i], m->output_dim_name[i], shp,
                     sizeof shp);
        else if (!t || !fl_shape_str(t, shp, sizeof shp))
            snprintf(shp, sizeof shp, "[?]");
        printf("output  %s %s\n", fl_model_output_name(m, i), shp);
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
