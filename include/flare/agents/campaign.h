/* campaign.h — the fuzzing campaign of `flare agents`: the loop that drives an agent system
 * with mutated user instructions, keeps the ones that made it do something new, and saves
 * every distinct failure; and the two tools around it, replay and minimisation.
 *
 *     fl_campaign_opts o;
 *     fl_campaign_opts_default(&o);
 *     o.in_dir = "seeds"; o.out_dir = "out"; o.argv = target_argv; o.max_execs = 10000;
 *     fl_campaign_result r;
 *     if (fl_campaign_run(&o, &r, &e) != FL_OK) ...;   // out/ now holds queue/, failures/,
 *                                                      // hangs/, fuzzer_stats, plot_data,
 *                                                      // report.md, report.html
 *
 * One round of the loop (docs/agents-campaign.md has the details and the reasons):
 *
 *     pick a queue entry (power schedule) ─► mutate it `energy` times ─► run each child
 *        ▲                                                                 │
 *        └── queue/id:000123,src:000045,op:synonym,+cov ◄── new coverage? ─┤
 *                          failures/<kind>/<signature>.json ◄── finding? ──┘
 *
 * The output folder follows AFL++ (queue file names, fuzzer_stats as "key : value" lines,
 * plot_data as CSV), so tools and habits carry over. Everything found is written the moment it
 * is found, atomically (temporary file + rename): a campaign killed with SIGKILL loses nothing
 * but the last few seconds of statistics, and `in_dir = "-"` resumes it.
 *
 * With jobs = 1 a campaign is a function of its seed and the target's behaviour: the same -s
 * gives the same queue names. With jobs > 1 the N target processes finish in whatever order
 * the machine decides, so runs are not repeatable (AFL++ parallel instances are not either).
 */
#ifndef FLARE_AGENTS_CAMPAIGN_H
#define FLARE_AGENTS_CAMPAIGN_H

#include <signal.h>
#include <stdio.h>

#include "flare/agents/protocol.h"
#include "flare/agents/otlp_recv.h"

/* ---- power schedules ---------------------------------------------------------------------- */
typedef enum fl_schedule {
    FL_SCHED_EXPLORE = 0, /* default: favour new, rarely fuzzed entries that added much coverage */
    FL_SCHED_EXPLOIT,     /* favour entries whose children were kept or failed most often */
    FL_SCHED_NONE         /* no coverage feedback: mutate the seeds only, the corpus never grows */
} fl_schedule;

fl_status fl_schedule_parse(const char *s, fl_schedule *out, fl_err *e);
const char *fl_schedule_name(fl_schedule s);

/* ---- the campaign ---------------------------------------------------------------------------- */
/* A snapshot of the campaign's counters, for the status screen (on_status) and the result. */
#define FL_CAMPAIGN_KINDS 24
typedef struct fl_campaign_stats {
    double start_time;     /* Unix time the (first) session started */
    double run_time;       /* seconds fuzzed, over every session of a resumed campaign */
    uint64_t execs;        /* cases run, over every session */
    double execs_per_sec;  /* this session */
    int corpus_count;      /* queue entries (seeds included) */
    int corpus_found;      /* entries kept for new coverage (not seeds) */
    int64_t features;      /* distinct coverage features seen */
    int edges_seen, edges_allowed; /* allowed inter-agent edges covered / declared (spec) */
    double inter_cov;      /* edges_seen / edges_allowed; -1 without a spec */
    double intra_cov;      /* per-agent (tools + choices) seen / declared, averaged; -1 */
    int findings;          /* distinct findings (signatures) saved, hangs included */
    int n_kinds;           /* findings per kind: kind_name[i] found kind_count[i] times */
    char kind_name[FL_CAMPAIGN_KINDS][24];
    int kind_count[FL_CAMPAIGN_KINDS];
    uint64_t kind_first_exec[FL_CAMPAIGN_KINDS]; /* execs when the kind was first found (this
                                                    session; 0: not yet) */
    uint64_t crashes, hangs; /* raw counts of cases that crashed / timed out */
    double case_seconds;     /* wall time of every case run, over every session */
    double hang_seconds;     /* of which cases that timed out: hang_seconds / case_seconds is
                                the share of the time lost to timeouts */
    double restart_seconds;  /* of hang_seconds (and case_seconds): killing the target after
                                a timeout and starting it again (fl_target_restart_ms) */
    int timeout_ms;          /* the per-case timeout in force (given, calibrated or resumed) */
    int startup_ms;          /* added for a new process's first case: FL_CAMPAIGN_TIMEOUT_MULT
                                x the dry run's slowest first case (start-up included); 0 when
                                none was measured (fresh mode, an HTTP target) */
    uint64_t hangs_known;    /* timeouts under the tight timeout with a known hang signature */
    uint64_t hang_confirms;  /* ... with a new one, run again with the whole timeout */
    uint64_t hangs_stalled;  /* of hangs_known: ended by the stall check, silent at a known
                                hang's stall point (campaign_stall.c) */
    uint64_t execs_trim;     /* runs spent trimming queue entries (counted in execs too) */
    uint64_t trim_bytes;     /* bytes the trim removed from queue entries, all together */
    int trimmed;             /* queue entries the trim made shorter */
    int auto_dict;           /* tokens in the automatic dictionary from the traces now */
    uint64_t auto_dict_learnt; /* ... learnt this session, evicted ones included */
    char timeout_source[16]; /* "flag" (-T), "calibrated" (the seeds' dry run), "resumed" */
    double last_cov_time;    /* Unix time of the last entry kept (0: none this campaign) */
    double last_find_time;   /* Unix time of the last new finding (0: none) */
    char last_find[160];     /* "loop Master<->Checker" of the last finding */
    uint64_t execs_full_edges; /* execs when every allowed edge had been covered; 0: not yet */
    uint64_t execs_last_find;  /* execs when the last new finding was saved */
    uint64_t execs_goal;       /* execs when the goal (opts) was reached; 0: not (yet) */
    int otlp_on;               /* an OTLP source is configured: */
    long otlp_spans, otlp_late;/* spans received; spans that came after their case ended */
    int llm_on;                /* an LLM is configured (llm.h): */
    int64_t llm_calls, llm_tokens, llm_cache_hits;
    int64_t llm_failures;      /* requests that failed (HTTP, refused, timeout, budget) */
    int64_t llm_malformed;     /* replies without usable content (generator, judge) */
    uint64_t llm_gen_cases;    /* generated cases run (op:llm) */
    uint64_t llm_gen_kept;     /* ... kept in the queue for new coverage */
    uint64_t llm_gen_finds;    /* ... that produced a new finding */
    int llm_budget_exhausted;
    uint64_t seed;             /* the campaign's seed (resumed: the recorded one) */
    char schedule[16];         /* its power schedule's name (resumed: the recorded one) */
    size_t max_len;            /* the --max-len in force (given, derived or resumed) */
    int done;                  /* 1 in the final on_status call */
} fl_campaign_stats;

/* Timeout calibration (AFL++'s): without -T the seeds run with the cap, and the timeout is
 * MULT times the slowest seed that ended normally, rounded up to 100 ms, within [FLOOR, CAP]. */
#define FL_CAMPAIGN_TIMEOUT_MULT 5
#define FL_CAMPAIGN_TIMEOUT_FLOOR 100
#define FL_CAMPAIGN_TIMEOUT_CAP 10000

/* The default --max-len, as libFuzzer derives -max_len from its corpus: the floor is its
 * kMinDefaultLen (4096), so a short seed set still reaches long-input defects. */
#define FL_CAMPAIGN_LEN_MULT 4
#define FL_CAMPAIGN_LEN_FLOOR 4096
#define FL_CAMPAIGN_LEN_CAP 8192

/* The trim (AFL's trim_case): at most this many runs per queue entry by default. */
#define FL_CAMPAIGN_TRIM_EXECS 48
/* Trimming takes at most this share (percent) of the executions done so far; an entry picked
 * while it is spent is fuzzed as it is and trimmed at a later pick (docs/agents-campaign.md). */
#define FL_CAMPAIGN_TRIM_SHARE 10

#define FL_CAMP_GIVEN_SCHEDULE 1u
#define FL_CAMP_GIVEN_SEED 2u

typedef void (*fl_campaign_status_fn)(const fl_campaign_stats *s, void *user);

typedef struct fl_campaign_opts {
    const char *in_dir;      /* seeds folder; "-" resumes the campaign in out_dir */
    const char *out_dir;
    char *const *argv;       /* target command, NULL-terminated (run directly, no shell) */
    const struct fl_http_opts *http; /* or an HTTP target (http_target.h); argv then NULL */
    double max_seconds;      /* 0: no limit (-V) */
    uint64_t max_execs;      /* 0: no limit (-E) */
    uint64_t seed;           /* -s: every random decision derives from it */
    unsigned given;          /* FL_CAMP_GIVEN_* bits: options set explicitly. Resuming (in_dir
                                "-"), the record in fuzzer_stats replaces the others (and a
                                NULL spec_path, dict_path, lexicon_path or a 0 timeout_ms); a
                                given one that differs from it is warned about */
    int timeout_ms;          /* per case (-T); 0 (the default): calibrated from the seeds' dry
                                run (FL_CAMPAIGN_TIMEOUT_*), or the record when resuming */
    int jobs;                /* target instances in parallel (-j), default 1 */
    size_t max_len;          /* --max-len: a case's bytes over all its turns, mutants cut to it;
                                0: FL_CAMPAIGN_LEN_MULT x the longest seed within
                                [FL_CAMPAIGN_LEN_FLOOR, FL_CAMPAIGN_LEN_CAP] (resumed: recorded) */
    int fresh;               /* one target process per case */
    int no_spare;            /* 1: no process started ahead for restarts (fl_target_opts.spare,
                                --no-spare); 0 (the default): one, after the first restart */
    int trim_execs;          /* runs to trim a kept child while its coverage stays the same;
                                0: FL_CAMPAIGN_TRIM_EXECS, -1: no trimming */
    int auto_dict;           /* tokens of the automatic dictionary from the traces (mutate.h:
                                fl_autodict, --auto-dict); 0 (the default): none. Off by
                                default: on the example it made guidance worse (docs) */
    int mix_lang;            /* fl_mutate_opts.mix_lang (--mix-lang): 1 lets every mutator
                                write the other language; 0 (the default): turns keep theirs */
    int mem_limit_mb;        /* RLIMIT_AS of the target; 0: none */
    const char *otlp_listen; /* OTLP/HTTP receiver address (--otlp-listen), may be NULL */
    const char *otlp_file;   /* OTLP JSON-lines file to follow (--otlp-file), may be NULL */
    int otlp_grace_ms;       /* wait for a case's spans after it ended (default 1000) */
    const char *dict_path;   /* AFL dictionary (-x), may be NULL */
    const char *lexicon_path;/* extra synonym groups (--lexicon, docs/agents-mutators.md), may be NULL */
    const char *spec_path;   /* agent spec (--spec), may be NULL; "none": none, even resuming */
    fl_schedule schedule;    /* -p */
    const char *command_line;/* recorded in fuzzer_stats */
    double stats_every;      /* seconds between fuzzer_stats / plot_data updates (default 2) */
    double status_every;     /* seconds between on_status calls (default 0.25) */
    fl_campaign_status_fn on_status; /* may be NULL */
    void *user;
    /* A goal, for measuring how fast a schedule gets somewhere (the bench): every finding kind
     * in goal_kinds (bits 1u << fl_finding_kind, oracle.h) found at least once and, when
     * goal_edges, every allowed edge of the spec covered. stats.execs_goal records when it
     * was reached; stop_at_goal ends the campaign there. goal_kinds 0 and goal_edges 0: none. */
    unsigned goal_kinds;
    int goal_edges;
    int stop_at_goal;
    /* When set and nonzero (a signal handler sets it), the campaign stops at the next case
     * boundary and finishes normally: final statistics and report are written. */
    const volatile sig_atomic_t *stop;
    int write_report;        /* write report.md / report.html at the end (default 1) */
    /* The LLM in the loop (llm.h, docs/agents-llm.md): off unless llm_url is set. */
    const char *llm_url, *llm_model, *llm_cache; /* cache may be NULL */
    int64_t llm_max_calls, llm_max_tokens;       /* budget; 0: no limit */
    double llm_temperature;  /* default 0.7 */
    int llm_timeout_ms;      /* per request; 0: the client's default */
    int llm_embed;           /* cluster outputs with the server's /v1/embeddings */
    int gen_plateau;         /* ask the generator after this many execs without a new feature */
    double gen_share;        /* share of executions that use a generated input */
    int gen_batch;           /* instructions per generator request (default 4) */
    int judge;               /* judge cases that passed the rule oracles and added coverage */
    double judge_threshold;  /* default 0.8 */
    int judge_votes;         /* default 1 */
} fl_campaign_opts;

void fl_campaign_opts_default(fl_campaign_opts *o);

typedef struct fl_campaign_result {
    fl_campaign_stats stats;
    int stopped;             /* 1 when *stop ended it */
} fl_campaign_result;

/* Run a campaign until max_seconds, max_execs, the goal (stop_at_goal) or *stop. An interrupted or
 * finished campaign is a success: the status is an error only when the campaign could not
 * start or could not write its output folder (a target that crashes, hangs or prints garbage
 * is what the campaign is looking for, never an error). */
fl_status fl_campaign_run(const fl_campaign_opts *o, fl_campaign_result *r, fl_err *e);

/* Write out_dir/report.md and report.html from what the folder holds (fuzzer_stats, plot_data,
 * failures/, hangs/): the campaign calls it at the end, and it can be rerun at any time. */
fl_status fl_report_write(const char *out_dir, fl_err *e);
/* The findings of out_dir as a plain-text table on f (kind, MAST, signature, file, input),
 * for terminals and logs. */
fl_status fl_report_print(const char *out_dir, FILE *f, fl_err *e);

/* ---- the target of replay and minimisation ----------------------------------------------- */
/* How to run the target that saved cases are run on again: a command or an HTTP target, the
 * process options, and where its spans come from. Fields left zero: the default timeout, a
 * persistent process without a memory limit, no span source. */
typedef struct fl_target_setup {
    char *const *argv;       /* target command, NULL-terminated (run directly, no shell) */
    const struct fl_http_opts *http; /* or an HTTP target (http_target.h); argv then unused */
    int timeout_ms;          /* per case; <= 0: the target's default (10000) */
    int fresh;               /* one target process per case */
    int mem_limit_mb;        /* RLIMIT_AS of the target; 0: none */
    fl_otlp_src_opts otlp;   /* the target's spans (otlp_recv.h; listen and file may be NULL);
                                with a source, each case runs under a new trace id */
} fl_target_setup;

/* The timeout a campaign recorded (fuzzer_stats' timeout_ms) for path: a campaign's folder, or
 * a file or folder inside one (out/, out/failures/crash/x.json, out/queue ...), looked for up to
 * three folders up. 0 when there is none: the caller's default applies. */
int fl_campaign_recorded_timeout(const char *path);

/* ---- replay ------------------------------------------------------------------------------- */
typedef struct fl_replay_opts {
    fl_target_setup target; /* how to run the target */
    const char *spec_path;  /* rules for the oracles; default: the one recorded in the file */
    const char *junit_path; /* JUnit XML report, may be NULL */
    FILE *log;              /* one line per case (may be NULL) */
} fl_replay_opts;

typedef struct fl_replay_result {
    int n_cases;    /* cases replayed */
    int n_failing;  /* cases that produce a finding now: n_still + n_new */
    int n_still;    /* saved failures (a file with a "kind") that still produce a finding */
    int n_same;     /* ... of which with the saved signature itself */
    int n_new;      /* cases that did not fail before (queue entries, plain cases) and do now */
    int n_fixed;    /* saved failures that produce no finding any more */
    int n_passed;   /* cases that did not fail before and still pass */
    int n_skipped;  /* files under the folder that were not replayed ... */
    char skipped_why[320]; /* ... "2 shrunk copies (*.min.json), 1 target logs (logs/)" or "" */
} fl_replay_result;

/* Re-run the cases under each of the n paths: a file (any name), or a folder searched
 * recursively for *.json (out/failures, out/hangs, or out/ itself, whose queue/ and logs/ are
 * skipped), or a queue folder given itself (every entry id:...), in the order given. What was
 * left out is counted with reasons. An empty selection is not an error here (n_cases 0); the
 * CLI makes it one. */
fl_status fl_replay_run(const char *const *paths, int n, const fl_replay_opts *o,
                        fl_replay_result *r, fl_err *e);

/* ---- minimisation --------------------------------------------------------------------------- */
typedef struct fl_min_opts {
    fl_target_setup target;  /* how to run the target, as for replay */
    const char *spec_path;
    const char *signature;   /* keep this one; default: the file's, else the first finding */
    const char *out_path;    /* default: case.json -> case.min.json */
    int max_runs;            /* budget of target runs (default 2000) */
    FILE *log;
} fl_min_opts;

typedef struct fl_min_result {
    int runs;
    size_t bytes_before, bytes_after;  /* all turns together */
    int turns_before, turns_after;
    char signature[256];
    char out_path[4096];
} fl_min_result;

/* Shrink the case in `path` while the run still produces the same signature: drop turns, then
 * sentences, then words (delta debugging, chunks halving), until nothing more can go. */
fl_status fl_minimize(const char *path, const fl_min_opts *o, fl_min_result *r, fl_err *e);

#endif
