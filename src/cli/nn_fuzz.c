/* flare nn fuzz: load what the flags name, optionally select seeds, run fl_fuzz_run with a live
 * status line, print what was found (docs/nn-fuzz.md).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/fuzz.h"
#include "flare/gan.h"
#include "flare/onnx.h"
#include "flare/sa.h"
#include "flare/select.h"

static volatile int stop_flag;
static void on_sigint(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct live {
    int tty;
    double last_line;
} live;

static void on_status(const fl_fuzz_status *s, void *user) {
    live *l = user;
    if (cli_quiet) return;
    char t[32], cov[64];
    cli_fmt_duration(s->elapsed, t, sizeof t);
    if (s->total)
        snprintf(cov, sizeof cov, "%lld/%lld (%.2f%%)", (long long)s->covered, (long long)s->total,
                 100.0 * (double)s->covered / (double)s->total);
    else
        snprintf(cov, sizeof cov, "%lld", (long long)s->covered);
    char line[256];
    snprintf(line, sizeof line,
             "[%s] execs %lld (%.0f/s)  corpus %lld  coverage %s  failures %lld (%lld mutants)", t,
             (long long)s->execs, s->execs_per_s, (long long)s->corpus, cov,
             (long long)s->failures, (long long)s->failures_total);
    if (l->tty) {
        fprintf(stderr, "\r%-*.*s", cli_term_width(stderr) - 1, cli_term_width(stderr) - 1, line);
    } else if (s->elapsed - l->last_line >= 10 || l->last_line < 0) {
        fprintf(stderr, "%s\n", line);
        l->last_line = s->elapsed;
    }
}

/* The seeds: --seeds (or, resuming, the spec recorded in fuzzer_stats), then --select. */
static fl_status load_seeds(const cli_opts *o, fl_model *m, const fl_scale *scp, fl_dataset **out,
                            uint64_t seed, fl_err *e) {
    char spec[4096] = "", sc_txt[96] = "";
    fl_scale sc;
    const char *s = o->fz_seeds;
    if (!strcmp(s, "-")) {
        if (!fl_fuzz_stats_get(o->fz_output, "seeds_spec", spec, sizeof spec))
            return fl_fail(e, FL_ERR_NOTFOUND,
                           "-i -: %s/fuzzer_stats records no seeds_spec to resume from",
                           o->fz_output);
        if (fl_fuzz_stats_get(o->fz_output, "scale", sc_txt, sizeof sc_txt) && !scp) {
            if (fl_scale_parse(sc_txt, &sc, e)) return e->status;
            scp = &sc;
        }
        s = spec;
    }
    fl_dataset *d = NULL;
    fl_status st = fl_dataset_load(s, scp, o->fz_limit, &d, e);
    if (st || !o->set[F_fz_select] || !strcmp(o->fz_seeds, "-")) return *out = d, st;
    fl_select_opts so;
    fl_select_opts_default(&so);
    fl_important *imp = NULL;
    fl_dataset *tr = NULL;
    fl_selection *sel = NULL;
    if ((st = fl_select_strategy_parse(o->fz_select, &so.strategy, e))) goto out;
    so.n = o->fz_n;
    so.seed = seed;
    if (so.strategy >= FL_SEL_ST_DALL) {
        if (!o->set[F_fz_important] || !o->set[F_fz_train]) {
            st = fl_fail(e, FL_ERR_ARG, "--select %s needs --important and --train", o->fz_select);
            goto out;
        }
        if ((st = fl_important_load(o->fz_important, &imp, e)) ||
            (st = fl_dataset_load(o->fz_train, scp, o->fz_limit, &tr, e)))
            goto out;
        so.important = imp;
        so.train = tr;
    }
    if ((st = fl_select(m, d, &so, &sel, e))) goto out;
    fl_dataset *sub;
    if (!(st = fl_dataset_subset(d, sel->index, sel->n, &sub, e))) {
        cli_note("selected %lld of %lld seeds by %s\n", (long long)sel->n, (long long)d->n,
                 o->fz_select);
        fl_dataset_free(d);
        d = sub;
    }
out:
    fl_selection_free(sel);
    fl_important_free(imp);
    fl_dataset_free(tr);
    if (st) fl_dataset_free(d), d = NULL;
    *out = d;
    return st;
}

/* The command line as typed, for fuzzer_stats (malloc'd; NULL when unreadable). */
static char *join_args(void) {
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) return NULL;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i + 1 < n; i++)
        if (!buf[i]) buf[i] = ' ';
    buf[n] = 0;
    return strdup(buf);
}

/* Run the campaign with Ctrl-C handling and print what it found; CLI_OK or CLI_FAIL (the
 * error printed). */
static int run_campaign(fl_fuzz_opts *fo, fl_err *e) {
    live lv = {cli_isatty(stderr), -1};
    fo->on_status = on_status;
    fo->user = &lv;
    fo->stop = &stop_flag;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    fl_fuzz_result r;
    fl_status st = fl_fuzz_run(fo, &r, e);
    sigaction(SIGINT, &old, NULL);
    if (lv.tty && !cli_quiet) fprintf(stderr, "\n");
    if (st) return cli_fail(e);
    if (stop_flag) cli_note("stopped by Ctrl-C; the output folder is complete\n");
    if (r.seeds_dropped)
        cli_note("%lld of %lld seeds were already misclassified and not fuzzed\n",
                 (long long)r.seeds_dropped, (long long)fo->seeds->n);
    const fl_fuzz_status *s = &r.last;
    const char *what = fo->strategy == FL_FUZZ_FUZZGAN ? "failing cases" : "failing mutants";
    printf("execs      %lld in %.1f s (%.0f/s)\n", (long long)s->execs, s->elapsed, s->execs_per_s);
    printf("corpus     %lld (%lld seeds)\n", (long long)s->corpus, (long long)r.seeds_used);
    if (s->total)
        printf("coverage   %s %lld/%lld = %.2f%%\n", fo->criterion, (long long)s->covered,
               (long long)s->total, 100.0 * (double)s->covered / (double)s->total);
    else
        printf("coverage   %s %lld\n", fo->criterion, (long long)s->covered);
    printf("failures   %lld distinct (%lld misclassification, %lld disagreement, %lld non-finite); "
           "%lld %s\n",
           (long long)s->failures, (long long)r.by_oracle[0], (long long)r.by_oracle[1],
           (long long)r.by_oracle[2], (long long)s->failures_total, what);
    if (s->failures) printf("grid       %s/failures.png\n", fo->out_dir);
    printf("report     %s/report.html\n", fo->out_dir);
    return CLI_OK;
}

int cmd_nn_fuzz(const cli_opts *o) {
    fl_err e = {0};
    fl_scale sc;
    if (o->given[F_fz_scale] && fl_scale_parse(o->fz_scale, &sc, &e) != FL_OK)
        return cli_usage(o->cmd, "--scale: %s", e.msg);
    const fl_scale *scp = o->given[F_fz_scale] ? &sc : NULL;
    fl_fuzz_opts fo;
    fl_fuzz_opts_default(&fo);
    int resume = !strcmp(o->fz_seeds, "-");
    if (fl_fuzz_strategy_parse(o->fz_strategy, &fo.strategy, &e) ||
        fl_fuzz_select_parse(o->fz_queue, &fo.select, &e))
        return cli_usage(o->cmd, "%s", e.msg);
    uint64_t seed = o->fz_seed;
    char rec[32];
    if (resume && !o->set[F_fz_seed] && fl_fuzz_stats_get(o->fz_output, "seed", rec, sizeof rec)) {
        seed = strtoull(rec, NULL, 10);
    } else if (!o->set[F_fz_seed]) {
        seed = cli_fresh_seed();
    }
    cli_note("seed %llu (repeat this campaign with -s %llu -t %lld)\n", (unsigned long long)seed,
             (unsigned long long)seed, (long long)o->fz_jobs);
    fl_threads_set((int)o->fz_jobs);

    fl_model *m = NULL, *m2 = NULL, *m3 = NULL;
    fl_dataset *seeds = NULL, *train = NULL;
    fl_profile *prof = NULL;
    char *cmdline = join_args();
    int rc = CLI_FAIL;
    if (fl_onnx_load(o->fz_model, &m, &e)) goto out;
    if (o->set[F_fz_layers] &&
        (rc = cli_layers_check(o->cmd, "layers", o->fz_model, m, o->fz_layers)) != CLI_OK)
        goto done;
    rc = CLI_FAIL;
    if (o->set[F_fz_model2] && fl_onnx_load(o->fz_model2, &m2, &e)) goto out;
    if (o->set[F_fz_model3] && fl_onnx_load(o->fz_model3, &m3, &e)) goto out;
    if (o->set[F_fz_profile] && fl_profile_load(o->fz_profile, &prof, &e)) goto out;
    if (o->set[F_fz_train] && fl_dataset_load(o->fz_train, scp, o->fz_limit, &train, &e)) goto out;
    if (load_seeds(o, m, scp, &seeds, seed, &e)) goto out;

    fo.model = m;
    fo.model2 = m2;
    fo.seeds = seeds;
    fo.train = train;
    fo.profile = prof;
    fo.important = o->set[F_fz_important] ? o->fz_important : NULL;
    fo.layers = o->set[F_fz_layers] ? o->fz_layers : NULL;
    fo.criterion = o->fz_criterion;
    fo.preset = strcmp(o->fz_preset, "nlc") ? FL_PRESET_DEEPHUNTER : FL_PRESET_NLC;
    fo.alpha = o->set[F_fz_alpha] ? o->fz_alpha : -1;
    fo.beta = o->set[F_fz_beta] ? o->fz_beta : -1;
    fo.try_num = (int)o->fz_tries;
    fo.k = o->given[F_fz_k] ? (int)o->fz_k : 0; /* 0: the campaign fits 64 to memory */
    fo.tf_sigma = o->fz_tf_sigma;
    fo.tf_bound = o->fz_tf_bound;
    fo.tf_threshold = o->fz_tf_threshold;
    fo.tf_layer = o->set[F_fz_tf_layer] ? o->fz_tf_layer : NULL;
    fo.out_dir = o->fz_output;
    fo.resume = resume;
    fo.max_time = o->set[F_fz_max_time] ? o->fz_max_time : 0;
    fo.max_execs = o->set[F_fz_max_execs] ? o->fz_max_execs : 0;
    fo.seed = seed;
    fo.batch = o->given[F_fz_batch] ? (int)o->fz_batch : 0;
    fo.command_line = cmdline;
    fo.model_path = o->fz_model;
    fo.model2_path = m2 ? o->fz_model2 : NULL;
    fo.model3 = m3;
    fo.model3_path = m3 ? o->fz_model3 : NULL;
    fo.iters = o->set[F_fz_iters] ? (int)o->fz_iters : 0;
    fo.step = o->set[F_fz_step] ? o->fz_step : 0;
    fo.eps = o->fz_eps;
    fo.lambda = o->set[F_fz_lambda] ? o->fz_lambda : -1;
    fo.w_diff = o->fz_weight_diff;
    fo.n_neurons = (int)o->fz_neuron_count;
    fo.neuron_select = o->set[F_fz_neuron_select] ? o->fz_neuron_select : NULL;
    fo.nc_threshold = o->set[F_fz_nc_threshold] ? o->fz_nc_threshold : -1;
    fo.dx_constraint = !strcmp(o->fz_constraint, "light")       ? FL_DX_LIGHT
                       : !strcmp(o->fz_constraint, "occlusion") ? FL_DX_OCCLUSION
                       : !strcmp(o->fz_constraint, "blackout")  ? FL_DX_BLACKOUT
                                                                : FL_DX_NONE;
    if (sscanf(o->fz_occlusion, "%d,%d,%d,%d", &fo.dx_rect[0], &fo.dx_rect[1], &fo.dx_rect[2],
               &fo.dx_rect[3]) != 4 || fo.dx_rect[0] < 0 || fo.dx_rect[1] < 0 ||
        fo.dx_rect[2] < 1 || fo.dx_rect[3] < 1) {
        rc = cli_usage(o->cmd, "--occlusion %s: want X,Y,W,H in pixels (W, H >= 1)",
                       o->fz_occlusion);
        goto done;
    }
    fo.dx_patch = (int)o->fz_patch;
    fo.sa_kind = strcmp(o->fz_kind, "lsa") ? FL_SA_DSA : FL_SA_LSA;
    fo.sa_exact = !strcmp(o->fz_sa_grad, "exact");
    fo.max_kept = (int)o->fz_max_kept;
    fo.max_l2 = o->set[F_fz_max_l2] ? o->fz_max_l2 : 0;
    fo.seeds_spec = resume ? seeds->source : o->fz_seeds; /* resumed: keep the recorded one */
    rc = run_campaign(&fo, &e);
    goto done;
out:
    if (rc != CLI_OK) cli_fail(&e);
done:
    free(cmdline);
    fl_profile_free(prof);
    fl_dataset_free(seeds);
    fl_dataset_free(train);
    fl_model_free(m);
    fl_model_free(m2);
    fl_model_free(m3);
    return rc;
}

/* flare gan fuzz: the same campaign, its cases made by a FuzzGAN generator. */
int cmd_gan_fuzz(const cli_opts *o) {
    fl_err e = {0};
    /* resuming, what was not given is the record's (a different one is refused: src/fuzz/outdir.c) */
    const int resume = o->set[F_gf_input];
    char rec_seed[32], rec_crit[256], rec_k[32];
    const int has_seed = resume && fl_fuzz_stats_get(o->fz_output, "seed", rec_seed, sizeof rec_seed);
    const int has_crit = resume && !o->set[F_gf_criterion] &&
                         fl_fuzz_stats_get(o->fz_output, "criterion", rec_crit, sizeof rec_crit);
    const int has_k = resume && !o->set[F_gf_k] &&
                      fl_fuzz_stats_get(o->fz_output, "k", rec_k, sizeof rec_k);
    uint64_t seed = o->set[F_fz_seed] ? o->fz_seed
                    : has_seed        ? strtoull(rec_seed, NULL, 10)
                                      : cli_fresh_seed();
    cli_note("seed %llu (repeat this campaign with -s %llu -j %lld)\n", (unsigned long long)seed,
             (unsigned long long)seed, (long long)o->fz_jobs);
    fl_threads_set((int)o->fz_jobs);
    fl_model *m = NULL, *g = NULL;
    fl_gan *gen = NULL;
    char *cmdline = join_args();
    int rc = CLI_FAIL;
    if (fl_onnx_load(o->fz_model, &m, &e) || fl_onnx_load(o->gf_gen, &g, &e)) goto out;
    fl_status st = fl_gan_open(g, o->gf_gen, &gen, &e); /* takes g */
    g = NULL;
    if (st) goto out;
    fl_fuzz_opts fo;
    fl_fuzz_opts_default(&fo);
    fo.strategy = FL_FUZZ_FUZZGAN;
    fo.model = m;
    fo.gen = gen;
    fo.criterion = has_crit ? rec_crit : o->gf_criterion;
    fo.k = has_k && atoi(rec_k) > 0 ? atoi(rec_k) : (int)o->gf_k;
    fo.resume = resume;
    fo.max_suite = o->set[F_gf_max_suite] ? o->gf_max_suite : 0;
    fo.target_cov = o->gf_target;
    fo.out_dir = o->fz_output;
    fo.max_time = o->set[F_fz_max_time] ? o->fz_max_time : 0;
    fo.max_execs = o->set[F_fz_max_execs] ? o->fz_max_execs : 0;
    fo.seed = seed;
    fo.command_line = cmdline;
    fo.model_path = o->fz_model;
    fo.gen_path = o->gf_gen;
    rc = run_campaign(&fo, &e);
    goto done;
out:
    cli_fail(&e);
done:
    free(cmdline);
    fl_gan_free(gen);
    fl_model_free(g);
    fl_model_free(m);
    return rc;
}
