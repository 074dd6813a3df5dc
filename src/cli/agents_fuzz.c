/* flare agents fuzz: a coverage-guided campaign (fl_campaign_run) with a status screen.
 *
 * The command's own work is presentation: the seed line, the status (an ANSI screen redrawn in
 * place on a terminal, a plain line every few seconds otherwise), Ctrl-C / SIGTERM turned into
 * a clean stop, and the summary with the findings table at the end. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include "flare/agents/campaign.h"
#include "flare/agents/http_target.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct screen {
    int tty, lines; /* lines drawn last time (to move the cursor back over them) */
    const cli_opts *o;
} screen;

static void cov_text(const fl_campaign_stats *s, char *buf, size_t n) {
    if (s->edges_allowed > 0)
        snprintf(buf, n, "%d/%d edges (%.1f%%), intra-agent %.1f%%", s->edges_seen,
                 s->edges_allowed, 100 * s->inter_cov, s->intra_cov >= 0 ? 100 * s->intra_cov : 0);
    else
        snprintf(buf, n, "%d edges (no spec)", s->edges_seen);
}

static void kinds_text(const fl_campaign_stats *s, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n_kinds && k + 1 < n; i++)
        if (s->kind_count[i]) {
            int w = snprintf(buf + k, n - k, "%s%s %d", k ? ", " : "", s->kind_name[i],
                             s->kind_count[i]);
            if (w > 0) k += (size_t)w;
        }
}

/* One line of the status screen, cut to the terminal's width at a code-point boundary (so
 * that it never wraps, which would break the redraw). */
static void line(int width, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(int width, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t cols = 0, i = 0;
    for (; buf[i]; i++) {
        if (((unsigned char)buf[i] & 0xC0) == 0x80) continue; /* continuation byte */
        if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t') buf[i] = ' ';
        if ((int)++cols > width) break;
    }
    buf[i] = 0;
    fprintf(stderr, "\033[K%s\n", buf);
}

/* The LLM generator's account: what its calls cost and what its cases were worth. */
static void llm_text(const fl_campaign_stats *s, char *buf, size_t n) {
    snprintf(buf, n, "%lld calls (%lld failed, %lld malformed%s), %llu generated cases: "
             "%llu kept, %llu found something",
             (long long)s->llm_calls, (long long)s->llm_failures, (long long)s->llm_malformed,
             s->llm_budget_exhausted ? ", budget spent" : "", (unsigned long long)s->llm_gen_cases,
             (unsigned long long)s->llm_gen_kept, (unsigned long long)s->llm_gen_finds);
}

/* The share of the time spent running cases that went to cases that timed out. */
static double hang_pct(const fl_campaign_stats *s) {
    return s->case_seconds > 0 ? 100 * s->hang_seconds / s->case_seconds : 0;
}

static void on_status(const fl_campaign_stats *s, void *user) {
    screen *sc = user;
    char rt[32], ago[32], cov[128], kinds[512], llm[256] = "";
    cli_fmt_duration(s->run_time, rt, sizeof rt);
    if (s->llm_on) llm_text(s, llm, sizeof llm);
    cov_text(s, cov, sizeof cov);
    kinds_text(s, kinds, sizeof kinds);
    double now = (double)time(NULL);
    if (!sc->tty) {
        if (s->done) return; /* the summary follows */
        fprintf(stderr, "[%s] execs %llu (%.0f/s)  corpus %d  features %lld  %s  findings %d%s%s%s"
                "  timeouts %llu (%.0f%% of case time)%s%s\n",
                rt, (unsigned long long)s->execs, s->execs_per_sec, s->corpus_count,
                (long long)s->features, cov, s->findings, kinds[0] ? " (" : "", kinds,
                kinds[0] ? ")" : "", (unsigned long long)s->hangs, hang_pct(s),
                llm[0] ? "  llm " : "", llm);
        return;
    }
    if (sc->lines) fprintf(stderr, "\033[%dA", sc->lines); /* back to the top of the screen */
    int w = cli_term_width(stderr) - 1;
    fprintf(stderr, "\033[K\033[1mflare agents fuzz\033[0m  seed %llu  schedule %s  %lld target%s%s\n",
            (unsigned long long)s->seed, s->schedule, (long long)sc->o->jobs,
            sc->o->jobs == 1 ? "" : "s", s->done ? "  (finished)" : "  (Ctrl-C stops)");
    line(w, "     run time : %s", rt);
    line(w, "        execs : %llu  (%.1f/s)", (unsigned long long)s->execs, s->execs_per_sec);
    line(w, "       corpus : %d  (%d kept for new coverage)", s->corpus_count, s->corpus_found);
    line(w, "     coverage : %lld features, %s", (long long)s->features, cov);
    line(w, "     findings : %d distinct%s%s", s->findings, kinds[0] ? " - " : "", kinds);
    if (s->hangs || s->crashes)
        line(w, "   crash/hang : %llu crashed, %llu timed out (cases, not distinct); "
             "%.0f%% of case time lost to timeouts (-T %d ms, %s)",
             (unsigned long long)s->crashes, (unsigned long long)s->hangs, hang_pct(s),
             s->timeout_ms, s->timeout_source);
    else
        line(w, "   crash/hang : none");
    if (s->last_find_time > 0)
        line(w, "    last find : %s ago - %s",
             cli_fmt_duration(now - s->last_find_time, ago, sizeof ago), s->last_find);
    else
        line(w, "    last find : none yet");
    sc->lines = 8;
    if (llm[0]) line(w, "          llm : %s", llm), sc->lines++;
    fflush(stderr);
}

/* The command line for fuzzer_stats, rebuilt from the options (flare does not keep argv). */
static void command_line(const cli_opts *o, uint64_t seed, char *buf, size_t n) {
    size_t k = 0;
#define ADD(...) do { int w_ = snprintf(buf + k, n - k, __VA_ARGS__); \
                      if (w_ > 0 && (size_t)w_ < n - k) k += (size_t)w_; } while (0)
    ADD("flare agents fuzz -i %s -o %s -s %llu --schedule %s", o->fuzz_in, o->fuzz_out,
        (unsigned long long)seed, o->schedule);
    if (o->given[F_timeout_ms]) ADD(" -T %lld", (long long)o->timeout_ms);
    if (o->set[F_max_time]) ADD(" -V %g", o->max_time);
    if (o->set[F_max_execs]) ADD(" -E %lld", (long long)o->max_execs);
    if (o->jobs != 1) ADD(" -j %lld", (long long)o->jobs);
    if (o->set[F_max_len]) ADD(" --max-len %lld", (long long)o->max_len);
    if (o->set[F_trim_execs]) ADD(" --trim-execs %lld", (long long)o->trim_execs);
    if (o->set[F_auto_dict]) ADD(" --auto-dict %lld", (long long)o->auto_dict);
    if (o->mix_lang) ADD(" --mix-lang");
    if (o->no_spare) ADD(" --no-spare");
    if (o->set[F_dict]) ADD(" -x %s", o->dict);
    if (o->set[F_lexicon]) ADD(" --lexicon %s", o->lexicon);
    if (o->set[F_spec]) ADD(" --spec %s", o->spec);
    if (o->fresh) ADD(" --fresh");
    if (o->mem_limit) ADD(" -M %lld", (long long)o->mem_limit);
    if (o->set[F_otlp_listen]) ADD(" --otlp-listen %s", o->otlp_listen);
    if (o->set[F_otlp_file]) ADD(" --otlp-file %s", o->otlp_file);
    if (o->given[F_otlp_grace]) ADD(" --otlp-grace %lld", (long long)o->otlp_grace);
    if (o->set[F_llm_url]) { /* never the key: it is not a flag (docs/agents-llm.md) */
        ADD(" --llm %s --llm-model %s --llm-max-calls %lld", o->llm_url, o->llm_model,
            (long long)o->llm_max_calls);
        if (o->llm_max_tokens) ADD(" --llm-max-tokens %lld", (long long)o->llm_max_tokens);
        if (o->set[F_llm_cache]) ADD(" --llm-cache %s", o->llm_cache);
        ADD(" --llm-temperature %g --gen-plateau %lld --gen-share %g", o->llm_temperature,
            (long long)o->gen_plateau, o->gen_share);
        if (o->llm_embed) ADD(" --llm-embed");
        if (o->judge) ADD(" --judge --judge-threshold %g --judge-votes %lld", o->judge_threshold,
                          (long long)o->judge_votes);
    }
    if (o->set[F_target]) {
        ADD(" --target %s --response %s", o->target, o->response);
        if (o->set[F_body_template]) ADD(" --body-template %s", o->body_template);
    } else {
        ADD(" --");
        for (int i = 0; i < o->n_trailing; i++) ADD(" %s", o->trailing[i]);
    }
#undef ADD
}

int cmd_agents_fuzz(const cli_opts *o) {
    fl_err e = {0};
    uint64_t seed = o->set[F_fuzz_seed] ? o->fuzz_seed : cli_fresh_seed();
    char cmdline[4096];
    command_line(o, seed, cmdline, sizeof cmdline);

    fl_campaign_opts co;
    fl_campaign_opts_default(&co);
    co.in_dir = o->fuzz_in;
    co.out_dir = o->fuzz_out;
    co.argv = o->trailing;
    fl_http_opts ho;
    co.http = cli_http_target(o, &ho);
    co.max_seconds = o->set[F_max_time] ? o->max_time : 0;
    co.max_execs = o->set[F_max_execs] ? (uint64_t)o->max_execs : 0;
    co.seed = seed;
    co.timeout_ms = o->given[F_timeout_ms] ? (int)o->timeout_ms : 0; /* 0: calibrate */
    co.jobs = (int)o->jobs;
    co.max_len = o->set[F_max_len] ? (size_t)o->max_len : 0;
    co.trim_execs = o->trim_execs > 0 ? (int)o->trim_execs : -1;
    co.auto_dict = (int)o->auto_dict;
    co.mix_lang = (int)o->mix_lang;
    co.no_spare = (int)o->no_spare;
    co.fresh = o->fresh;
    co.mem_limit_mb = (int)o->mem_limit;
    co.dict_path = o->set[F_dict] ? o->dict : NULL;
    co.lexicon_path = o->set[F_lexicon] ? o->lexicon : NULL;
    co.spec_path = o->set[F_spec] ? o->spec : NULL;
    char llm_cache[4096]; /* the LLM in the loop (docs/agents-llm.md) */
    snprintf(llm_cache, sizeof llm_cache, "%s/llm_cache", o->fuzz_out);
    co.llm_url = o->set[F_llm_url] ? o->llm_url : NULL;
    co.llm_model = o->llm_model;
    co.llm_cache = o->set[F_llm_cache] ? o->llm_cache : llm_cache;
    co.llm_max_calls = o->llm_max_calls, co.llm_max_tokens = o->llm_max_tokens;
    co.llm_temperature = o->llm_temperature;
    co.gen_plateau = (int)o->gen_plateau, co.gen_share = o->gen_share;
    co.judge = o->judge, co.judge_threshold = o->judge_threshold, co.judge_votes = (int)o->judge_votes;
    co.llm_embed = o->llm_embed;
    co.otlp_listen = o->set[F_otlp_listen] ? o->otlp_listen : NULL;
    co.otlp_file = o->set[F_otlp_file] ? o->otlp_file : NULL;
    co.otlp_grace_ms = (int)o->otlp_grace;
    co.command_line = cmdline;
    /* resuming (-i -), the record holds for what was not given (campaign_resume.c) */
    co.given = (o->given[F_schedule] ? FL_CAMP_GIVEN_SCHEDULE : 0) |
               (o->set[F_fuzz_seed] ? FL_CAMP_GIVEN_SEED : 0);
    int resuming = !strcmp(o->fuzz_in, "-");
    if (fl_schedule_parse(o->schedule, &co.schedule, &e)) return cli_usage(o->cmd, "--schedule: %s", e.msg);
    screen sc = {.tty = cli_isatty(stderr), .o = o};
    if (!o->quiet) {
        co.on_status = on_status;
        co.user = &sc;
        co.status_every = sc.tty ? 0.25 : 5;
    }
    co.stop = &stop_flag;

    if (!resuming || o->set[F_fuzz_seed])
        cli_note("seed %llu (repeat this campaign with -s %llu%s)\n", (unsigned long long)seed,
                 (unsigned long long)seed, co.jobs > 1 ? " -j 1; -j > 1 is not repeatable" : "");
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills at once (findings are on disk) */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    fl_campaign_result r;
    fl_status st = fl_campaign_run(&co, &r, &e);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (st) return cli_fail(&e);

    const fl_campaign_stats *s = &r.stats;
    char cov[128];
    cov_text(s, cov, sizeof cov);
    printf("%s%llu cases in %.1f s (%.1f/s), corpus %d, %lld features, %s\n",
           r.stopped ? "stopped: " : "", (unsigned long long)s->execs, s->run_time,
           s->execs_per_sec, s->corpus_count, (long long)s->features, cov);
    if (s->llm_on) {
        char llm[256];
        llm_text(s, llm, sizeof llm);
        printf("llm: %s\n", llm);
    }
    printf("findings: %d distinct\n", s->findings);
    if (s->findings && fl_report_print(o->fuzz_out, stdout, &e)) return cli_fail(&e);
    printf("report: %s/report.html (and report.md)\n", o->fuzz_out);
    return CLI_OK;
}
