/* Known hangs cut early: the stall check (fl_target_set_stall).
 *
 * A hang that is found again costs the tight timeout (campaign_run.c), and on a fast system
 * that is tens to hundreds of normal cases. But a hang is visible before any timeout: the
 * system stops talking. Once a case has timed out (its hang saved, or known), the events it
 * produced before it went silent are remembered as a stall point (camp_stall_hash: the
 * agents, handoffs, tools and choices in order, contents ignored, as q_path_hash). A later
 * case that has produced exactly those events and then stays silent for the idle window is
 * that known hang again: it ends there and counts in hangs_known (and hangs_stalled).
 *
 * The idle window is derived from the campaign's own normal cases, as the tight timeout is:
 * STALL_MULT x the silence within which 99 % of the cases that ended with done had had their
 * longest silence (the target measures it: time without output once the request is written;
 * a new process's start-up excluded), at least STALL_FLOOR ms. A case that is merely slow at
 * a known stall point is then cut only when its silence is 3 times what 99 % of normal cases
 * ever showed; a silence at a point not known to stall waits for the tight timeout, and a hang
 * signature not saved yet is confirmed with the whole timeout as before. The floor is above
 * the scheduling delays of a busy machine (a process not run for a few ms). */
#include <stdlib.h>

#include "agents/campaign/campaign_int.h"

#define STALL_MULT 3
#define STALL_FLOOR 3   /* ms */
#define STALL_MAX 4096  /* stall points remembered (then no more are learnt) */

uint64_t camp_stall_hash(const fl_trace *t) {
    uint64_t h = FL_AGHASH_INIT;
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        h = fl_aghash_u64(h, (uint64_t)ev->kind);
        h = fl_aghash_str(h, ev->agent ? ev->agent : "");
        switch (ev->kind) {
        case FL_EV_MESSAGE: h = fl_aghash_str(h, ev->to ? ev->to : ""); break;
        case FL_EV_TOOL_CALL: h = fl_aghash_str(h, ev->tool ? ev->tool : ""); break;
        case FL_EV_TOOL_RESULT:
            h = fl_aghash_u64(fl_aghash_str(h, ev->tool ? ev->tool : ""), (uint64_t)ev->ok);
            break;
        case FL_EV_BRANCH:
            h = fl_aghash_str(fl_aghash_str(h, ev->point ? ev->point : ""), ev->choice ? ev->choice : "");
            break;
        default: break;
        }
    }
    return fl_aghash_final(fl_aghash_u64(h, (uint64_t)t->n_events));
}

static int stall_known(const camp *cp, uint64_t h) {
    for (int i = 0; i < cp->n_stalls; i++)
        if (cp->stalls[i] == h) return 1;
    return 0;
}

void camp_stall_learn(camp *cp, const fl_trace *t) {
    if (t->exit != FL_EXIT_HANG || cp->n_stalls >= STALL_MAX) return;
    uint64_t h = camp_stall_hash(t);
    if (stall_known(cp, h)) return;
    if (cp->n_stalls == cp->cap_stalls) {
        int cap = cp->cap_stalls ? 2 * cp->cap_stalls : 16;
        uint64_t *v = realloc(cp->stalls, (size_t)cap * sizeof *v);
        if (!v) return; /* not learnt: the tight timeout still ends it */
        cp->stalls = v, cp->cap_stalls = cap;
    }
    cp->stalls[cp->n_stalls++] = h;
}

void camp_stall_note(camp *cp, double silence_ms) {
    int k = 0;
    while (k < CAMP_OK_BUCKETS - 1 && silence_ms * 100 >= (double)(1ull << k)) k++;
    cp->quiet_hist[k]++, cp->n_quiet++;
}

int camp_stall_idle_ms(const camp *cp) {
    if (!cp->n_stalls || !cp->n_quiet) return 0;
    double p99 = 0; /* as camp_ok_ms: the top of the bucket the 99th percentile falls in */
    uint64_t above = 0;
    for (int k = CAMP_OK_BUCKETS - 1; k >= 0 && !p99; k--)
        if ((double)(above += cp->quiet_hist[k]) > 0.01 * (double)cp->n_quiet)
            p99 = (double)(1ull << k) / 100;
    int ms = (int)(STALL_MULT * p99) + 1;
    return ms < STALL_FLOOR ? STALL_FLOOR : ms;
}

int camp_stall_check(void *ctx, const fl_trace *t) {
    camp *cp = ctx;
    uint64_t h = camp_stall_hash(t);
    pthread_mutex_lock(&cp->mu);
    int known = stall_known(cp, h);
    pthread_mutex_unlock(&cp->mu);
    return known;
}
