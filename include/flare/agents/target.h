/* target.h — running the agent system under test: a child process that reads request lines on
 * stdin and answers with event lines on stdout (the protocol of docs/agents-protocol.md).
 *
 *     fl_target_opts o;
 *     fl_target_opts_default(&o);
 *     o.timeout_ms = 2000;
 *     fl_target *t;
 *     if (fl_target_new(argv, &o, &t, &e) != FL_OK) ...   // argv[0] found on PATH, no shell
 *     for (each case c) {
 *         fl_target_run(t, c, trace, &e);                 // trace->exit says how it ended
 *     }
 *     fl_target_free(t);
 *
 * What the runner guarantees, whatever the target does:
 *   - persistent mode (default) keeps one process for many cases and restarts it after it
 *     crashed, hung, hit the byte cap or closed stdout (right after a timeout, else before the
 *     next case); fresh mode starts one process per case with TRACEPARENT and
 *     FLARE_CASE_ID in its environment;
 *   - the target runs in its own process group; on timeout the whole group gets SIGTERM, then
 *     SIGKILL after kill_grace_ms, so helpers it spawned die with it;
 *   - memory is bounded per case: at most max_bytes of stdout are read (then FL_EXIT_LIMIT and
 *     a restart), a line longer than max_line is discarded (a protocol problem), stderr goes
 *     through a fixed buffer into a capped log file;
 *   - SIGPIPE is ignored in flare's process (fl_target_new sets it once): a target that closes
 *     stdin gives a write error, which ends the case like a crash, never kills flare.
 * A failure of flare itself (fork, pipe, exec of a missing program) is an fl_status; anything
 * the target does wrong is a result recorded in the trace.
 *
 * How a case ends (fl_trace.exit, exit_status):
 *   FL_EXIT_DONE   "done" arrived; exit_status 0.
 *   FL_EXIT_CRASH  the process died before "done" with a non-zero exit code (exit_status =
 *                  the code) or by a signal (exit_status = -SIGNAL), or a request could not
 *                  be written (stdin closed).
 *   FL_EXIT_EOF    stdout closed without "done", the process exiting with status 0 or still
 *                  running; also recorded as the protocol problem "no done event".
 *   FL_EXIT_HANG   the timeout expired; exit_status = -SIGTERM, or -SIGKILL when the group
 *                  ignored SIGTERM for kill_grace_ms.
 *   FL_EXIT_LIMIT  max_bytes of stdout were read; killed like a hang.
 */
#ifndef FLARE_AGENTS_TARGET_H
#define FLARE_AGENTS_TARGET_H

#include <stdarg.h>

#include "flare/agents/protocol.h"

typedef struct fl_target_opts {
    int fresh;             /* 1: one process per case (default 0: persistent) */
    int timeout_ms;        /* per case, from sending the request (default 10000) */
    int startup_ms;        /* extra allowance for the first case of a new process, for
                              targets with slow imports (default 0) */
    int spare;             /* 1: persistent mode keeps a second process started ahead once a
                              first restart was needed, and a restart (after a timeout, a
                              crash, an exit) takes it: its start-up overlaps with the cases
                              before. Two processes of the target then live at once (default
                              0; the campaign sets it unless --no-spare) */
    int kill_grace_ms;     /* SIGTERM -> SIGKILL delay; also how long a fresh target may take
                              to exit after "done" (default 200) */
    int mem_limit_mb;      /* RLIMIT_AS of the target, 0: none (default 0) */
    size_t max_bytes;      /* stdout bytes read per case before FL_EXIT_LIMIT (default 4 MiB) */
    size_t max_line;       /* longest event line kept (default 1 MiB) */
    const char *log_dir;   /* stderr -> LOG_DIR/target.INSTANCE.log (appended, capped);
                              NULL: the target inherits flare's stderr (default NULL) */
    int keep_stderr;       /* 1: capture stderr even without log_dir (then it goes only into
                              the traces); with either, each case's stderr tail is kept in its
                              trace (fl_trace.err) (default 0) */
    int instance;          /* distinguishes the logs of parallel targets (default 0) */
    size_t max_log;        /* cap of the log file in bytes (default 1 MiB) */
    uint64_t seed;         /* traceparents for cases that have none (default 0) */
    const struct fl_http_opts *http; /* non-NULL: an HTTP target (http_target.h; argv unused,
                              timeout_ms and max_bytes apply, the process options do not) */
} fl_target_opts;

void fl_target_opts_default(fl_target_opts *o);

typedef struct fl_target fl_target;

/* Start the target (persistent mode) or check that argv[0] can be executed (fresh mode).
 * argv is NULL-terminated and copied. A program that cannot be executed fails here with
 * a message naming it. */
fl_status fl_target_new(char *const *argv, const fl_target_opts *o, fl_target **out, fl_err *e);
/* Run one case: send c (a fresh traceparent is used when c has none), read events into out
 * (cleared first) until "done", the timeout, the byte cap, EOF or the process's death.
 * Returns FL_OK whenever the case was run (its result is out->exit); an fl_status only when
 * flare could not start a process. */
fl_status fl_target_run(fl_target *t, const fl_case *c, fl_trace *out, fl_err *e);
/* Close stdin, let the target exit (kill_grace_ms), then kill its process group. */
void fl_target_free(fl_target *t);

/* Change the per-case timeout for the cases that follow (ms >= 1; the campaign sets the
 * value it calibrated from the seeds' dry run). */
/* The allowance added to the timeout for a new process's first case (its start-up). */
void fl_target_set_startup(fl_target *t, int startup_ms);
/* 1 when the last case was a persistent process's first (its time includes the process's
 * start-up, so it says little of what a case costs); 0 otherwise, fresh mode included (there
 * every case pays the start-up: it is the case's cost). */
int fl_target_first_case(const fl_target *t);
void fl_target_set_timeout(fl_target *t, int timeout_ms);
int fl_target_pid(const fl_target *t);     /* the running process, 0 when none */
long fl_target_starts(const fl_target *t); /* processes started so far */
const char *fl_target_log_path(const fl_target *t); /* NULL without log_dir */

/* Known stalls end early. Once the target has been silent (no byte on stdout) for idle_ms
 * with the whole request written, stalled(ctx, trace so far) is asked, once per silence; when
 * it answers 1 the case ends there as FL_EXIT_HANG (killed as on a timeout) instead of at the
 * timeout. A new process's silence counts from its first output: its start-up is not a
 * stall. idle_ms < 1 or stalled NULL turns it off (the default); process targets only.
 * stalled runs on the calling thread, inside fl_target_run. */
typedef int (*fl_target_stall_fn)(void *ctx, const fl_trace *t);
void fl_target_set_stall(fl_target *t, int idle_ms, fl_target_stall_fn stalled, void *ctx);
/* The last case's longest silence in ms, measured as above (0 when none was measured), and
 * whether stalled() ended it. */
double fl_target_silence_ms(const fl_target *t);
int fl_target_stalled(const fl_target *t);
/* The last case, when it timed out: ms spent after it killing the process and (persistent
 * mode) starting the next one, which happens then rather than before the next case; 0
 * otherwise. Not part of its trace's ms. */
double fl_target_restart_ms(const fl_target *t);

#endif
