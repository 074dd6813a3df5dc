/* Module agents/target — running the system under test on one case: a child process speaking
 * JSON lines (this file) or an HTTP endpoint (http_target.c, chosen through
 * fl_target_opts.http), both filling a trace. Depends on protocol. API:
 * include/flare/agents/target.h, http_target.h; docs/agents-protocol.md, agents-http.md.
 *
 * The target runner: one child process speaking JSON lines, driven one case at a time.
 *
 * A case is one poll() loop over up to three pipes — the request still to be written to the
 * child's stdin, its stdout (events), its stderr (to the log) — with the case's deadline as
 * poll's timeout. Writing is non-blocking too: a long request to a child that is busy
 * writing a long answer would otherwise deadlock both sides on full pipes. Reading goes
 * through one fixed buffer and a line buffer bounded by max_line, so a flooding child costs
 * max_bytes of reading and no memory; it is then killed.
 *
 * Persistent mode amortises fork+exec over many cases (AFL's forkserver idea, with the
 * process boundary at the target's own request loop); the per-case cost is a write, a
 * poll, a read and the JSON of the lines. Fresh mode pays a fork+exec per case but gives
 * the child the case id and trace context in its environment.
 *
 * A spare (fl_target_opts.spare): once a persistent target has had to be restarted, the next
 * process is started ahead, while cases run, and a restart swaps it in: the kill and restart
 * after a timeout then cost the kill alone, and a target that is slow to start (an
 * interpreter loading a framework) is ready when it is needed. The spare's exec is checked
 * when it is taken, not when it is started, so starting it never waits.
 *
 * Killing is by process group (the child calls setpgid(0, 0)), so whatever the target spawned
 * dies with it. The leader is reaped after its group is SIGKILLed: while it is an unreaped
 * zombie its pid, and so the group id, cannot be reused by an unrelated process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flare/agents/http_target.h"
#include "flare/agents/target.h"

extern char **environ;

enum { RBUF = 65536 };

/* A started child: its pid and our ends of its pipes. rep: the exec report (close-on-exec;
 * EOF when exec succeeded, an errno when it failed), still open while nobody has read it. */
typedef struct proc {
    pid_t pid; /* 0: none */
    int in, out, err, rep;
    double born; /* fl_now() at fork */
} proc;

struct fl_target {
    fl_target_opts o;
    char **argv;       /* copy, NULL-terminated */
    proc spare;        /* started ahead (fl_target_opts.spare), or pid 0 */
    pid_t pid;         /* 0: no process */
    int fd_in, fd_out, fd_err; /* -1 when closed */
    int fresh_start;   /* the process has not finished a case yet (startup_ms applies) */
    long starts;
    fl_rng rng;
    char *line;        /* the incomplete line, at most max_line bytes */
    size_t line_len;
    int line_skip;     /* discarding the rest of an over-long line */
    char *rbuf;        /* RBUF bytes, shared by stdout and stderr reads */
    char *log_path;
    fl_trace *cur;     /* the case running: its stderr is kept there too */
    int log_fd;
    size_t log_size;
    fl_http *http;     /* an HTTP target (http_target.c): no process, no pipes */
    int idle_ms;       /* fl_target_set_stall: silence after which stall_fn is asked */
    fl_target_stall_fn stall_fn;
    void *stall_ctx;
    double silence_ms; /* the last case's longest silence */
    double restart_ms; /* the last case's kill and restart after its timeout */
    int stalled;       /* the last case was ended by stall_fn */
    int first_case;    /* the last case was a persistent process's first */
    double born;       /* when the running process was forked */
};

void fl_target_opts_default(fl_target_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_ms = 10000;
    o->kill_grace_ms = 200;
    o->max_bytes = (size_t)4 << 20;
    o->max_line = (size_t)1 << 20;
    o->max_log = (size_t)1 << 20;
}

void fl_target_set_timeout(fl_target *t, int timeout_ms) {
    if (!t || timeout_ms < 1) return;
    t->o.timeout_ms = timeout_ms;
    fl_http_set_timeout(t->http, timeout_ms);
}

void fl_target_set_startup(fl_target *t, int startup_ms) {
    if (t && startup_ms >= 0) t->o.startup_ms = startup_ms;
}

int fl_target_first_case(const fl_target *t) { return t->first_case; }

void fl_target_set_stall(fl_target *t, int idle_ms, fl_target_stall_fn stalled, void *ctx) {
    if (!t) return;
    t->idle_ms = stalled ? idle_ms : 0;
    t->stall_fn = idle_ms > 0 ? stalled : NULL;
    t->stall_ctx = ctx;
}

double fl_target_silence_ms(const fl_target *t) { return t->silence_ms; }
int fl_target_stalled(const fl_target *t) { return t->stalled; }
double fl_target_restart_ms(const fl_target *t) { return t->restart_ms; }

int fl_target_pid(const fl_target *t) { return (int)t->pid; }
long fl_target_starts(const fl_target *t) { return t->starts; }
const char *fl_target_log_path(const fl_target *t) { return t->log_path; }

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000.0 * (time_t)(ms / 1000)) * 1e6)};
    nanosleep(&ts, NULL);
}

/* ---- the stderr log ------------------------------------------------------------------------ */
static void log_write(fl_target *t, const char *buf, size_t n) {
    if (t->log_fd < 0 || t->log_size >= t->o.max_log) return;
    if (n > t->o.max_log - t->log_size) {
        static const char cut[] = "\n[flare: log capped here]\n";
        n = t->o.max_log - t->log_size;
        if (write(t->log_fd, buf, n) < 0 || write(t->log_fd, cut, sizeof cut - 1) < 0) {}
        t->log_size = t->o.max_log;
        return;
    }
    if (write(t->log_fd, buf, n) > 0) t->log_size += n;
}

static void log_note(fl_target *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_note(fl_target *t, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) log_write(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void drain_stderr(fl_target *t) {
    for (;;) {
        ssize_t n = read(t->fd_err, t->rbuf, RBUF);
        if (n > 0) {
            log_write(t, t->rbuf, (size_t)n);
            if (t->cur) fl_trace_stderr_add(t->cur, t->rbuf, (size_t)n); /* out of memory: not kept */
        }
        else if (n < 0 && errno == EINTR) continue;
        else {
            if (n == 0) close_fd(&t->fd_err);
            return;
        }
    }
}

/* ---- processes ------------------------------------------------------------------------------ */
/* The environment of a fresh target: flare's, with TRACEPARENT and FLARE_CASE_ID replaced. */
static char **fresh_env(const char *tp, const char *id, char *tpvar, char *idvar) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = malloc((n + 3) * sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TRACEPARENT=", 12) && strncmp(environ[i], "FLARE_CASE_ID=", 14))
            env[k++] = environ[i];
    sprintf(tpvar, "TRACEPARENT=%s", tp);
    sprintf(idvar, "FLARE_CASE_ID=%s", id);
    env[k++] = tpvar;
    env[k++] = idvar;
    env[k] = NULL;
    return env;
}

/* fd as the child's fd `to`, open across exec (dup2 of an fd onto itself would keep the
 * close-on-exec flag of our pipes: possible when flare was started with stdin closed). */
static int dup_to(int fd, int to) {
    return fd == to ? fcntl(fd, F_SETFD, 0) : dup2(fd, to);
}

/* The child side of spawn: only async-signal-safe calls until exec. */
static void child(fl_target *t, int in, int out, int err, int report, char **env) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); /* flare ignores it; an ignored signal survives exec */
    if (dup_to(in, 0) < 0 || dup_to(out, 1) < 0 || (err >= 0 && dup_to(err, 2) < 0)) goto fail;
    if (t->o.mem_limit_mb > 0) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)t->o.mem_limit_mb << 20;
        if (setrlimit(RLIMIT_AS, &rl) < 0) goto fail;
    }
    if (env) execvpe(t->argv[0], t->argv, env);
    else execvp(t->argv[0], t->argv);
fail:;
    int code = errno;
    if (write(report, &code, sizeof code) < 0) {}
    _exit(127);
}

/* Read p's exec report: FL_OK when exec succeeded; else the child is reaped, p emptied. */
static fl_status exec_ok(fl_target *t, proc *p, fl_err *e) {
    int code = 0;
    ssize_t n;
    while ((n = read(p->rep, &code, sizeof code)) < 0 && errno == EINTR) {}
    close_fd(&p->rep);
    if (n <= 0) return FL_OK;
    /* exec failed: the child wrote errno and exits with 127 */
    while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
    close_fd(&p->in);
    close_fd(&p->out);
    close_fd(&p->err);
    p->pid = 0;
    return fl_fail(e, FL_ERR_IO, "cannot run target '%s': %s", t->argv[0], strerror(code));
}

/* Fork and exec a child into p; wait for its exec report only when wait_exec (else p->rep
 * stays open for exec_ok). */
static fl_status start_proc(fl_target *t, const fl_case *c, proc *p, int wait_exec, fl_err *e) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2] = {-1, -1};
    char tpvar[80], idvar[40], **env = NULL;
    fl_status st = FL_OK;
    *p = (proc){0, -1, -1, -1, -1, 0};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
        ((t->o.log_dir || t->o.keep_stderr) && pipe2(err, O_CLOEXEC) < 0)) {
        st = fl_fail(e, FL_ERR_IO, "target %s: pipe: %s", t->argv[0], strerror(errno));
        goto done;
    }
    if (c && t->o.fresh && !(env = fresh_env(c->traceparent, c->id, tpvar, idvar))) {
        st = fl_fail(e, FL_ERR_NOMEM, "target %s: out of memory", t->argv[0]);
        goto done;
    }
    pid_t pid = fork();
    if (pid < 0) {
        st = fl_fail(e, FL_ERR_IO, "target %s: fork: %s", t->argv[0], strerror(errno));
        goto done;
    }
    if (pid == 0) child(t, in[0], out[1], err[1], rep[1], env);
    setpgid(pid, pid); /* also here: no window in which a kill(-pid) could miss the child */
    close_fd(&rep[1]);
    *p = (proc){pid, in[1], out[0], err[0], rep[0], fl_now()};
    in[1] = out[0] = err[0] = rep[0] = -1;
    fcntl(p->in, F_SETFL, O_NONBLOCK);
    fcntl(p->out, F_SETFL, O_NONBLOCK);
    if (p->err >= 0) fcntl(p->err, F_SETFL, O_NONBLOCK);
    if (wait_exec && (st = exec_ok(t, p, e)) != FL_OK) goto done;
done:
    free(env);
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&err[i]);
        close_fd(&rep[i]);
    }
    return st;
}

/* Kill a spare that was never used (the target is freed). */
static void drop_spare(fl_target *t) {
    proc *p = &t->spare;
    if (!p->pid) return;
    kill(-p->pid, SIGKILL);
    while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
    close_fd(&p->in);
    close_fd(&p->out);
    close_fd(&p->err);
    close_fd(&p->rep);
    p->pid = 0;
}

/* Make a process the target's: the spare when there is one (and its exec worked), else a new
 * one. After the first restart, the next spare is started at once. */
static fl_status spawn(fl_target *t, const fl_case *c, fl_err *e) {
    proc p = {0, -1, -1, -1, -1, 0};
    fl_status st = FL_ERR_IO;
    if (t->spare.pid) {
        fl_err e2 = {0};
        p = t->spare;
        t->spare.pid = 0;
        if ((st = exec_ok(t, &p, &e2)) != FL_OK) p.pid = 0; /* retried below, with its error */
    }
    if (!p.pid && (st = start_proc(t, c, &p, 1, e)) != FL_OK) return st;
    t->pid = p.pid;
    t->fd_in = p.in, t->fd_out = p.out, t->fd_err = p.err;
    t->born = p.born;
    t->fresh_start = 1;
    t->starts++;
    t->line_len = 0;
    t->line_skip = 0;
    if (!t->o.fresh) /* fresh mode would fill the capped log with one line per case */
        log_note(t, "[flare: started %s, pid %d]\n", t->argv[0], (int)p.pid);
    if (t->o.spare && !t->o.fresh && t->starts > 1) {
        fl_err e2 = {0}; /* no spare: the next restart starts a process as without one */
        if (start_proc(t, NULL, &t->spare, 0, &e2) != FL_OK) t->spare.pid = 0;
    }
    return FL_OK;
}

/* Wait up to ms for the leader to exit, without reaping it. 1 when it has exited. */
static int wait_exit(pid_t pid, double ms) {
    double end = fl_now() + ms / 1000, step = 0.05;
    for (;;) {
        siginfo_t si;
        si.si_pid = 0;
        int rc = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0 || si.si_pid == pid) return 1; /* exited (or no such child any more) */
        if (fl_now() >= end) return 0;
        sleep_ms(step);
        if (step < 5) step *= 2;
    }
}

/* End the process: optionally SIGTERM first (then up to kill_grace_ms), then SIGKILL to the
 * group, reap the leader. Returns the wait status, and in *sent the signal flare used last
 * (0 when the leader had exited by itself). */
static int stop(fl_target *t, int term, double wait_first_ms, int *sent) {
    int status = 0;
    *sent = 0;
    if (!t->pid) return 0;
    if (term && wait_first_ms <= 0) {
        /* An aborted case (hang, byte cap, restart): signal before closing stdin, or a target
         * that exits at the end of its input could win the race and look as if it had ended
         * by itself. */
        kill(-t->pid, SIGTERM);
        *sent = SIGTERM;
        close_fd(&t->fd_in);
        if (!wait_exit(t->pid, t->o.kill_grace_ms)) *sent = SIGKILL;
    } else {
        close_fd(&t->fd_in);
        if (!wait_exit(t->pid, wait_first_ms)) {
            if (term) {
                kill(-t->pid, SIGTERM);
                *sent = SIGTERM;
                if (!wait_exit(t->pid, t->o.kill_grace_ms)) *sent = SIGKILL;
            } else {
                *sent = SIGKILL;
            }
        }
    }
    kill(-t->pid, SIGKILL); /* stragglers of the group; the zombie leader keeps its id */
    while (waitpid(t->pid, &status, 0) < 0 && errno == EINTR) {}
    if (t->fd_err >= 0) drain_stderr(t);
    if (WIFSIGNALED(status))
        log_note(t, "[flare: pid %d killed by signal %d]\n", (int)t->pid, WTERMSIG(status));
    else if (WEXITSTATUS(status) || !t->o.fresh)
        log_note(t, "[flare: pid %d exited with status %d]\n", (int)t->pid, WEXITSTATUS(status));
    close_fd(&t->fd_out);
    close_fd(&t->fd_err);
    t->pid = 0;
    return status;
}

/* ---- life cycle ---------------------------------------------------------------------------- */
/* Whether execvp would find an executable `prog` (a path, or a name searched on PATH). */
static fl_status find_program(const char *prog, fl_err *e) {
    if (strchr(prog, '/')) {
        if (access(prog, X_OK) == 0) return FL_OK;
        return fl_fail(e, FL_ERR_IO, "cannot run target '%s': %s", prog, strerror(errno));
    }
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char buf[4096];
        if (len + strlen(prog) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s%s%s", (int)len, p, len ? "/" : "", prog);
            struct stat sb;
            if (access(buf, X_OK) == 0 && stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) return FL_OK;
        }
        if (!colon) break;
        p = colon + 1;
    }
    return fl_fail(e, FL_ERR_NOTFOUND, "cannot run target '%s': not found on PATH", prog);
}

fl_status fl_target_new(char *const *argv, const fl_target_opts *o, fl_target **out, fl_err *e) {
    *out = NULL;
    if (o->http) {
        fl_target *t = calloc(1, sizeof *t);
        if (!t) return fl_fail(e, FL_ERR_NOMEM, "target: out of memory");
        t->o = *o;
        t->fd_in = t->fd_out = t->fd_err = t->log_fd = -1;
        fl_rng_seed(&t->rng, o->seed);
        fl_status st = fl_http_new(o->http, o->timeout_ms, o->max_bytes, &t->http, e);
        if (st) free(t);
        else *out = t;
        return st;
    }
    if (!argv || !argv[0] || !argv[0][0])
        return fl_fail(e, FL_ERR_ARG, "target: no command given");
    if (o->timeout_ms < 1 || o->max_bytes < 1 || o->max_line < 1 || o->kill_grace_ms < 0)
        return fl_fail(e, FL_ERR_ARG, "target: timeout, max_bytes, max_line must be positive");
    /* A write to a target that has closed stdin must be an error, not flare's death. */
    signal(SIGPIPE, SIG_IGN);
    fl_target *t = calloc(1, sizeof *t);
    if (!t) return fl_fail(e, FL_ERR_NOMEM, "target: out of memory");
    t->o = *o;
    t->fd_in = t->fd_out = t->fd_err = t->log_fd = -1;
    t->spare = (proc){0, -1, -1, -1, -1, 0};
    fl_rng_seed(&t->rng, o->seed);
    int n = 0;
    while (argv[n]) n++;
    t->argv = calloc((size_t)n + 1, sizeof *t->argv);
    t->rbuf = malloc(RBUF);
    t->line = malloc(o->max_line);
    if (!t->argv || !t->rbuf || !t->line) goto nomem;
    for (int i = 0; i < n; i++)
        if (!(t->argv[i] = strdup(argv[i]))) goto nomem;
    if (o->log_dir) {
        size_t len = strlen(o->log_dir) + 48;
        if (!(t->log_path = malloc(len))) goto nomem;
        snprintf(t->log_path, len, "%s/target.%d.log", o->log_dir, o->instance);
        t->log_fd = open(t->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        struct stat sb;
        if (t->log_fd < 0 || fstat(t->log_fd, &sb) < 0) {
            fl_status st = fl_fail(e, FL_ERR_IO, "target log %s: %s", t->log_path, strerror(errno));
            fl_target_free(t);
            return st;
        }
        t->log_size = (size_t)sb.st_size;
    }
    /* Persistent: start now, so that a wrong command fails before any case. Fresh: the same
     * early message from a search of PATH, without running the target. */
    fl_status st = o->fresh ? find_program(t->argv[0], e) : spawn(t, NULL, e);
    if (st != FL_OK) {
        fl_target_free(t);
        return st;
    }
    *out = t;
    return FL_OK;
nomem:
    fl_target_free(t);
    return fl_fail(e, FL_ERR_NOMEM, "target: out of memory");
}

void fl_target_free(fl_target *t) {
    if (!t) return;
    int sent;
    t->cur = NULL; /* the last case's trace may be gone already */
    stop(t, 1, t->o.kill_grace_ms, &sent);
    drop_spare(t);
    fl_http_free(t->http);
    if (t->argv)
        for (int i = 0; t->argv[i]; i++) free(t->argv[i]);
    free(t->argv);
    free(t->rbuf);
    free(t->line);
    free(t->log_path);
    if (t->log_fd >= 0) close(t->log_fd);
    free(t);
}

/* ---- one case ------------------------------------------------------------------------------- */
/* Split p[0..n) into lines and feed them; *done = 1 once "done" was among them. Lines after
 * it in the same read are fed too: the trace flags them as after done. */
static fl_status feed(fl_target *t, const char *p, size_t n, double t_ms, fl_trace *tr, int *done) {
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        if (t->line_skip) {
            /* the tail of a line already reported as too long */
        } else if (t->line_len + k > t->o.max_line) {
            fl_trace_problem(tr, "line longer than %zu bytes (discarded)", t->o.max_line);
            t->line_skip = 1;
            t->line_len = 0;
        } else {
            memcpy(t->line + t->line_len, p, k);
            t->line_len += k;
        }
        if (!nl) break;
        if (!t->line_skip) {
            int d = 0;
            if (fl_trace_feed_line(tr, t->line, t->line_len, t_ms, &d) != FL_OK)
                return FL_ERR_NOMEM;
            *done |= d;
        }
        t->line_len = 0;
        t->line_skip = 0;
        p += k + 1;
        n -= k + 1;
    }
    return FL_OK;
}

/* Bytes already waiting on stdout before a request are left over from the last case. */
static void drain_stale(fl_target *t, fl_trace *tr) {
    size_t stale = 0;
    ssize_t n;
    while ((n = read(t->fd_out, t->rbuf, RBUF)) > 0 && stale < t->o.max_bytes) stale += (size_t)n;
    if (stale)
        fl_trace_problem(tr, "%zu bytes of output arrived between cases (after the previous done)",
                         stale);
    t->line_len = 0;
    t->line_skip = 0;
}

/* The request line: the case as JSON with a trace context, and a newline. */
static char *request(fl_target *t, const fl_case *c, fl_case *tmp, size_t *len) {
    const fl_case *send = c;
    if (!c->traceparent[0]) {
        *tmp = *c; /* shallow: only the traceparent differs */
        fl_case_new_trace(tmp, &t->rng);
        send = tmp;
    }
    char *s = fl_case_to_json(send);
    if (!s) return NULL;
    *len = strlen(s);
    s[(*len)++] = '\n'; /* over the NUL: the line is sent by length */
    return s;
}

fl_status fl_target_run(fl_target *t, const fl_case *c, fl_trace *tr, fl_err *e) {
    fl_trace_clear(tr);
    t->silence_ms = 0, t->stalled = 0, t->restart_ms = 0, t->first_case = 0;
    t->cur = tr;
    fl_case tmp;
    size_t req_len = 0, req_off = 0;
    char *req = request(t, c, &tmp, &req_len);
    if (!req) return fl_fail(e, FL_ERR_NOMEM, "target: out of memory");
    const fl_case *sent_case = c->traceparent[0] ? c : &tmp;
    int sent;
    if (t->http) {
        fl_status st = fl_http_run(t->http, sent_case, tr, e);
        free(req);
        return st;
    }

    /* A persistent target that died between cases is restarted silently: its last case
     * had ended with done. */
    if (t->pid && wait_exit(t->pid, 0)) {
        log_note(t, "[flare: target exited between cases; restarting]\n");
        stop(t, 0, 0, &sent);
    }
    if (!t->pid) {
        fl_status st = spawn(t, sent_case, e);
        if (st != FL_OK) {
            free(req);
            return st;
        }
    } else {
        drain_stale(t, tr);
    }
    t->first_case = t->fresh_start && !t->o.fresh;
    /* the log marks where each case starts, so a traceback can be matched to its finding */
    log_note(t, "[flare: case %s]\n", sent_case->id[0] ? sent_case->id : "(no id)");

    double t0 = fl_now();
    /* the start-up allowance is for a process still starting: a spare started long ago has
     * used it up, and a hang on its first case costs the timeout alone */
    double startup_left = t->fresh_start ? t->o.startup_ms - 1000 * (t0 - t->born) : 0;
    double limit_ms = t->o.timeout_ms + (startup_left > 0 ? startup_left : 0);
    int done = 0, eof = 0, write_failed = 0, over = 0;
    /* Silence (fl_target_set_stall): quiet0 is when the current one began, in ms from t0; -1
     * while it is not counted (the request not all written yet, or a new process that has not
     * spoken yet: its start-up is no stall). asked: stall_fn answered for this silence. */
    double quiet0 = -1;
    int asked = 0;
    while (!done && !eof && !over) {
        double now_ms = 1000 * (fl_now() - t0), left = limit_ms - now_ms;
        if (left <= 0) break;
        int wait_ms = (int)left + 1;
        if (t->stall_fn && quiet0 >= 0 && !asked) {
            double idle_left = t->idle_ms - (now_ms - quiet0);
            if (idle_left <= 0) {
                asked = 1;
                if (now_ms - quiet0 > t->silence_ms) t->silence_ms = now_ms - quiet0;
                if (t->stall_fn(t->stall_ctx, tr)) {
                    t->stalled = 1;
                    break;
                }
            } else if (idle_left < left) {
                wait_ms = (int)idle_left + 1;
            }
        }
        struct pollfd p[3];
        int np = 0, i_out = -1, i_err = -1, i_in = -1;
        p[np] = (struct pollfd){.fd = t->fd_out, .events = POLLIN};
        i_out = np++;
        if (t->fd_err >= 0) p[np] = (struct pollfd){.fd = t->fd_err, .events = POLLIN}, i_err = np++;
        if (req_off < req_len && !write_failed)
            p[np] = (struct pollfd){.fd = t->fd_in, .events = POLLOUT}, i_in = np++;
        int rc = poll(p, (nfds_t)np, wait_ms);
        if (rc < 0 && errno != EINTR) {
            free(req);
            stop(t, 1, 0, &sent); /* mid-case: the process cannot serve another one */
            return fl_fail(e, FL_ERR_IO, "target: poll: %s", strerror(errno));
        }
        if (rc <= 0) continue;
        if (i_in >= 0 && p[i_in].revents) {
            ssize_t n = write(t->fd_in, req + req_off, req_len - req_off);
            if (n > 0) req_off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR) write_failed = 1;
            if (req_off == req_len && quiet0 < 0 && !t->fresh_start) quiet0 = 1000 * (fl_now() - t0);
        }
        if (i_err >= 0 && p[i_err].revents) drain_stderr(t);
        if (p[i_out].revents) {
            for (;;) {
                ssize_t n = read(t->fd_out, t->rbuf, RBUF);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) break; /* EAGAIN: all read */
                if (n == 0) {
                    eof = 1;
                    break;
                }
                double at = 1000 * (fl_now() - t0);
                if (quiet0 >= 0 && at - quiet0 > t->silence_ms) t->silence_ms = at - quiet0;
                if (req_off == req_len) quiet0 = at, asked = 0; /* output: progress */
                size_t take = (size_t)n;
                if (tr->bytes + take > t->o.max_bytes) take = t->o.max_bytes - tr->bytes, over = 1;
                tr->bytes += take;
                if (feed(t, t->rbuf, take, 1000 * (fl_now() - t0), tr, &done) != FL_OK) {
                    free(req);
                    stop(t, 1, 0, &sent);
                    return fl_fail(e, FL_ERR_NOMEM, "target: out of memory");
                }
                if (over || (done && n < RBUF)) break;
            }
        }
    }
    free(req);
    tr->ms = 1000 * (fl_now() - t0);

    if (done) {
        tr->exit = FL_EXIT_DONE;
        over = 0; /* done came within the cap */
        if (t->line_len) fl_trace_problem(tr, "partial line after done");
        t->line_len = 0;
        t->fresh_start = 0;
        int unread = 0; /* bytes of the request still in the pipe (FIONREAD works on either end) */
        if (!t->o.fresh && req_off == req_len && ioctl(t->fd_in, FIONREAD, &unread) < 0) unread = 0;
        if ((req_off < req_len || unread > 0) && !t->o.fresh) {
            /* The rest of this request would be read as the start of the next one. */
            fl_trace_problem(tr, "done before the whole request was read; target restarted");
            stop(t, 1, 0, &sent);
        }
        if (t->o.fresh) stop(t, 1, t->o.kill_grace_ms, &sent); /* its exit status is its own business */
        return FL_OK;
    }
    if (over) {
        tr->exit = FL_EXIT_LIMIT;
        stop(t, 1, 0, &sent);
        tr->exit_status = -sent;
        return FL_OK;
    }
    if (!eof && !write_failed) { /* the deadline passed */
        tr->exit = FL_EXIT_HANG;
        double k0 = fl_now();
        stop(t, 1, 0, &sent);
        tr->exit_status = -sent;
        /* Persistent: the next process starts now rather than before the next case, so that
         * its start-up overlaps with the caller's work on this result, and so that what the
         * timeout cost beyond tr->ms (the kill, a fork and exec) is measured with it. A failed
         * start is not this case's result: the next case tries again and reports it. */
        if (!t->o.fresh) {
            fl_err e2 = {0};
            spawn(t, NULL, &e2);
        }
        t->restart_ms = 1000 * (fl_now() - k0);
        return FL_OK;
    }
    /* stdout closed or stdin refused: how did the process end? */
    int status = stop(t, 1, t->o.kill_grace_ms, &sent);
    if (sent) {
        tr->exit = eof ? FL_EXIT_EOF : FL_EXIT_CRASH;
        tr->exit_status = eof ? 0 : -sent;
    } else if (WIFSIGNALED(status)) {
        tr->exit = FL_EXIT_CRASH;
        tr->exit_status = -WTERMSIG(status);
    } else if (WEXITSTATUS(status)) {
        tr->exit = FL_EXIT_CRASH;
        tr->exit_status = WEXITSTATUS(status);
    } else {
        tr->exit = FL_EXIT_EOF;
    }
    if (tr->exit == FL_EXIT_EOF) fl_trace_problem(tr, "no done event");
    return FL_OK;
}
