/* flare nn retrain: fl_retrain on the failures of --extra campaigns, then the before/after
 * table (docs/nn-fuzz.md). */
#include <stdio.h>

#include "cli/cli.h"
#include "flare/fuzz.h"
#include "flare/onnx.h"

static void on_epoch(const fl_epoch_stats *s, void *user) {
    (void)user;
    cli_note("epoch %d/%d  loss %.4f  acc %.4f  %.1fs\n", s->epoch, s->epochs, s->train_loss,
             s->train_acc, s->seconds);
}

int cmd_nn_retrain(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    if (o->given[F_rt_scale] && fl_scale_parse(o->rt_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    const fl_scale *scp = o->given[F_rt_scale] ? &sc : NULL;
    fl_threads_set((int)o->threads);
    fl_retrain_opts ro;
    fl_retrain_opts_default(&ro);
    ro.extra = o->rt_extra.v;
    ro.n_extra = o->rt_extra.n;
    ro.holdout = o->rt_holdout;
    ro.epochs = (int)o->rt_epochs;
    ro.batch = (int)o->rt_batch;
    ro.lr = (float)o->rt_lr;
    ro.seed = o->rt_seed;
    ro.on_epoch = on_epoch;
    fl_model *m = NULL;
    fl_dataset *tr = NULL, *te = NULL;
    fl_retrain_result r;
    int rc = CLI_FAIL;
    if (fl_file_check_writable(o->rt_output, &e) || fl_onnx_load(o->rt_model, &m, &e) || fl_dataset_load(o->rt_data, scp, 0, &tr, &e) ||
        fl_dataset_load(o->rt_test, scp, 0, &te, &e) || fl_retrain(m, tr, te, &ro, &r, &e) ||
        fl_onnx_save(m, o->rt_output, &e))
        goto out;
    printf("failures: %lld (%lld for training, %lld held out)\n", (long long)r.n_failures,
           (long long)r.n_train_failures, (long long)r.n_holdout);
    printf("                    before    after\n");
    printf("clean test acc      %.4f   %.4f  (%+.2f points)\n", r.clean_before, r.clean_after,
           100 * (r.clean_after - r.clean_before));
    if (r.n_holdout)
        printf("held-out failures   %.4f   %.4f\n", r.holdout_before, r.holdout_after);
    else
        printf("held-out failures   (none held out)\n");
    printf("wrote %s\n", o->rt_output);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) cli_fail(&e);
    fl_dataset_free(tr);
    fl_dataset_free(te);
    fl_model_free(m);
    return rc;
}
