/* scheduler.c — a job scheduler run by agents, made to measure how a campaign copes with
 * hangs (issue 15 §1): a Dispatcher routes a request to a Runner (starts jobs), a Poller
 * (waits for a job to finish) or a Reporter (lists and summarises jobs). Two hangs are
 * planted, one in a part of the system that most requests reaching it can trigger (so the
 * mutants of some queue entries hang often), one behind a rarer condition; nothing else
 * fails. The seeds reach neither. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "sys.h"

const char *const sys_name = "scheduler";

enum { N_JOBS = 20 };

/* 1 when text starts with word, ignoring ASCII case */
static int has_prefix(const char *text, const char *word) {
    while (*word && tolower((unsigned char)*text) == tolower((unsigned char)*word)) text++, word++;
    return !*word;
}

/* the job a request names: its first number, 0 when it names none */
static long long job_of(const char *t) {
    int digits;
    return sys_number(t, 0, &digits);
}

static void poll_job(const char *t, long long job) {
    char arg[32];
    snprintf(arg, sizeof arg, "%lld", job);
    sys_msg("Dispatcher", "Poller", "wait for job %lld", job);
    sys_tool("Poller", "job_status", "job", arg);
    /* BUG (hang): the status of a job that does not exist is "pending" for ever, and the
     * Poller polls until it is not */
    if (job < 1 || job > N_JOBS) sys_hang();
    sys_result("Poller", "job_status", 1, "finished");
    sys_branch("Poller", "outcome", sys_has(t, "fail") ? "failed" : "finished");
    sys_msg("Poller", "Reporter", "job %lld finished", job);
}

static void run_job(const char *t, long long job) {
    char arg[32];
    snprintf(arg, sizeof arg, "%lld", job);
    sys_msg("Dispatcher", "Runner", "start job %lld", job);
    sys_branch("Runner", "priority", sys_has(t, "urgent") || sys_has(t, "high") ? "high" : "normal");
    const char *p = t;
    while (*p && !has_prefix(p, "after")) p++;
    if (*p) {
        /* BUG (hang): a job that waits for itself ("start job 3 after job 3") never starts */
        int digits;
        long long dep = sys_number(p, 0, &digits);
        sys_tool("Runner", "resolve_deps", "after", p);
        if (digits && dep == job) sys_hang();
        sys_result("Runner", "resolve_deps", 1, "ready");
    }
    sys_tool("Runner", "start_job", "job", arg);
    sys_result("Runner", "start_job", 1, "started");
    sys_msg("Runner", "Reporter", "job %lld started", job);
}

void sys_handle(char **turns, int n) {
    const char *t = turns[n - 1];
    long long job = job_of(t);
    sys_msg("user", "Dispatcher", "%s", t);
    int wants_wait = sys_has(t, "status") || sys_has(t, "wait") || sys_has(t, "finish");
    if (sys_has(t, "start") || sys_has(t, "run")) {
        sys_branch("Dispatcher", "route", "run");
        run_job(t, job ? job : 1);
        if (wants_wait) poll_job(t, job ? job : 1);
    } else if (wants_wait && job) {
        sys_branch("Dispatcher", "route", "poll");
        poll_job(t, job);
    } else {
        sys_branch("Dispatcher", "route", "report");
        sys_msg("Dispatcher", "Reporter", "list jobs");
        sys_tool("Reporter", "list_jobs", "filter", sys_has(t, "today") ? "today" : "all");
        sys_result("Reporter", "list_jobs", 1, "3 jobs");
    }
    sys_msg("Reporter", "user", "summary");
    sys_output("Done: %s", n > 1 ? "follow-up handled" : "request handled");
}
