/* The loop oracle: a cycle of messages between agents that repeats.
 *
 * Definition (docs/agents-oracles.md): take the trace's message events in order, m_0..m_k-1,
 * each reduced to its edge from -> to (FL_LOOP_EDGES) or its edge and exact content
 * (FL_LOOP_CONTENT). A loop is a stretch m_s .. m_s+N*L-1 that is N >= `repetitions` copies of
 * a pattern of L <= `cycle` messages where
 *   - the pattern is a closed walk: each message's receiver sends the next one, and the last
 *     one's receiver sends the first (reviewer -> reviser -> reviewer ...);
 *   - the pattern is primitive (not itself a repetition of a shorter one: A>B>A>B is A>B);
 *   - the user is not part of it (a conversation with the user is not a loop).
 * The signature names the agents of the cycle, rotated to start at the smallest name, so it
 * does not depend on where the loop was entered, how often it ran, or what was said.
 *
 * Cost: O(messages * cycle).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "agents/oracle/oracle_int.h"

static int is_user(const char *a) { return a && !strcmp(a, "user"); }

static int eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Report the pattern of L messages starting at message s (msg[] holds event indices). */
static void consider(ora *x, const int *msg, const uint64_t *h, int s, int L, int reps) {
    const fl_event *ev = x->t->events;
    for (int k = 0; k < L; k++) {
        const fl_event *a = &ev[msg[s + k]], *b = &ev[msg[s + (k + 1) % L]];
        if (is_user(a->agent) || is_user(a->to) || !eq(a->to, b->agent)) return;
    }
    for (int p = 1; p < L; p++) { /* primitive? */
        if (L % p) continue;
        int periodic = 1;
        for (int k = 0; k < L && periodic; k++) periodic = h[s + k] == h[s + (k + p) % L];
        if (periodic) return;
    }
    /* canonical rotation of the senders: lexicographically smallest */
    int best = 0;
    for (int r = 1; r < L; r++) {
        for (int k = 0; k < L; k++) {
            int c = strcmp(ev[msg[s + (r + k) % L]].agent, ev[msg[s + (best + k) % L]].agent);
            if (c < 0) best = r;
            if (c) break;
        }
    }
    char key[192], cyc[160];
    size_t kl = (size_t)snprintf(key, sizeof key, "loop:"), cl = 0;
    cyc[0] = 0;
    for (int k = 0; k < L; k++) {
        const char *a = ev[msg[s + (best + k) % L]].agent;
        if (kl < sizeof key) kl += (size_t)snprintf(key + kl, sizeof key - kl, "%s%s", k ? ">" : "", a);
        if (cl < sizeof cyc) cl += (size_t)snprintf(cyc + cl, sizeof cyc - cl, "%s -> ", a);
    }
    if (cl < sizeof cyc) snprintf(cyc + cl, sizeof cyc - cl, "%s", ev[msg[s + best]].agent);
    ora_add(x, FL_FIND_LOOP, "FM-1.3", msg[s], key, "messages cycled %s %d times (events %d-%d)%s", cyc, reps, msg[s],
            msg[s + reps * L - 1], x->o.loop_match == FL_LOOP_CONTENT ? " with identical contents" : "");
}

void ora_check_loops(ora *x) {
    const fl_trace *t = x->t;
    const fl_spec *sp = x->spec;
    int need = sp && sp->loop_repetitions ? sp->loop_repetitions : x->o.loop_repetitions;
    int lmax = sp && sp->loop_cycle ? sp->loop_cycle : x->o.loop_cycle;
    int m = fl_agtrace_messages(t);
    if (m < need) return;
    int *msg = malloc((size_t)m * sizeof *msg);
    uint64_t *h = malloc((size_t)m * sizeof *h);
    if (!msg || !h) {
        free(msg);
        free(h);
        x->oom = 1;
        return;
    }
    int n = 0;
    for (int i = 0; i < t->n_events; i++) {
        const fl_event *ev = &t->events[i];
        if (ev->kind != FL_EV_MESSAGE) continue;
        uint64_t k = fl_aghash_str(fl_aghash_str(FL_AGHASH_INIT, ev->agent), ev->to);
        if (x->o.loop_match == FL_LOOP_CONTENT) k = fl_aghash_str(k, ev->content);
        /* a message with a missing end never repeats (the trace already has a protocol problem) */
        h[n] = ev->agent && ev->to ? k : (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
        msg[n++] = i;
    }
    for (int L = 1; L <= lmax && L * need <= n; L++) {
        int run = 0; /* consecutive j with h[j] == h[j + L] */
        for (int j = 0; j + L <= n; j++) {
            if (j + L < n && h[j] == h[j + L]) {
                run++;
                continue;
            }
            if (run >= (need - 1) * L) consider(x, msg, h, j - run, L, (run + L) / L);
            run = 0;
        }
    }
    free(msg);
    free(h);
}
