/* http_target.h — an agent system behind an HTTP endpoint as a flare target.
 *
 * Real agent stacks are services: flare POSTs each case to one URL and reads the events from
 * the response. An HTTP target is an ordinary fl_target: give fl_target_opts.http and no argv,
 * and fl_target_run / fl_target_free work as for a process (docs/agents-http.md):
 *
 *     fl_http_opts h;
 *     fl_http_opts_default(&h);
 *     h.url = "http://127.0.0.1:8080/run";
 *     h.response = "pointer:/answer";     // or "events" (default), "jsonl"
 *     fl_target_opts o;
 *     fl_target_opts_default(&o);
 *     o.http = &h;
 *     fl_target_new(NULL, &o, &t, &e);
 *
 * One case = one POST of the body (the request JSON, or body_template with its placeholders
 * filled), with headers `Content-Type: application/json` and `traceparent: <the case's>` (so
 * the service's OpenTelemetry spans join the case's trace). How it ends (fl_trace.exit):
 *   FL_EXIT_DONE   2xx; the events of the body, an implicit "done" at its end.
 *   FL_EXIT_CRASH  5xx (exit_status = the HTTP status; the body's start is the protocol
 *                  message), or the connection broke after the request was sent (the
 *                  service died handling it; exit_status 0), or no connection could be
 *                  made after `retries` more tries with doubling backoff (exit_status 0).
 *   FL_EXIT_HANG   no complete response within timeout_ms (exit_status 0).
 *   FL_EXIT_LIMIT  more than max_bytes of response body.
 *   FL_EXIT_EOF    any other status (3xx — redirects are never followed —, 4xx): recorded as a
 *                  protocol problem naming the status.
 * Only the configured address is ever contacted: no redirects, only http and https, no proxy
 * (whatever http_proxy / HTTPS_PROXY say). Each fl_target holds its own curl handle, so
 * parallel workers (-j N) each keep their own connection alive.
 */
#ifndef FLARE_AGENTS_HTTP_TARGET_H
#define FLARE_AGENTS_HTTP_TARGET_H

#include "flare/agents/protocol.h"

typedef struct fl_http_opts {
    const char *url;           /* http:// or https:// (required) */
    const char *body_template; /* file holding the body with {{input}} etc.; NULL: the request */
    const char *response;      /* "events" | "jsonl" | "pointer:/json/pointer"; NULL: "events" */
    int retries;               /* more connection attempts after a refused one (default 3) */
    int backoff_ms;            /* delay before the first retry, doubled each time (default 100) */
} fl_http_opts;

void fl_http_opts_default(fl_http_opts *o);

/* The body of case c from a template: each placeholder is replaced, JSON-escaped, by
 *   {{input}}        the turns joined by "\n", escaped as inside a JSON string (no quotes)
 *   {{turns}}        the turns as a JSON array of strings
 *   {{request}}      the whole request object (as sent without a template)
 *   {{id}} {{seed}} {{traceparent}}   as in the request (id and traceparent without quotes)
 * An unknown {{name}} stays as it is. malloc'd; NULL when out of memory. */
char *fl_http_body(const char *tmpl, const fl_case *c);

/* RFC 6901: the value at pointer (e.g. "/choices/0/message/content"; "" is the whole
 * document) in the cJSON tree root, or NULL. `~1` is '/', `~0` is '~'. */
struct cJSON;
const struct cJSON *fl_json_pointer(const struct cJSON *root, const char *pointer);

/* ---- used by target.c ------------------------------------------------------------------- */
typedef struct fl_http fl_http;
fl_status fl_http_new(const fl_http_opts *h, int timeout_ms, size_t max_bytes, fl_http **out,
                      fl_err *e);
/* One case; c carries its traceparent. */
fl_status fl_http_run(fl_http *h, const fl_case *c, fl_trace *tr, fl_err *e);
/* A new per-request timeout (the campaign's calibration, docs/agents-campaign.md). */
void fl_http_set_timeout(fl_http *h, int timeout_ms);
void fl_http_free(fl_http *h);

#endif
