/* flare nn lrp: important neurons (fl_important_compute) written as JSON, with a progress bar
 * and a table of the most relevant neurons per layer. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/lrp.h"
#include "flare/onnx.h"

static void on_progress(int64_t done, int64_t total, void *user) {
    progress_update(user, done, NULL);
}

static void print_summary(const cli_opts *o, const fl_important *imp) {
    int w = 5;
    for (int i = 0; i < imp->n_layers; i++) {
        int l = (int)strlen(imp->layers[i].name);
        if (l > w) w = l;
    }
    printf("model   %s\ndata    %s (%lld of %lld inputs classified correctly, explained)\n",
           o->lrp_model, o->lrp_data, (long long)imp->n_inputs, (long long)imp->n_seen);
    printf("rule    %s (epsilon %g), ratio %g\n\n", fl_lrp_rule_name(imp->rule), imp->eps,
           imp->ratio);
    printf("%-*s  %7s  %9s  %s\n", w, "layer", "neurons", "important", "most relevant first");
    for (int i = 0; i < imp->n_layers; i++) {
        const fl_important_layer *L = &imp->layers[i];
        printf("%-*s  %7lld  %9lld ", w, L->name, (long long)L->width, (long long)L->count);
        for (int64_t k = 0; k < L->count && k < 12; k++) printf(" %lld", (long long)L->neuron[k]);
        printf("%s\n", L->count > 12 ? " ..." : "");
    }
}

int cmd_nn_lrp(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    fl_important_opts io;
    fl_important_opts_default(&io);
    fl_threads_set((int)o->lrp_threads);
    if (o->given[F_lrp_scale] && fl_scale_parse(o->lrp_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    if (fl_lrp_rule_parse(o->lrp_rule, &io.lrp.rule, &e) != FL_OK)
        return cli_usage(o->cmd, "--rule: %s", e.msg);
    io.lrp.eps = (float)o->lrp_eps;
    io.ratio = o->lrp_ratio;
    io.layers = o->lrp_layers;
    io.batch = (int)o->lrp_batch;

    fl_model *m = NULL;
    fl_dataset *d = NULL;
    fl_important *imp = NULL;
    int rc = CLI_FAIL;
    cli_progress bar;
    if (fl_file_check_writable(o->lrp_output, &e) != FL_OK) goto out; /* before any work */
    if (fl_onnx_load(o->lrp_model, &m, &e) != FL_OK) goto out;
    if ((rc = cli_layers_check(o->cmd, "layers", o->lrp_model, m, o->lrp_layers)) != CLI_OK)
        goto out_quiet;
    rc = CLI_FAIL;
    if (fl_dataset_load(o->lrp_data, o->given[F_lrp_scale] ? &sc : NULL, o->lrp_limit, &d, &e) !=
        FL_OK)
        goto out;
    progress_start(&bar, stderr, "lrp", d->n, "img", o->quiet);
    io.progress = on_progress;
    io.user = &bar;
    double t0 = fl_now();
    fl_status st = fl_important_compute(m, d, &io, &imp, &e);
    progress_clear(&bar);
    if (st != FL_OK) goto out;
    imp->model = strdup(o->lrp_model);
    if (fl_important_save(imp, o->lrp_output, &e) != FL_OK) goto out;
    print_summary(o, imp);
    cli_note("\nwrote %s (%lld inputs in %.1f s)\n", o->lrp_output, (long long)d->n,
             fl_now() - t0);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) cli_fail(&e);
out_quiet:
    fl_important_free(imp);
    fl_dataset_free(d);
    fl_model_free(m);
    return rc;
}
