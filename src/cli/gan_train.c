/* flare gan train: train a FuzzGAN generator against a model (fl_gan_train) and save it.
 *
 * Presentation only: the seed line, a progress bar per epoch, one line per epoch on stdout
 * (the same figures as the work folder's losses.jsonl), Ctrl-C handling. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/gan.h"
#include "flare/onnx.h"

static volatile int stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct gan_ctx {
    cli_progress bar;
    int quiet;
    int64_t per_epoch;
} gan_ctx;

static void on_progress(const fl_gan_progress *p, void *user) {
    gan_ctx *c = user;
    char extra[96];
    snprintf(extra, sizeof extra, "D %.3f G %.3f", p->d_loss, p->g_loss);
    progress_update(&c->bar, p->done, extra);
}

static void start_bar(gan_ctx *c, int epoch, int epochs) {
    char label[64];
    snprintf(label, sizeof label, "epoch %d/%d", epoch, epochs);
    progress_start(&c->bar, stderr, label, c->per_epoch, "img", c->quiet);
}

static void on_epoch(const fl_gan_epoch *s, void *user) {
    gan_ctx *c = user;
    progress_clear(&c->bar);
    int w = snprintf(NULL, 0, "%d", s->epochs);
    printf("epoch %*d/%d  D %.4f  G adv %.4f cls %.4f err %.4f neuron %.4f  misclass %.3f  "
           "class-follow %.3f  target-act %.3f (real %.3f)  %.1fs  %s\n",
           w, s->epoch, s->epochs, s->d_loss, s->g_adv, s->g_cls, s->g_error, s->g_neuron,
           s->misclass, s->d_class_acc, s->target_act, s->real_act, s->seconds, s->grid);
    fflush(stdout);
    if (s->epoch < s->epochs) start_bar(c, s->epoch + 1, s->epochs);
}

/* "g.onnx" -> "g.train" (malloc'd). */
static char *default_work(const char *out) {
    size_t n = strlen(out);
    if (n > 5 && !strcmp(out + n - 5, ".onnx")) n -= 5;
    char *s = malloc(n + 8);
    if (s) snprintf(s, n + 8, "%.*s.train", (int)n, out);
    return s;
}

int cmd_gan_train(const cli_opts *o) {
    fl_err e = {0};
    int rc = CLI_FAIL;
    fl_model *mut = NULL, *gen = NULL;
    fl_dataset *tr = NULL;
    char *work = NULL;
    fl_scale sc;
    if (fl_scale_parse(o->scale, &sc, &e) != FL_OK) return cli_usage(o->cmd, "--scale: %s", e.msg);
    fl_threads_set((int)o->threads);
    uint64_t seed = o->set[F_gn_seed] ? o->gn_seed : 0;
    /* resuming without -s: the checkpoint's seed (another -s is refused by fl_gan_train) */
    if (!o->set[F_gn_seed] && o->set[F_gn_resume] && fl_gan_ckpt_seed(o->gn_resume, &seed, &e))
        return cli_fail(&e);
    if (!o->set[F_gn_seed] && !o->set[F_gn_resume]) seed = cli_fresh_seed();
    cli_note("seed %llu (repeat this run with --seed %llu --threads %d)\n",
             (unsigned long long)seed, (unsigned long long)seed, fl_threads_get());
    fl_gan_opts go;
    fl_gan_opts_default(&go);
    go.epochs = (int)o->gn_epochs;
    go.batch = (int)o->gn_batch;
    go.lr = (float)o->gn_lr;
    go.lambda1 = o->gn_lambda1;
    go.lambda2 = o->gn_lambda2;
    go.nz = (int)o->gn_nz;
    go.layers = o->gn_layers;
    go.seed = seed;
    go.scale = &sc;
    go.max_batches = o->gn_max_batches;
    go.model_path = o->gn_model;
    go.resume = o->set[F_gn_resume];
    work = go.resume ? strdup(o->gn_resume) : o->set[F_gn_work] ? strdup(o->gn_work)
                                                                 : default_work(o->gn_output);
    if (!work) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    go.work_dir = work;
    if (fl_onnx_load(o->gn_model, &mut, &e) != FL_OK) goto out;
    if (fl_dataset_load(o->gn_data, &sc, o->limit, &tr, &e) != FL_OK) goto out;
    gan_ctx ctx = {.quiet = o->quiet};
    ctx.per_epoch = tr->n / go.batch;
    if (go.max_batches > 0 && ctx.per_epoch > go.max_batches) ctx.per_epoch = go.max_batches;
    ctx.per_epoch *= go.batch;
    cli_note("FuzzGAN against %s on %s (%lld images), batch %d, %d epoch%s; work folder %s\n",
             o->gn_model, o->gn_data, (long long)tr->n, go.batch, go.epochs,
             go.epochs == 1 ? "" : "s", work);
    go.progress = on_progress;
    go.on_epoch = on_epoch;
    go.user = &ctx;
    go.stop = &stop_flag;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    start_bar(&ctx, 1, go.epochs);
    double t0 = fl_now();
    fl_status st = fl_gan_train(mut, tr, &go, &gen, &e);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    progress_clear(&ctx.bar);
    if (st != FL_OK) goto out;
    /* Ctrl-C as in nn train: said even with -q, exit status 130 */
    if (stop_flag && !gen) {
        fprintf(stderr, "stopped by Ctrl-C before the first epoch finished: nothing written\n");
        rc = CLI_INTERRUPTED;
        goto out_quiet;
    }
    if (fl_onnx_save(gen, o->gn_output, &e) != FL_OK) goto out;
    if (stop_flag)
        fprintf(stderr, "stopped by Ctrl-C: wrote the last finished epoch's generator to %s "
                "(resume with --resume %s -s %llu)\n", o->gn_output, work,
                (unsigned long long)seed);
    else
        cli_note("wrote %s in %.1fs (grids, losses.jsonl, checkpoint: %s)\n", o->gn_output,
                 fl_now() - t0, work);
    rc = stop_flag ? CLI_INTERRUPTED : CLI_OK;
    goto out_quiet;
out:
    cli_fail(&e);
out_quiet:
    free(work);
    fl_model_free(gen);
    fl_model_free(mut);
    fl_dataset_free(tr);
    return rc;
}
