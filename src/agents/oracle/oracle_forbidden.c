/* The forbidden-content oracle on every channel: the spec's forbidden patterns and the built-in
 * secret detector, over agent messages, tool arguments, tool results and the output
 * (docs/agents-oracles.md, "Forbidden content").
 *
 * The user's own messages are the input, not a leak, and are never checked. A finding names the
 * channel, the event and the agent; its key is "forbidden_output:<pattern>" on the output
 * channel (the signature it always had) and "forbidden_output:<pattern>@<channel>" elsewhere,
 * so a key leaked through a tool and the same key in the answer are two defects.
 */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include "flare/agents/agcov.h"
#include "agents/oracle/oracle_int.h"

/* Well-known credential shapes (POSIX ERE). Documented in docs/agents-oracles.md; keep the two
 * in step. Each is specific enough that ordinary prose never matches. */
static const struct {
    const char *name, *re;
} secrets[] = {
    {"secret:openai_or_anthropic_key", "sk-(ant-|proj-)?[A-Za-z0-9_-]{20,}"},
    {"secret:aws_access_key_id", "(AKIA|ASIA)[0-9A-Z]{16}"},
    {"secret:github_token", "(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"},
    {"secret:slack_token", "xox[abprs]-[A-Za-z0-9-]{10,}"},
    {"secret:google_api_key", "AIza[0-9A-Za-z_-]{35}"},
    {"secret:stripe_key", "(sk|rk)_(live|test)_[0-9A-Za-z]{16,}"},
    {"secret:private_key", "-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY-----"},
    {"secret:jwt", "eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}"},
};
#define N_SECRETS (sizeof secrets / sizeof secrets[0])

static regex_t secret_re[N_SECRETS];
static int secrets_ok;
static pthread_once_t secrets_once = PTHREAD_ONCE_INIT;

static void compile_secrets(void) {
    for (size_t i = 0; i < N_SECRETS; i++)
        if (regcomp(&secret_re[i], secrets[i].re, REG_EXTENDED | REG_NOSUB)) return; /* a bug: tested */
    secrets_ok = 1;
}

/* The channel of event ev and the text to search, or 0 when the event carries none. */
static unsigned channel_of(const fl_event *ev, const char **text) {
    switch (ev->kind) {
    case FL_EV_MESSAGE:
        if (ev->agent && !strcmp(ev->agent, "user")) return 0;
        *text = ev->content;
        return FL_CHAN_MESSAGE;
    case FL_EV_TOOL_CALL: *text = ev->arguments; return FL_CHAN_TOOL_ARGUMENTS;
    case FL_EV_TOOL_RESULT: *text = ev->content; return FL_CHAN_TOOL_RESULT;
    case FL_EV_OUTPUT: *text = ev->content; return FL_CHAN_OUTPUT;
    default: return 0;
    }
}

static void report(ora *x, int i, unsigned ch, const char *who, const char *name, const char *text) {
    const fl_event *ev = &x->t->events[i];
    char key[192], snip[96], where[160];
    const char *chan = fl_spec_channel_name(ch);
    if (ch == FL_CHAN_OUTPUT) snprintf(key, sizeof key, "forbidden_output:%s", name);
    else snprintf(key, sizeof key, "forbidden_output:%s@%s", name, chan);
    switch (ch) {
    case FL_CHAN_MESSAGE: snprintf(where, sizeof where, "message %s -> %s", who, ev->to ? ev->to : "?"); break;
    case FL_CHAN_TOOL_ARGUMENTS:
    case FL_CHAN_TOOL_RESULT:
        snprintf(where, sizeof where, "%s of tool %s by %s", chan, ev->tool ? ev->tool : "?", who);
        break;
    default: snprintf(where, sizeof where, "output from %s", who); break;
    }
    ora_add(x, FL_FIND_FORBIDDEN, "FM-1.1", i, key, "%s (channel %s, event %d, agent %s) matches %s \"%s\": %s", where,
            chan, i, who, strncmp(name, "secret:", 7) ? "forbidden pattern" : "the secret detector's", name,
            ora_snip(text, snip, sizeof snip));
}

void ora_check_forbidden(ora *x) {
    const fl_spec *s = x->spec;
    int use_secrets = !x->o.no_secrets && !(s && s->no_secrets);
    if (use_secrets) {
        pthread_once(&secrets_once, compile_secrets);
        if (!secrets_ok) use_secrets = 0;
    }
    for (int i = 0; i < x->t->n_events; i++) {
        const fl_event *ev = &x->t->events[i];
        const char *text = NULL;
        unsigned ch = channel_of(ev, &text);
        if (!ch || !text || !text[0]) continue;
        const char *who = fl_agtrace_actor(x->t, i, s);
        if (!who) who = ev->agent ? ev->agent : "?";
        int hit = 0;
        for (int p = 0; s && p < s->n_forbidden; p++) {
            const fl_spec_pattern *fp = &s->forbidden[p];
            if ((fp->channels & ch) && regexec(&fp->re, text, 0, NULL, 0) == 0) {
                report(x, i, ch, who, fp->name, text);
                hit = 1;
            }
        }
        /* the detector backs the spec up: an event a spec pattern reported is not reported twice */
        for (size_t k = 0; use_secrets && !hit && k < N_SECRETS; k++)
            if (regexec(&secret_re[k], text, 0, NULL, 0) == 0) report(x, i, ch, who, secrets[k].name, text);
    }
}
