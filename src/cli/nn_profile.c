/* flare nn profile: per-neuron min, max, mean and std of a model over a training set
 * (fl_profile_compute), saved for `flare nn cover`. */
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/cover.h"
#include "flare/onnx.h"

static void on_progress(void *user, int64_t done, int64_t total) {
    (void)total;
    progress_update(user, done, NULL);
}

int cmd_nn_profile(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    if (o->given[F_cov_scale] && fl_scale_parse(o->cov_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    fl_threads_set((int)o->cov_threads);
    const char *layers = o->set[F_cov_layers] ? o->cov_layers : "all";
    fl_model *m = NULL;
    fl_dataset *d = NULL;
    fl_layerset *ls = NULL;
    fl_profile *p = NULL;
    int rc = CLI_FAIL;
    if (fl_file_check_writable(o->prof_output, &e) != FL_OK) goto out; /* before any work */
    if (fl_onnx_load(o->cov_model, &m, &e) != FL_OK) goto out;
    if ((rc = cli_layers_check(o->cmd, "layers", o->cov_model, m, layers)) != CLI_OK) goto out;
    rc = CLI_FAIL;
    if (fl_layerset_make(m, layers, &ls, &e) != FL_OK) {
        if (e.status == FL_ERR_NOTFOUND || e.status == FL_ERR_ARG) {
            rc = cli_usage(o->cmd, "--layers %s: %s", layers, e.msg);
            e.status = FL_OK;
        }
        goto out;
    }
    if (fl_dataset_load(o->prof_data, o->given[F_cov_scale] ? &sc : NULL, o->cov_limit, &d, &e) != FL_OK) goto out;
    cli_progress bar;
    progress_start(&bar, stderr, "profile", d->n, "img", cli_quiet);
    double t0 = fl_now();
    fl_status st = fl_profile_compute(m, ls, d, (int)o->cov_batch, on_progress, &bar, &p, &e);
    progress_clear(&bar);
    if (st != FL_OK || fl_profile_save(p, o->prof_output, &e) != FL_OK) goto out;
    cli_note("%lld inputs profiled in %.1f s\n", (long long)d->n, fl_now() - t0);
    printf("profiled %lld neurons in %d layers over %lld inputs of %s\nwrote %s\n",
           (long long)ls->total, ls->n, (long long)d->n, o->prof_data, o->prof_output);
    rc = CLI_OK;
out:
    if (rc == CLI_FAIL && e.status != FL_OK) cli_fail(&e);
    fl_profile_free(p);
    fl_layerset_free(ls);
    fl_dataset_free(d);
    fl_model_free(m);
    return rc;
}
