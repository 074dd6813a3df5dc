/* agcov.h — behavioural coverage of a multi-agent system: which features of agent behaviour a
 * set of traces has exercised, so that the fuzzer keeps the inputs that made the system do
 * something new (docs/agents-coverage.md).
 *
 * It works like AFL's edge coverage: every feature of a trace is hashed into a fixed map of
 * FL_AGCOV_MAP_SIZE bytes; a "virgin" map remembers which (feature, hit-count bucket) bits
 * have been seen. Checking a trace costs O(events log events) and never grows with the corpus
 * (except the output clustering, O(clusters * dim)).
 *
 *     fl_agcov *cov;
 *     fl_agcov_new(spec_or_NULL, NULL, &cov, &e);        // NULL opts: defaults
 *     int n_new, r = fl_agcov_check(cov, trace, &n_new); // 0 nothing new, 1 new hit counts,
 *     if (r > 0) fl_agcov_commit(cov, trace, NULL);      // 2 new features (AFL's has_new_bits)
 *     fl_agcov_report_get(cov, &rep);                    // inter/intra-agent coverage, counts
 *
 * Feature families (fl_agfeat_kind):
 *   edge     inter-agent handoffs a->b (messages, the implicit user->first agent and the
 *            producer->output edge), with AFL hit-count buckets per edge per trace;
 *   tool     (agent, tool called);  branch (agent, point, choice);
 *   tool2 / tool3   per-agent tool-call bigrams / trigrams;
 *   path3    three consecutive edges;
 *   error    error-event kinds (agent + leading token), failed tools, how the case ended
 *            (crash, hang, eof, byte limit), protocol problems;
 *   turns    turn-count and message-count buckets;
 *   cluster  semantic cluster of the final output (hashed character n-gram embedding, leader
 *            clustering with a cosine radius; a new cluster is a new feature), or "none" /
 *            "empty".
 */
#ifndef FLARE_AGENTS_AGCOV_H
#define FLARE_AGENTS_AGCOV_H

#include "flare/agents/protocol.h"
#include "flare/agents/spec.h"

#define FL_AGCOV_MAP_SIZE (1u << 16)

typedef enum fl_agfeat_kind {
    FL_AGF_EDGE = 0,
    FL_AGF_TOOL,
    FL_AGF_BRANCH,
    FL_AGF_TOOL2,
    FL_AGF_TOOL3,
    FL_AGF_PATH3,
    FL_AGF_ERROR,
    FL_AGF_TURNS,
    FL_AGF_CLUSTER,
    FL_AGF_COUNT_
} fl_agfeat_kind;

/* "edge", "tool", "branch", "tool2", "tool3", "path3", "error", "turns", "cluster". */
const char *fl_agfeat_name(fl_agfeat_kind k);

/* AFL's hit-count bucket of a count: 0 -> 0, 1 -> 1, 2 -> 2, 3 -> 4, 4-7 -> 8, 8-15 -> 16,
 * 16-31 -> 32, 32-127 -> 64, 128+ -> 128 (one bit per bucket, as afl-fuzz's count_class). */
uint8_t fl_agcov_bucket(uint64_t count);
/* The bucket's range as text: "1", "4-7", "128+" ("0" for 0). */
const char *fl_agcov_bucket_name(uint8_t bucket);

typedef struct fl_agcov_opts {
    int embed_dim;      /* embedding dimensions (default 512; 16..4096) */
    int embed_ngram;    /* character n-gram length (default 3; 1..8) */
    float cluster_cos;  /* an output joins the first cluster whose leader is at cosine >= this
                           (default 0.5); otherwise it starts a new cluster */
    int max_clusters;   /* when reached, outputs join the nearest cluster (default 1024) */
    unsigned families;  /* bitmask of (1u << fl_agfeat_kind) to collect (default: all) */
} fl_agcov_opts;

void fl_agcov_opts_default(fl_agcov_opts *o);

typedef struct fl_agcov fl_agcov;

/* spec may be NULL (raw counts only); it must outlive the coverage object. */
fl_status fl_agcov_new(const fl_spec *spec, const fl_agcov_opts *o, fl_agcov **out, fl_err *e);
void fl_agcov_free(fl_agcov *c);

/* Would t add coverage? Returns 2 when it has a feature never seen (or its output starts a new
 * cluster), 1 when it only reaches a new hit-count bucket of a known feature, 0 otherwise, -1
 * when out of memory. *n_new (may be NULL): map entries with new bits. Does not modify c. */
int fl_agcov_check(const fl_agcov *c, const fl_trace *t, int *n_new);
/* The same, and adds t's features (and its output's cluster) to c. */
int fl_agcov_commit(fl_agcov *c, const fl_trace *t, int *n_new);

/* An external embedding for the output clustering (e.g. an OpenAI-compatible /v1/embeddings,
 * llm.h) instead of the built-in n-grams: fills *v (malloc'd, freed by the caller) with *n
 * floats and returns 0, or returns -1 to use the built-in embedding for that output. Vectors
 * are folded into embed_dim dimensions and normalised. Set it before the first commit: a
 * cluster set does not mix well with vectors of another embedding. */
typedef int (*fl_agcov_embedder)(void *user, const char *text, float **v, int *n);
void fl_agcov_set_embedder(fl_agcov *c, fl_agcov_embedder fn, void *user);

typedef struct fl_agcov_report {
    int64_t cases;              /* traces committed */
    int features;               /* distinct map entries seen */
    int bits;                   /* distinct (entry, bucket) pairs seen */
    int by_kind[FL_AGF_COUNT_]; /* distinct entries by the family that first set them */
    int clusters;               /* output clusters */
    int has_spec;
    int edges_seen, edges_total;/* allowed spec edges seen / declared (spec only) */
    double inter;               /* edges_seen / edges_total; -1 without a spec */
    double intra;               /* mean over agents with declared tools/choices of seen/declared;
                                   -1 without a spec or when no agent declares any */
} fl_agcov_report;

void fl_agcov_report_get(const fl_agcov *c, fl_agcov_report *r);
/* Spec agent a: tools + choices seen / declared (0/0 without a spec). */
void fl_agcov_agent(const fl_agcov *c, int a, int *seen, int *declared);
/* Was spec edge i (index into spec->edges) seen? */
int fl_agcov_edge_seen(const fl_agcov *c, int i);
/* Was item `item` of spec agent a (fl_spec_item_tool / fl_spec_item_choice) seen? */
int fl_agcov_item_seen(const fl_agcov *c, int a, int item);

/* The features of one trace, for reports: malloc'd array (*out), count returned (-1: out of
 * memory). is_new is relative to c's current state (2 new feature, 1 new bucket, 0 known). */
typedef struct fl_agfeature {
    fl_agfeat_kind kind;
    uint32_t index;   /* map entry */
    uint8_t bucket;   /* hit-count bucket bit (1 for presence features) */
    uint8_t is_new;
    char text[160];   /* "edge Master->Worker x2", "tool2 Worker: search>calculate", ... */
} fl_agfeature;
int fl_agcov_features(const fl_agcov *c, const fl_trace *t, fl_agfeature **out);

/* ---- trace views shared with the oracles ------------------------------------------------
 * The acting agent of an event: a message's sender; a tool call / result / branch / error's
 * agent; an output's producer (its own "agent" field when the target gives one, otherwise the
 * agent holding control: the receiver of the last message, or its sender when that message
 * went to "user", or the agent of the last tool/branch/error event; with nothing before it,
 * the spec's entry agent, or NULL without a spec). NULL for "done". */
const char *fl_agtrace_actor(const fl_trace *t, int i, const fl_spec *spec);
/* The agent holding control after the first n events (the rule above; with nothing yet, the
 * spec's entry agent or NULL). fl_agtrace_holder(t, t->n_events, spec) is who was working
 * when a case crashed or hung. */
const char *fl_agtrace_holder(const fl_trace *t, int n, const fl_spec *spec);

/* The handoff edges of a trace in order: every message from -> to, then, when the first event
 * attributed to an agent is not a message from "user", an implicit user -> that agent edge in
 * front, and producer -> "output" for every output event. Malloc'd; count returned (-1: out
 * of memory). Strings point into t (or are the literals "user", "output"). */
typedef struct fl_agedge {
    const char *from, *to;
    int event; /* index of the event, -1 for the implicit first edge */
} fl_agedge;
int fl_agtrace_edges(const fl_trace *t, const fl_spec *spec, fl_agedge **out);

/* Agent turns: maximal runs of consecutive events (message, tool call/result, branch, error)
 * with the same acting agent, not counting the user's own messages. */
int fl_agtrace_turns(const fl_trace *t);
/* Message events (all, including the user's). */
int fl_agtrace_messages(const fl_trace *t);
/* Index of the last output event, or -1. */
int fl_agtrace_last_output(const fl_trace *t);

/* 64-bit FNV-1a of s (NUL-terminated) continuing from h, then a 0xff separator, so that
 * ("ab","c") and ("a","bc") differ. Start with FL_AGHASH_INIT. */
#define FL_AGHASH_INIT FL_FNV_BASIS
uint64_t fl_aghash_str(uint64_t h, const char *s);
uint64_t fl_aghash_u64(uint64_t h, uint64_t v);
uint64_t fl_aghash_final(uint64_t h); /* avalanche (splitmix64 finaliser) */

/* ---- output embedding and clustering (src/agents/cover/embed.c) -------------------------
 * The text is decoded as UTF-8 (each invalid byte becomes U+FFFD), ASCII letters are
 * lower-cased, runs of white space become one space, runs of digits become one "0", and the
 * result is padded with a space at both ends. Every n-gram of code points is hashed to one of
 * `dim` dimensions with a hashed sign (the hashing trick); the vector is L2-normalised.
 * Returns the number of n-grams (0: the text was empty or white space only; v is all zero). */
int fl_embed_text(const char *s, size_t len, int ngram, float *v, int dim);

/* Leader clustering (Hartigan 1975, "Clustering Algorithms", ch. 3): a vector joins the
 * first-created cluster whose leader is at cosine >= min_cos, else it leads a new cluster
 * (once max_clusters exist: the nearest). Leaders never move, so assignments are
 * deterministic and never change. */
typedef struct fl_clusters fl_clusters;
fl_clusters *fl_clusters_new(int dim, float min_cos, int max_clusters);
void fl_clusters_free(fl_clusters *c);
int fl_clusters_count(const fl_clusters *c);
/* Nearest cluster of unit vector v and its cosine (-1 and *cos = -2 when there is none). */
int fl_clusters_nearest(const fl_clusters *c, const float *v, float *cos);
/* The cluster v would join: the first within the radius; -1 when v would start a new one;
 * when the table is full, the nearest. Does not modify c. */
int fl_clusters_find(const fl_clusters *c, const float *v);
/* The same, and creates the new cluster led by v when needed. -2: out of memory. */
int fl_clusters_assign(fl_clusters *c, const float *v);

#endif
