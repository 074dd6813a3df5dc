/* campaign_int.h — the pieces of the campaign shared between its files: the output folder
 * (outdir.c), the queue and its power schedules (queue.c), reading saved cases (replay.c,
 * minimize.c) and the report (report*.c). Not part of the public API. */
#ifndef FLARE_CAMPAIGN_INT_H
#define FLARE_CAMPAIGN_INT_H

#include <stdio.h>

#include "core/text.h"
#include "flare/agents/campaign.h"

/* ---- a growable list of paths (paths.c): seed files, saved cases -------------------------------- */
typedef struct camp_paths {
    char **v;
    int n, cap;
} camp_paths;
int camp_paths_add(camp_paths *l, const char *p); /* copies p; -1 when out of memory */
void camp_paths_free(camp_paths *l);
void camp_paths_sort(camp_paths *l);              /* strcmp order */
/* Add the regular files under dir (hidden ones skipped) to l, then sort l; with levels > 0
 * also those in sub-folders that deep. keep, unless NULL, chooses by name which folders are
 * entered (is_dir 1) and which files are taken. Seeds (-i), the queue, saved cases. */
fl_status camp_paths_list(const char *dir, camp_paths *l, int levels,
                          int (*keep)(const char *name, int is_dir), fl_err *e);

/* ---- output folder (outdir.c) ---------------------------------------------------------------- */
/* mkdir -p. */
/* out_dir/rel into buf; FL_ERR_ARG when it does not fit. */
fl_status od_path(char *buf, size_t n, const char *out_dir, const char *rel, fl_err *e);
/* Create out/, queue/, failures/, hangs/, logs/. A folder that already holds a campaign
 * (fuzzer_stats or a non-empty queue/) is refused unless resume. */
fl_status od_prepare(const char *out_dir, int resume, fl_err *e);
/* A signature as a file name: [A-Za-z0-9._-] kept, everything else '_', at most 120 bytes;
 * a longer one is cut and ends in a hash of the whole, so distinct signatures stay distinct. */
void od_file_name(const char *sig, char *buf, size_t n);
/* Static information written with the counters. */
typedef struct od_meta {
    uint64_t seed;
    const char *schedule, *command_line, *target, *spec, *dict, *lexicon;
    int jobs, fresh, timeout_ms;
    size_t max_len;
} od_meta;
/* Write case c to out_dir/rel atomically, as a case file: its request and its expect
 * (fl_case_to_file_json; queue entries). */
fl_status od_write_case(const char *out_dir, const char *rel, const fl_case *c, fl_err *e);
/* Rewrite out/fuzzer_stats atomically. */
fl_status od_write_stats(const char *out_dir, const fl_campaign_stats *s, const od_meta *m,
                         fl_err *e);
/* "key : value" lines into parallel arrays (malloc'd strings); free with od_kv_free. */
typedef struct od_kv {
    int n;
    char **key, **val;
} od_kv;
fl_status od_kv_read(const char *path, od_kv *kv, fl_err *e);
const char *od_kv_get(const od_kv *kv, const char *key);
void od_kv_free(od_kv *kv);
/* plot_data: the header is written when the file is new (or empty); one row per call. */
extern const char od_plot_header[];
fl_status od_plot_open(const char *out_dir, FILE **f, fl_err *e);
void od_plot_row(FILE *f, const fl_campaign_stats *s);

/* ---- saved cases -------------------------------------------------------------------------------
 * A failure file holds the request's members at the top level (so `flare agents run` and
 * fl_case_parse read it as a case) and the finding around it:
 *   {"id":..., "turns":[...], "seed":..., "kind":"loop", "mast":"FM-1.3", "signature":...,
 *    "message":..., "event":N, "found":{"exec":N, "time":s, "queue_src":...}, "exit":...,
 *    "trace":{...}} (event: the index in trace.events of the event that shows the finding) */
typedef struct saved_case {
    char *path;
    fl_case *c;
    char *kind, *signature, *mast, *message, *spec; /* NULL when absent */
    double found_time;   /* "found": seconds into the campaign, exec number; -1 when absent */
    double found_exec;
    int event;           /* the finding's event (index into trace's events); -1 when none */
    fl_trace *trace;     /* the recorded trace ("trace": its events and how it ended), or NULL */
} saved_case;
fl_status saved_case_load(const char *path, saved_case *out, fl_err *e);
void saved_case_free(saved_case *s);
/* Every *.json under path (a file, or a folder searched recursively), sorted by path. */
fl_status saved_case_list(const char *path, char ***paths, int *n, fl_err *e);
void saved_case_list_free(char **paths, int n);
/* What replay takes from path: a file named itself; in a folder (recursively) the *.json files,
 * but in a queue folder given itself every entry id:...; the rest is counted in skipped[] by
 * reason (saved_skip_name). Sorted by path. */
enum { SAVED_SKIP_MIN, SAVED_SKIP_QUEUE, SAVED_SKIP_LOG, SAVED_SKIP_OTHER, SAVED_SKIP_TWICE, SAVED_SKIP_COUNT_ };
fl_status saved_case_select(const char *path, char ***paths, int *n, int skipped[SAVED_SKIP_COUNT_], fl_err *e);
const char *saved_skip_name(int why);
/* A failure file's text (malloc'd, NULL when out of memory): c's request members, then f
 * (may be NULL), found (taken over, may be NULL), spec, target and t's report (may be NULL). */
struct cJSON;
struct fl_finding;
char *saved_case_json(const fl_case *c, const fl_trace *t, const struct fl_finding *f,
                      const char *spec, const char *target, struct cJSON *found);
/* argv as one line ("python3 agent.py --x"), cut to n. */
void saved_argv_line(char *const *argv, char *buf, size_t n);

/* ---- shrinking a case (shrink.c): `flare agents min` and the campaign's trim ------------------
 * keep(ctx, c): 1 when the candidate c still passes (the removal is kept), 0 when not, -1 to
 * stop (budget spent, flare failed: the caller records why). */
typedef int (*camp_keep_fn)(void *ctx, const fl_case *c);
typedef struct camp_shrink_opts {
    int rounds;       /* passes over all levels while one shrinks something */
    size_t char_max;  /* turns of at most this many bytes get a characters pass (0: none) */
    int skip_json;    /* leave turns that are JSON objects or arrays alone */
} camp_shrink_opts;
/* Shrink c in place; FL_ERR_NOMEM is the only failure of its own. */
fl_status camp_shrink(fl_case *c, const camp_shrink_opts *o, camp_keep_fn keep, void *ctx,
                      fl_err *e);

/* ---- the corpus and its power schedules (queue.c) -------------------------------------------
 *
 * An entry is a case that was kept (a seed, or a child that added coverage) plus what the
 * schedules need to know about it. Entries never move once added (the queue holds pointers),
 * and their cases are never modified, so a worker thread may mutate one without a lock while
 * another thread adds entries. */

typedef struct q_entry {
    int id;
    fl_case *c;          /* owned, immutable */
    char name[256];      /* file name in queue/: "id:000007,src:000002,op:synonym,+cov" */
    int src;             /* parent id, -1 for seeds */
    int depth;           /* 0 for seeds, parent's + 1 */
    int n_new;           /* coverage map entries that had new bits when it was kept */
    int new_features;    /* 1 when it added a feature never seen (AFL's "+cov") */
    uint64_t path;       /* hash of its trace's behaviour (queue.c: q_path_hash) */
    uint64_t picks;      /* times the schedule chose it */
    uint64_t children;   /* children run */
    uint64_t kept;       /* children kept for coverage */
    uint64_t finds;      /* children that produced a new finding */
    uint64_t bad;        /* children that crashed or timed out (queue.c: hang-prone entries) */
    double child_ms;     /* their cost (q_child), all together */
    double prior_n, prior_bad, prior_ms; /* the same, inherited from its parent as pseudo-
                                            children (queue.c: hang-prone lineages) */
    uint32_t *feat;      /* coverage-map entries its trace touched (owned) */
    int n_feat;
    size_t cost;         /* bytes of its turns: the smaller, the better a representative */
    int favored;         /* in the current minimal cover of all features (AFL's favored) */
    uint64_t cov_sig;    /* q_cov_sig of its trace: what a trimmed case must still give */
    int trim;            /* 0: to be trimmed when first picked; 1: trimmed, trimming, or not
                            to be (seeds, resumed entries, traces that did not end in done) */
    fl_case *untrimmed;  /* the case before the trim (a worker may still be mutating it) */
} q_entry;

#define Q_PATH_BITS 16

typedef struct q_queue {
    q_entry **e;
    int n, cap;
    int n_seeds;
    fl_schedule sched;
    uint32_t *path_hits; /* executions that followed each (hashed) behaviour path */
    q_entry **top;       /* per map entry: the cheapest queue entry that touches it */
    uint32_t *seen;      /* map entries with a top entry, in the order first seen */
    int n_seen, cap_seen;
    int dirty;           /* top changed since the last cull */
    int n_favored;
    uint64_t children, bad; /* over all entries: the campaign's average crash/hang rate */
    double child_ms;        /* ... and cost per child */
} q_queue;

fl_status q_init(q_queue *q, fl_schedule s, fl_err *e);
void q_free(q_queue *q);
/* Add an entry (takes ownership of c; copies feat, the map entries of its trace); returns
 * it, or NULL when out of memory (c is then not taken). */
q_entry *q_add(q_queue *q, fl_case *c, int src, int n_new, int new_features, uint64_t path,
               const uint32_t *feat, int n_feat);
/* Count a child of parent that crashed or timed out (bad) or not, and what it cost: 1 for a
 * case, Q_HANG_COST for a timeout (a constant rather than the measured time, so that a
 * campaign stays a function of its seed). */
#define Q_HANG_COST 100
void q_child(q_queue *q, q_entry *parent, int bad, double cost);
/* Count one execution along `path`. */
void q_hit(q_queue *q, uint64_t path);
/* Choose the next entry to fuzz and how many children to make of it (its energy). */
q_entry *q_pick(q_queue *q, fl_rng *r, int *energy);
/* Another entry for splicing (not `not`), or NULL when the queue has one entry. */
q_entry *q_other(const q_queue *q, fl_rng *r, const q_entry *not_this);

/* The coverage a trace gives, as one hash: its map entries and hit-count buckets (order
 * ignored) and how it ended. A trimmed entry must give the same (AFL's trim compares the
 * trace's checksum the same way). */
struct fl_agfeature;
uint64_t q_cov_sig(const struct fl_agfeature *fv, int nf, int exit);
/* A cheaper case for x (its trim): x->c becomes c (taken), the old one is kept until q_free,
 * and x becomes the top-rated entry where it is now the cheapest. */
void q_retrim(q_queue *q, q_entry *x, fl_case *c);

/* A hash of what a trace did (agents, edges, tools, choices, errors and how it ended, in
 * order; contents ignored): two traces with the same hash took the same path. */
uint64_t q_path_hash(const fl_trace *t);

/* ---- the running campaign (campaign.c, campaign_seeds.c) -------------------------------------- */
#include <pthread.h>

#include "flare/agents/agcov.h"
#include "flare/agents/mutate.h"
#include "flare/agents/oracle.h"
#include "flare/agents/otlp_recv.h"
#include "flare/agents/spec.h"
#include "flare/agents/target.h"
#include "flare/index.h"

/* Signatures saved so far: "kind/signature" strings, indexed by their hash. */
typedef struct sig_set {
    char **v;        /* in the order they came */
    int64_t n, cap;
    fl_index ix;     /* hash of v[i] -> i */
} sig_set;
int sig_set_add(sig_set *s, const char *kind, const char *sig); /* 1 new, 0 known, -1 oom */
int sig_set_has(const sig_set *s, const char *kind, const char *sig);
void sig_set_free(sig_set *s);

#define CAMP_OK_BUCKETS 32
/* Executions per inter-agent handoff, by name (edge_hits.c; edges.json in the output folder,
 * for the report's agent graph). */
typedef struct camp_edge {
    char *from, *to;
    uint64_t execs;  /* executions whose trace took it (once per execution) */
    uint64_t stamp;  /* the last execution counted */
} camp_edge;
typedef struct camp_edges {
    camp_edge *v;
    int n, cap;
    fl_index ix;     /* hash of (from, to) -> position in v */
    uint64_t stamp;
} camp_edges;
/* Count t's edges (fl_agtrace_edges); -1 when out of memory. */
int camp_edges_count(camp_edges *h, const fl_trace *t, const fl_spec *spec);
fl_status camp_edges_write(const camp_edges *h, const char *out_dir, fl_err *e); /* edges.json */
fl_status camp_edges_read(camp_edges *h, const char *path, fl_err *e);  /* adds its counts */
void camp_edges_free(camp_edges *h);

typedef struct camp {
    const fl_campaign_opts *o; /* &eff */
    fl_campaign_opts eff;    /* the caller's options, with a resumed campaign's record */
    od_kv rec;               /* that record (fuzzer_stats; n 0: none); eff's strings point here */
    uint64_t salt;           /* resumed: the recorded execs, mixed into the random streams */
    fl_spec *spec;
    char *spec_abs;          /* realpath of the spec, recorded in failure files */
    char *dict_abs, *lexicon_abs; /* realpaths of -x and --lexicon, recorded in fuzzer_stats */
    fl_agcov *cov;
    fl_mutator_ctx *mut;
    fl_autodict *autod;      /* words of kept cases' traces (NULL: off), under mu */
    fl_oracle_opts oo;
    q_queue q;
    sig_set sigs;
    camp_edges edges;        /* executions per handoff (edges.json) */
    pthread_mutex_t mu;
    fl_campaign_stats st;
    od_meta meta;
    char target_desc[512];   /* the command as one line */
    double t0;               /* fl_now() at the start of this session */
    double wall0;            /* Unix time at the start of this session */
    double run_time0;        /* seconds of earlier sessions (resume) */
    uint64_t execs0;         /* execs of earlier sessions */
    uint64_t reserved;       /* exec numbers handed out in this session */
    double last_stats, last_status;
    FILE *plot;
    struct camp_llm *llm;    /* generator and judge (campaign_llm.c), NULL: none */
    fl_otlp_src *otlp;       /* spans for cases (--otlp-listen / --otlp-file), NULL: none */
    int timeout_ms;          /* in force: -T, the cap during a calibrating dry run, then the
                                calibrated or resumed value (campaign_seeds.c) */
    double dry_slowest_ms;   /* slowest seed of the dry run that ended with done, a process's
                                first case left out (its start-up is no case's cost) */
    double dry_first_ms;     /* slowest first case of a process in the dry run (start-up
                                included): sets the start-up allowance */
    uint64_t ok_hist[CAMP_OK_BUCKETS]; /* cases that ended with done, by time: bucket k holds
                                          times below 2^k x 10 us (camp_ok_ms) */
    uint64_t n_ok;
    uint64_t *stalls;        /* stall points of known hangs (campaign_stall.c) */
    int n_stalls, cap_stalls;
    uint64_t quiet_hist[CAMP_OK_BUCKETS]; /* normal cases by their longest silence (as ok_hist) */
    uint64_t n_quiet;
    int stop;                /* 1: no new case starts */
    fl_status err;           /* the first failure of flare itself (output folder, memory) */
    fl_err errmsg;
} camp;

/* Where a case came from. A child (parent set) is kept when it adds coverage; a seed or a
 * resumed queue entry (name set) is always kept, under that name. */
typedef struct camp_origin {
    q_entry *parent;        /* child: the entry it was mutated from */
    const q_entry *other;   /* child: the splice partner, when op is "splice" */
    const char *op;         /* child: the operator's name for the file name */
    const char *name;       /* seed / resumed entry: its queue file name */
    int src;                /* resumed entry: its parent id (-1: a seed) */
    int write;              /* seed: write the queue file (resumed ones exist already) */
} camp_origin;

/* Per-case bookkeeping, under cp->mu: coverage, queue, findings, statistics, periodic stats
 * files. Takes ownership of c. */
void camp_process(camp *cp, fl_case *c, const fl_trace *t, const camp_origin *org);
/* Replay and min (replay.c): the spec for a saved case (given, else the recorded one; loaded
 * once per path into *spec / *loaded), and a target with the usual options. */
fl_status saved_spec(const char *given, const char *recorded, fl_spec **spec, char **loaded,
                     fl_err *e);
fl_status saved_target(const fl_target_setup *ts, fl_target **t, fl_err *e);
/* Write fuzzer_stats / plot_data and call on_status when due (force: now). Under cp->mu. */
void camp_periodic(camp *cp, int force);
/* The LLM generator and judge (campaign_llm.c; no-ops without --llm). Under cp->mu;
 * camp_llm_next and camp_llm_judge release it while their HTTP request is out, so shared
 * state read before them may have changed after them (queue entries stay valid). */
typedef struct camp_llm camp_llm;
fl_status camp_llm_start(camp *cp, fl_err *e);
void camp_llm_free(camp *cp);
void camp_llm_stats(camp *cp);
/* A generated case for the next execution (op:llm), or NULL: mutate as usual. */
fl_case *camp_llm_next(camp *cp, fl_rng *r);
/* Append the judge's finding when no rule fired and the case added coverage (r > 0). */
void camp_llm_judge(camp *cp, const fl_case *c, const fl_trace *t, int r, fl_findings *f);
/* The span source of --otlp-listen / --otlp-file (campaign_otlp.c): started in setup, its
 * counters copied into cp->st before fuzzer_stats is written (under cp->mu). */
fl_status camp_otlp_start(camp *cp, fl_err *e);
void camp_otlp_stats(camp *cp);
/* cp->eff from o and, resuming (`-i -`), the record in fuzzer_stats (campaign_resume.c). */
fl_status camp_resume_opts(camp *cp, const fl_campaign_opts *o, fl_err *e);
/* Under cp->mu: the time within which all but 1 % of the campaign's cases that ended with
 * done ended (rounded up to a power of two times 10 us; 0 before the first). A percentile
 * rather than the slowest: one case slowed down by the machine must not set the tight
 * timeout of known hangs (campaign_run.c). */
double camp_ok_ms(const camp *cp);
/* Known hangs cut early (campaign_stall.c), all under cp->mu but camp_stall_check, the
 * target's stall callback (fl_target_set_stall; ctx is cp), which takes it. learn: t timed
 * out, its stall point is a known hang's; note: a normal case's longest silence; idle_ms: the
 * silence after which a case at a known stall point ends (0: none known yet). */
uint64_t camp_stall_hash(const fl_trace *t);
void camp_stall_learn(camp *cp, const fl_trace *t);
void camp_stall_note(camp *cp, double silence_ms);
int camp_stall_idle_ms(const camp *cp);
int camp_stall_check(void *ctx, const fl_trace *t);
/* Under cp->mu: a run's fl_target_restart_ms, time lost to its timeout beyond the case. */
void camp_restart_add(camp *cp, double ms);
/* Under cp->mu: a run nobody judges (a trim candidate, a calibration run) in the counters: an
 * execution, its time in case_time (and hang_time when it timed out), its restart. */
void camp_count_unjudged(camp *cp, const fl_target *t, const fl_trace *tr);
/* Under cp->mu: should no new case start (a limit reached, stopped, failed)? */
int camp_stopping(camp *cp);
/* The campaign's trim (campaign_trim.c): called under cp->mu when x is picked untrimmed and
 * camp_trim_budget is > 0; runs without the lock on the worker's target t. */
void camp_trim(camp *cp, q_entry *x, fl_target *t, fl_trace *tr, fl_rng *trace_rng);
/* Under cp->mu: the trim runs one entry may take now (0: the trim share is spent). */
int camp_trim_budget(const camp *cp);
/* Record the first failure of flare itself and stop the campaign. */
void camp_fail(camp *cp, const fl_err *e);
/* Load the seeds of in_dir (or, resuming, the queue and the saved findings of out_dir) and
 * run each once. A worker's target and trace are passed in. */
/* The calibrated timeout for a slowest normal seed of slowest_ms (FL_CAMPAIGN_TIMEOUT_*). */
int camp_timeout_calibrate(double slowest_ms);
fl_status camp_load_corpus(camp *cp, fl_target *t, fl_trace *tr, fl_rng *trace_rng, fl_err *e);
/* The seeds of in_dir read and parsed, then dropped: an empty folder or a bad seed fails the
 * campaign before anything is created in -o. */
fl_status camp_seeds_check(const char *in_dir, size_t *longest, fl_err *e); /* bytes, all turns */
/* The default --max-len for a longest seed of `longest` bytes (FL_CAMPAIGN_LEN_*). */
size_t camp_max_len_default(size_t longest);

#endif
