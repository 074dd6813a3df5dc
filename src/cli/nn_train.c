/* flare nn train: build a zoo network, train it with fl_train, save it as ONNX.
 *
 * The command's own work is presentation: the seed line, the progress bar, one line per
 * epoch on stdout and the JSON-lines statistics file (format in docs/cli.md), and Ctrl-C:
 * training stops after the current batch, the model of the last finished epoch is written
 * and the statistics file ends with an "interrupted" end line; exit status 130. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/onnx.h"
#include "flare/train.h"

static volatile int stop_flag;
static void on_sigint(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct train_ctx {
    cli_progress bar;
    int quiet;
    FILE *stats;
    double ips;                 /* throughput of the epoch, from the last progress report */
    fl_epoch_stats last;        /* the last epoch, for the summary */
} train_ctx;

/* AFL++ style: a seed nobody chose comes from the OS, and is printed so the run can be
 * repeated. */
uint64_t cli_fresh_seed(void) {
    uint64_t s;
    if (getrandom(&s, sizeof s, 0) == (ssize_t)sizeof s) return s;
    return (uint64_t)(fl_now() * 1e9) ^ ((uint64_t)getpid() << 32);
}

/* The test split that goes with a training spec, or NULL: "X:train" -> "X:test",
 * "fashion-mnist" / "mnist" / "cifar10:DIR" (whose default split is train) -> "...:test". */
static char *default_test_spec(const char *train) {
    size_t n = strlen(train);
    char *s = malloc(n + 8);
    if (!s) return NULL;
    if (n > 6 && !strcmp(train + n - 6, ":train"))
        snprintf(s, n + 8, "%.*s:test", (int)(n - 6), train);
    else if (!strcmp(train, "fashion-mnist") || !strcmp(train, "mnist") ||
             (!strncmp(train, "cifar10:", 8) && !(n > 5 && !strcmp(train + n - 5, ":test"))))
        snprintf(s, n + 8, "%s:test", train);
    else
        free(s), s = NULL;
    return s;
}

/* A float as the short decimal it was typed as (0.001, not 0.0010000000474974513), and
 * timings to a precision that means something. */
static double f2d(float f) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", (double)f);
    return strtod(b, NULL);
}

static double round_to(double v, double step) { return step * (double)(int64_t)(v / step + 0.5); }

/* Write one JSON object as a line of the stats file (and free it). */
static void stats_line(FILE *f, cJSON *obj) {
    if (f) {
        char *txt = cJSON_PrintUnformatted(obj);
        if (txt) fprintf(f, "%s\n", txt), fflush(f);
        free(txt);
    }
    cJSON_Delete(obj);
}

static void on_progress(const fl_train_progress *p, void *user) {
    train_ctx *c = user;
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.4f acc %.3f", p->loss, p->acc);
    c->ips = p->images_per_s;
    progress_update(&c->bar, p->done, extra);
}

static void on_epoch(const fl_epoch_stats *s, void *user) {
    train_ctx *c = user;
    double ips = c->ips;
    c->last = *s;
    progress_clear(&c->bar);
    int w = snprintf(NULL, 0, "%d", s->epochs); /* "epoch  7/10": columns line up */
    printf("epoch %*d/%d  loss %.4f  acc %.4f", w, s->epoch, s->epochs, s->train_loss,
           s->train_acc);
    if (s->test_acc >= 0) printf("  test_loss %.4f  test_acc %.4f", s->test_loss, s->test_acc);
    printf("  %.1fs  %.0f img/s\n", s->seconds, ips);
    fflush(stdout);

    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "event", "epoch");
    cJSON_AddNumberToObject(j, "epoch", s->epoch);
    cJSON_AddNumberToObject(j, "epochs", s->epochs);
    cJSON_AddNumberToObject(j, "train_loss", s->train_loss);
    cJSON_AddNumberToObject(j, "train_acc", s->train_acc);
    if (s->test_acc >= 0) {
        cJSON_AddNumberToObject(j, "test_loss", s->test_loss);
        cJSON_AddNumberToObject(j, "test_acc", s->test_acc);
    } else {
        cJSON_AddNullToObject(j, "test_loss");
        cJSON_AddNullToObject(j, "test_acc");
    }
    cJSON_AddNumberToObject(j, "lr", f2d(s->lr));
    cJSON_AddNumberToObject(j, "seconds", round_to(s->seconds, 1e-3));
    cJSON_AddNumberToObject(j, "images_per_s", round_to(ips, 0.1));
    stats_line(c->stats, j);

    if (s->epoch < s->epochs) {
        char label[64];
        snprintf(label, sizeof label, "epoch %d/%d", s->epoch + 1, s->epochs);
        progress_start(&c->bar, stderr, label, c->bar.total, "img", c->quiet);
    }
}

/* "m.onnx" -> "m.stats.jsonl" (malloc'd). */
static char *default_stats_path(const char *model) {
    size_t n = strlen(model);
    if (n > 5 && !strcmp(model + n - 5, ".onnx")) n -= 5;
    char *s = malloc(n + 16);
    if (s) snprintf(s, n + 16, "%.*s.stats.jsonl", (int)n, model);
    return s;
}

int cmd_nn_train(const cli_opts *o) {
    fl_err e = {0};
    int rc = CLI_FAIL;
    fl_dataset *tr = NULL, *te = NULL;
    fl_model *m = NULL;
    char *test_spec = NULL, *stats_path = NULL, *stats_tmp = NULL;
    train_ctx ctx = {.quiet = o->quiet};
    fl_scale sc;
    const fl_scale *scp = NULL;

    fl_threads_set((int)o->threads);
    uint64_t seed = o->set[F_seed] ? o->seed : cli_fresh_seed();
    cli_note("seed %llu (repeat this run with --seed %llu --threads %d)\n",
             (unsigned long long)seed, (unsigned long long)seed, fl_threads_get());

    fl_train_opts to;
    fl_train_opts_default(&to);
    to.epochs = (int)o->epochs;
    to.batch = (int)o->batch;
    to.seed = seed;
    fl_optim_kind recipe_optim = to.optim;
    if (fl_optim_parse(o->optim, &to.optim, &e) != FL_OK) return cli_fail(&e);
    if (to.optim != recipe_optim) { /* off the recipe: the optimiser's own defaults */
        fl_optim_opts oo;
        fl_optim_opts_default(&oo, to.optim);
        to.lr = oo.lr;
        to.lr_decay = 1.0f;
    }
    if (o->set[F_lr]) to.lr = (float)o->lr;
    if (o->set[F_lr_decay]) to.lr_decay = (float)o->lr_decay;
    to.momentum = (float)o->momentum;
    if (o->given[F_scale]) {
        if (fl_scale_parse(o->scale, &sc, &e) != FL_OK) return cli_usage(o->cmd, "--scale: %s", e.msg);
        scp = &sc;
    }

    stats_path = o->set[F_stats] ? strdup(o->stats) : default_stats_path(o->output);
    if (!stats_path) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* both outputs can be written: found before the data is read and the training runs */
    if (fl_file_check_writable(o->output, &e) != FL_OK ||
        fl_file_check_writable(stats_path, &e) != FL_OK)
        goto out;
    if (fl_dataset_load(o->train_data, scp, o->limit, &tr, &e) != FL_OK) goto out;
    if (o->set[F_test_data]) {
        if (strcmp(o->test_data, "none")) test_spec = strdup(o->test_data);
    } else {
        test_spec = default_test_spec(o->train_data);
    }
    if (test_spec && fl_dataset_load(test_spec, scp, o->limit, &te, &e) != FL_OK) goto out;
    if (fl_zoo_build(o->arch, tr->c, tr->h, tr->w, tr->n_classes, seed, &m, &e) != FL_OK)
        goto out;
    cli_note("%s: %lld parameters; train on %s (%lld images), test on %s (%lld images)\n",
             o->arch, (long long)fl_model_param_count(m), o->train_data, (long long)tr->n,
             te ? test_spec : "none", te ? (long long)te->n : 0LL);
    cli_note("%s, lr %g, batch %d, %d epoch%s\n", fl_optim_name(to.optim), (double)to.lr,
             to.batch, to.epochs, to.epochs == 1 ? "" : "s");

    /* The lines go to STATS.tmp as each epoch ends (a killed run keeps what it reported there)
     * and become STATS when the command ends well or is stopped; a failure removes them, so an
     * earlier run's statistics are never replaced by a half-written file. */
    if (!(stats_tmp = malloc(strlen(stats_path) + 5))) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto out;
    }
    sprintf(stats_tmp, "%s.tmp", stats_path);
    ctx.stats = fopen(stats_tmp, "w");
    if (!ctx.stats) {
        fl_fail(&e, FL_ERR_IO, "%s: cannot write the statistics file", stats_tmp);
        goto out;
    }
    char seedtxt[24];
    snprintf(seedtxt, sizeof seedtxt, "%llu", (unsigned long long)seed);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "event", "start");
    cJSON_AddStringToObject(j, "arch", o->arch);
    cJSON_AddStringToObject(j, "data", o->train_data);
    cJSON_AddStringToObject(j, "data_source", tr->source);
    if (te) {
        cJSON_AddStringToObject(j, "test_data", test_spec);
        cJSON_AddStringToObject(j, "test_data_source", te->source);
    } else {
        cJSON_AddNullToObject(j, "test_data");
        cJSON_AddNullToObject(j, "test_data_source");
    }
    cJSON_AddNumberToObject(j, "n_train", (double)tr->n);
    cJSON_AddNumberToObject(j, "n_test", te ? (double)te->n : 0);
    cJSON_AddStringToObject(j, "seed", seedtxt);
    cJSON_AddNumberToObject(j, "threads", fl_threads_get());
    cJSON_AddNumberToObject(j, "epochs", to.epochs);
    cJSON_AddNumberToObject(j, "batch", to.batch);
    cJSON_AddStringToObject(j, "optim", fl_optim_name(to.optim));
    cJSON_AddNumberToObject(j, "lr", f2d(to.lr));
    cJSON_AddNumberToObject(j, "params", (double)fl_model_param_count(m));
    cJSON_AddStringToObject(j, "version", FLARE_VERSION);
    stats_line(ctx.stats, j);

    to.progress = on_progress;
    to.on_epoch = on_epoch;
    to.user = &ctx;
    char label[64];
    snprintf(label, sizeof label, "epoch 1/%d", to.epochs);
    progress_start(&ctx.bar, stderr, label, tr->n, "img", o->quiet);
    double t0 = fl_now();
    /* Ctrl-C: a clean stop (a second one kills: SA_RESETHAND) */
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    to.stop = &stop_flag;
    fl_status st = fl_train(m, tr, te, &to, &e);
    sigaction(SIGINT, &old, NULL);
    progress_clear(&ctx.bar);
    if (st != FL_OK) goto out;
    int stopped = stop_flag && ctx.last.epoch < to.epochs, kept = ctx.last.epoch;
    if (stopped && kept == 0)
        fprintf(stderr, "stopped by Ctrl-C during epoch 1: no epoch finished, no model written\n");
    else if (fl_onnx_save(m, o->output, &e) != FL_OK)
        goto out;
    else if (stopped)
        fprintf(stderr, "stopped by Ctrl-C during epoch %d/%d: wrote %s, the model after epoch "
                "%d\n", kept + 1, to.epochs, o->output, kept);

    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "event", "end");
    if (stopped && kept == 0) cJSON_AddNullToObject(j, "model");
    else cJSON_AddStringToObject(j, "model", o->output);
    if (stopped) {
        cJSON_AddBoolToObject(j, "interrupted", 1);
        cJSON_AddNumberToObject(j, "epochs_done", kept);
    }
    cJSON_AddNumberToObject(j, "seconds", round_to(fl_now() - t0, 1e-3));
    if (kept > 0) {
        cJSON_AddNumberToObject(j, "train_loss", ctx.last.train_loss);
        cJSON_AddNumberToObject(j, "train_acc", ctx.last.train_acc);
    } else { /* stopped in epoch 1: nothing measured */
        cJSON_AddNullToObject(j, "train_loss");
        cJSON_AddNullToObject(j, "train_acc");
    }
    if (te && kept > 0) {
        cJSON_AddNumberToObject(j, "test_loss", ctx.last.test_loss);
        cJSON_AddNumberToObject(j, "test_acc", ctx.last.test_acc);
    } else {
        cJSON_AddNullToObject(j, "test_loss");
        cJSON_AddNullToObject(j, "test_acc");
    }
    stats_line(ctx.stats, j);
    if (!stopped) cli_note("wrote %s (statistics: %s)\n", o->output, stats_path);
    rc = stopped ? CLI_INTERRUPTED : CLI_OK;
out:
    progress_clear(&ctx.bar);
    if (ctx.stats && fclose(ctx.stats) != 0 && rc != CLI_FAIL) {
        fl_fail(&e, FL_ERR_IO, "%s: cannot write the statistics file", stats_tmp);
        rc = CLI_FAIL;
    }
    if (ctx.stats && rc != CLI_FAIL && rename(stats_tmp, stats_path) != 0) {
        fl_fail(&e, FL_ERR_IO, "%s: %s", stats_path, strerror(errno));
        rc = CLI_FAIL;
    }
    if (ctx.stats && rc == CLI_FAIL) unlink(stats_tmp);
    if (rc == CLI_FAIL) cli_fail(&e);
    free(test_spec);
    free(stats_path);
    free(stats_tmp);
    fl_model_free(m);
    fl_dataset_free(tr);
    fl_dataset_free(te);
    return rc;
}
