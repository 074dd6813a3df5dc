/* flare nn run: one forward pass over the input images; the model's first output goes to
 * --output, each layer of --layers to its own NPY file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "flare/data.h"
#include "flare/neurons.h"
#include "flare/onnx.h"

/* A layer name as a file-name part: "/conv1/Conv_output_0" -> "conv1_Conv_output_0". */
static void sanitize(const char *name, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < n; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
        if (!ok) c = '_';
        if (k == 0 && (c == '_' || c == '.')) continue; /* no hidden files, no leading '_' */
        out[k++] = c;
    }
    if (k == 0) out[k++] = 'x';
    out[k] = 0;
}

/* The layer names of every --layers value (NAME, NAME,NAME, all, conv+dense), in order and
 * each once, as malloc'd copies in *names[0 .. *n). Returns CLI_OK, or the exit status of the
 * error it reported. */
static int layer_names(const cli_opts *o, fl_model *m, char ***names, int *n) {
    fl_err e = {0};
    *names = NULL;
    *n = 0;
    for (int i = 0; i < o->layer.n; i++) {
        int rc = cli_layers_check(o->cmd, "layers", o->model, m, o->layer.v[i]);
        if (rc != CLI_OK) return rc;
        fl_layerset *ls;
        if (fl_layerset_make(m, o->layer.v[i], &ls, &e) != FL_OK)
            return e.status == FL_ERR_ARG ? cli_usage(o->cmd, "--layers %s: %s", o->layer.v[i],
                                                      e.msg)
                                          : cli_fail(&e);
        char **nv = realloc(*names, (size_t)(*n + ls->n + 1) * sizeof *nv);
        if (nv) *names = nv;
        for (int l = 0; nv && l < ls->n; l++) {
            int j = 0;
            while (j < *n && strcmp(nv[j], ls->name[l])) j++;
            if (j < *n) continue; /* named twice: one file */
            if (!(nv[*n] = strdup(ls->name[l]))) nv = NULL;
            else (*n)++;
        }
        fl_layerset_free(ls);
        if (!nv) {
            fl_fail(&e, FL_ERR_NOMEM, "out of memory");
            return cli_fail(&e);
        }
    }
    return CLI_OK;
}

/* out without its ".npy" suffix + "." + part + ".npy", or DIR/part.npy. */
static char *layer_path(const cli_opts *o, const char *part) {
    size_t n = strlen(o->run_output), need = n + strlen(part) + 8;
    if (o->set[F_outdir]) need += strlen(o->outdir);
    char *s = malloc(need);
    if (!s) return NULL;
    if (o->set[F_outdir]) {
        snprintf(s, need, "%s/%s.npy", o->outdir, part);
    } else {
        if (n > 4 && !strcmp(o->run_output + n - 4, ".npy")) n -= 4;
        snprintf(s, need, "%.*s.%s.npy", (int)n, o->run_output, part);
    }
    return s;
}

static void say_wrote(const char *path, const fl_tensor *t, const char *what) {
    char shp[128];
    printf("wrote %s  %s  (%s)\n", path, fl_shape_str(t, shp, sizeof shp), what);
}

/* --layer-times: every node's median time over `passes` passes, its share of the pass and,
 * for products, its GFLOP/s against a bare sgemm measured now on the same threads. */
static int print_layer_times(const cli_opts *o, fl_model *m, const fl_tensor *x, fl_err *e) {
    fl_timing t;
    if (fl_model_time_layers(m, 1, x, (int)o->layer_times, &t, e) != FL_OK) return CLI_FAIL;
    double peak = fl_sgemm_gflops(1024, 5);
    double flops = 0;
    printf("layer times: median of %d passes, batch %lld, %d threads\n", (int)o->layer_times,
           (long long)x->shape[0], fl_threads_get());
    printf("  #  %-36s %-18s %10s %7s %9s %8s\n", "node", "op", "ms", "share", "GFLOP/s",
           "of sgemm");
    for (int i = 0; i < t.n; i++) {
        const fl_node *n = &m->nodes[i];
        printf("%3d  %-36.36s %-18.18s %10.3f %6.1f%%", i, n->name, n->op->name, t.secs[i] * 1e3,
               t.total > 0 ? 100 * t.secs[i] / t.total : 0.0);
        if (t.flops[i] > 0 && t.secs[i] > 0)
            printf(" %9.1f %7.0f%%", t.flops[i] / t.secs[i] * 1e-9,
                   peak > 0 ? 100 * t.flops[i] / t.secs[i] * 1e-9 / peak : 0.0);
        printf("\n");
        flops += t.flops[i];
    }
    printf("total %.3f ms (%.1f images/s), %.2f GFLOP, %.1f GFLOP/s; bare sgemm 1024^3: %.1f "
           "GFLOP/s\n", t.total * 1e3, t.total > 0 ? x->shape[0] / t.total : 0.0, flops * 1e-9,
           t.total > 0 ? flops / t.total * 1e-9 : 0.0, peak);
    fl_timing_free(&t);
    return CLI_OK;
}

int cmd_nn_run(const cli_opts *o) {
    fl_err e = {0};
    fl_model *m = NULL;
    fl_dataset *d = NULL;
    fl_scale sc;
    fl_tensor x = {0};
    char **paths = NULL, *spec = NULL;
    char **names = NULL; /* the layers of every --layers value, in order */
    int rc = CLI_FAIL, nl = 0, written = -1, made_dir = 0;
    fl_threads_set((int)o->threads);
    if (o->given[F_scale] && fl_scale_parse(o->scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);

    if (fl_file_check_writable(o->run_output, &e) != FL_OK) goto out;
    if (fl_onnx_load(o->model, &m, &e) != FL_OK) goto out;
    if ((rc = layer_names(o, m, &names, &nl)) != CLI_OK) goto out_quiet;
    rc = CLI_FAIL;
    /* File names first: two layers whose names sanitize alike get distinct files. */
    paths = calloc((size_t)nl + 1, sizeof *paths);
    if (!paths) goto oom;
    for (int i = 0; i < nl; i++) {
        char part[256], uniq[280];
        sanitize(names[i], part, sizeof part);
        snprintf(uniq, sizeof uniq, "%s", part);
        for (int dup = 2;; dup++) {
            if (!(paths[i] = layer_path(o, uniq))) goto oom;
            int j = 0;
            while (j < i && strcmp(paths[i], paths[j])) j++;
            if (j == i) break;
            free(paths[i]);
            paths[i] = NULL;
            snprintf(uniq, sizeof uniq, "%s-%d", part, dup);
        }
    }
    /* A plain "DIR/x.npy" would make the data module look for labels in "DIR/y.npy"; nn run
     * needs no labels, and a stale y.npy (maybe the output of an earlier run) must not fail
     * it. The explicit "npy:" form reads just the images. */
    size_t n = strlen(o->input);
    int npy = (n > 4 && !strcmp(o->input + n - 4, ".npy")) ||
              (n > 7 && !strcmp(o->input + n - 7, ".npy.gz"));
    if (npy && !strchr(o->input, ',') && strncmp(o->input, "npy:", 4)) {
        if (!(spec = malloc(n + 5))) goto oom;
        snprintf(spec, n + 5, "npy:%s", o->input);
    }
    if (fl_dataset_load(spec ? spec : o->input, o->given[F_scale] ? &sc : NULL, o->limit, &d,
                        &e) != FL_OK)
        goto out;
    if (fl_dataset_batch(d, 0, d->n, &x, &e) != FL_OK) goto out;
    if (fl_model_forward(m, &x, &e) != FL_OK) goto out;

    /* --outdir is made only once there is something to put in it */
    if (o->set[F_outdir]) {
        if (mkdir(o->outdir, 0777) == 0) made_dir = 1;
        else if (errno != EEXIST) {
            fl_fail(&e, FL_ERR_IO, "%s: cannot create directory: %s", o->outdir, strerror(errno));
            goto out;
        }
    }
    const fl_tensor *y = fl_model_output(m, 0);
    if (fl_npy_write_tensor(o->run_output, y, &e) != FL_OK) goto out;
    written = 0; /* files 0..written of the layers are in place; -o too */
    say_wrote(o->run_output, y, fl_model_output_name(m, 0));
    for (int i = 0; i < nl; i++, written = i) {
        const fl_tensor *t = fl_model_tensor(m, names[i]);
        if (!t || !t->data) {
            fl_fail(&e, FL_ERR_NOTFOUND, "%s: value %s was not computed by the forward pass",
                    o->model, names[i]);
            goto out;
        }
        if (fl_npy_write_tensor(paths[i], t, &e) != FL_OK) goto out;
        say_wrote(paths[i], t, names[i]);
    }
    if (o->layer_times > 0 && print_layer_times(o, m, &x, &e) != CLI_OK) goto out;
    rc = CLI_OK;
    goto out;
oom:
    fl_fail(&e, FL_ERR_NOMEM, "out of memory");
out:
    if (rc != CLI_OK) cli_fail(&e);
    if (rc != CLI_OK && written >= 0) { /* all the outputs or none */
        unlink(o->run_output);
        for (int i = 0; i < written; i++) unlink(paths[i]);
    }
    if (rc != CLI_OK && made_dir) rmdir(o->outdir); /* made by this run, emptied above */
out_quiet:
    for (int i = 0; paths && i < nl; i++) free(paths[i]);
    for (int i = 0; names && i < nl; i++) free(names[i]);
    free(names);
    free(paths);
    free(spec);
    fl_tensor_free(&x);
    fl_dataset_free(d);
    fl_model_free(m);
    return rc;
}
