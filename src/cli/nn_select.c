/* flare nn select: choose seeds from a test set (fl_select) and write them (fl_selection_save);
 * print what was chosen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"
#include "flare/select.h"

/* "X:test" -> "X:train"; NULL when the spec names no test split. */
static char *train_spec(const char *test) {
    size_t n = strlen(test);
    if (n < 5 || strcmp(test + n - 5, ":test")) return NULL;
    char *s = malloc(n + 2);
    if (s) snprintf(s, n + 2, "%.*s:train", (int)(n - 5), test);
    return s;
}

static void print_selection(const cli_opts *o, const fl_selection *s, const fl_dataset *d) {
    printf("selected %lld of %lld %sinputs of %s by %s\n", (long long)s->n, (long long)s->eligible,
           s->eligible < d->n ? "eligible (correctly classified) " : "", o->sel_data,
           o->sel_strategy);
    printf("\n%5s  %7s  %-12s  %-12s  %s\n", "rank", "index", "label", "predicted", "score");
    for (int64_t j = 0; j < s->n && j < 10; j++) {
        int y = d->y[s->index[j]], p = s->pred[j];
        const char *yn = y >= 0 && y < d->n_classes ? d->class_names[y] : "-";
        const char *pn = p >= 0 && p < d->n_classes ? d->class_names[p] : "?";
        printf("%5lld  %7lld  %-12.12s  %-12.12s  ", (long long)j + 1, (long long)s->index[j], yn,
               pn);
        if (isnan(s->score[j])) printf("-\n");
        else printf("%.6g\n", s->score[j]);
    }
    if (s->n > 10) printf("%5s\n", "...");
}

int cmd_nn_select(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    fl_select_opts so;
    fl_select_opts_default(&so);
    fl_threads_set((int)o->lrp_threads);
    if (o->given[F_lrp_scale] && fl_scale_parse(o->lrp_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    if (fl_select_strategy_parse(o->sel_strategy, &so.strategy, &e) != FL_OK)
        return cli_usage(o->cmd, "--strategy: %s", e.msg);
    int st_kind = so.strategy >= FL_SEL_ST_DALL;
    char *train = NULL;
    if (st_kind) {
        if (!o->set[F_sel_important])
            return cli_usage(o->cmd, "--strategy %s needs --important (the output of `flare nn "
                             "lrp`)", o->sel_strategy);
        train = o->set[F_sel_train] ? strdup(o->sel_train) : train_spec(o->sel_data);
        if (!train)
            return cli_usage(o->cmd, "--strategy %s needs --train (no :test in --data to derive "
                             "it from)", o->sel_strategy);
    }
    so.seed = o->set[F_sel_seed] ? o->sel_seed : cli_fresh_seed();
    if (so.strategy == FL_SEL_RANDOM || so.strategy == FL_SEL_KMST)
        cli_note("seed %llu\n", (unsigned long long)so.seed);
    so.n = o->sel_n;
    so.sections = (int)o->sel_sections;
    so.fol = strcmp(o->sel_fol, "l2") ? FL_FOL_LINF : FL_FOL_L2;
    so.fol_eps = o->sel_fol_eps;
    so.layers = o->set[F_sel_layers] ? o->sel_layers : NULL;
    so.batch = (int)o->lrp_batch;

    fl_model *m = NULL;
    fl_dataset *d = NULL, *tr = NULL;
    fl_important *imp = NULL;
    fl_selection *s = NULL;
    const fl_scale *scp = o->given[F_lrp_scale] ? &sc : NULL;
    int rc = CLI_FAIL;
    /* the images, .idx.npy and .png go to one folder: one check before any work */
    if (fl_file_check_writable(o->sel_output, &e) != FL_OK) goto out;
    if (fl_onnx_load(o->lrp_model, &m, &e) != FL_OK) goto out;
    if (so.layers && (rc = cli_layers_check(o->cmd, "layers", o->lrp_model, m, so.layers)) != CLI_OK)
        goto out_quiet;
    rc = CLI_FAIL;
    if (fl_dataset_load(o->sel_data, scp, o->lrp_limit, &d, &e) != FL_OK) goto out;
    if (st_kind) {
        if (fl_important_load(o->sel_important, &imp, &e) != FL_OK) goto out;
        if (fl_dataset_load(train, scp, o->lrp_limit, &tr, &e) != FL_OK) goto out;
        so.important = imp;
        so.train = tr;
    }
    if (fl_select(m, d, &so, &s, &e) != FL_OK) goto out;
    if (s->n < o->sel_n)
        cli_note("only %lld inputs qualify; selected them all\n", (long long)s->n);
    if (fl_selection_save(s, d, o->sel_output, &e) != FL_OK) goto out;
    print_selection(o, s, d);
    cli_note("\nwrote %s (images), its .idx.npy (indices) and .png (grid)\n", o->sel_output);
    rc = CLI_OK;
out:
    if (rc != CLI_OK) cli_fail(&e);
out_quiet:
    fl_selection_free(s);
    fl_important_free(imp);
    fl_dataset_free(tr);
    fl_dataset_free(d);
    fl_model_free(m);
    free(train);
    return rc;
}
