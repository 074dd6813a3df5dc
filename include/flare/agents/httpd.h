/* httpd.h — a tiny HTTP/1.1 server for flare's own endpoints (the OTLP/HTTP receiver): one
 * listening socket on a loopback address, one thread that accepts, one thread per connection,
 * and a handler callback that turns a whole request into a whole JSON response.
 *
 *     static void handle(const fl_http_req *rq, fl_http_resp *rs, void *user) {
 *         if (strcmp(rq->path, "/v1/ping")) { rs->status = 404; return; }
 *         rs->status = 200;
 *         rs->body = strdup("{\"pong\":true}");           // malloc'd, freed by the server
 *     }
 *     fl_httpd *h;
 *     if (fl_httpd_start("127.0.0.1:0", NULL, handle, user, &h, &e)) ...;
 *     int port = fl_httpd_port(h);                         // 0 asked for a free port
 *     ...
 *     fl_httpd_stop(h);                                    // joins every thread
 *
 * What it speaks, and why so little: the clients are OpenTelemetry exporters (Node's
 * OTLPTraceExporter, the Collector's otlphttp exporter, curl in a shell script), which send
 * POST requests with a body and read the status. So:
 *   - request bodies framed by Content-Length or by Transfer-Encoding: chunked (Node's http
 *     module picks either, depending on how the body was written); no length means no body;
 *   - "Expect: 100-continue" is answered (curl sends it for bodies over 1 KiB);
 *   - "Content-Encoding: gzip" bodies are inflated (the Collector's exporter compresses by
 *     default); any other coding is a 415;
 *   - keep-alive (HTTP/1.1 default; "Connection: close" and HTTP/1.0 without keep-alive end
 *     the connection after the response); requests on one connection are served in order;
 *   - limits, each answered with a status and the connection closed: request line + headers
 *     over max_header bytes → 431, a body over max_body bytes (declared, chunked or inflated)
 *     → 413, anything malformed → 400, more than max_conns open connections → 503, a
 *     connection silent for idle_ms → closed.
 * Every response is JSON (Content-Type: application/json); a handler that leaves body NULL gets
 * {"error":"<reason phrase>"} for status >= 400 and {} otherwise. No TLS, no pipelining
 * guarantees beyond in-order service, no HTTP/2.
 *
 * The handler runs on connection threads, possibly several at once: it must be thread-safe.
 */
#ifndef FLARE_AGENTS_HTTPD_H
#define FLARE_AGENTS_HTTPD_H

#include "flare/flare.h"

typedef struct fl_http_req {
    const char *method;        /* "POST" */
    const char *path;          /* "/v1/traces" (query string included as sent) */
    const char *content_type;  /* the header's value without parameters, lower case; "" if none */
    const char *body;          /* NUL-terminated for convenience; may hold NULs (body_len) */
    size_t body_len;
} fl_http_req;

typedef struct fl_http_resp {
    int status;                /* default 200 */
    char *body;                /* malloc'd JSON, taken over by the server; NULL: see above */
} fl_http_resp;

typedef void (*fl_http_handler)(const fl_http_req *rq, fl_http_resp *rs, void *user);

typedef struct fl_httpd_opts {
    size_t max_header;         /* request line + headers (default 16 KiB) */
    size_t max_body;           /* body after de-chunking and inflating (default 32 MiB) */
    int max_conns;             /* open connections (default 32) */
    int idle_ms;               /* a connection silent this long is closed (default 30000) */
} fl_httpd_opts;

void fl_httpd_opts_default(fl_httpd_opts *o);

typedef struct fl_httpd fl_httpd;

/* Listen on addr ("127.0.0.1:4318", "localhost:4318", "0.0.0.0:4318"; IPv4; port 0: any free
 * one) and start serving. o may be NULL (defaults). Fails, naming addr, when the address is
 * malformed or cannot be bound (in use, not local). */
fl_status fl_httpd_start(const char *addr, const fl_httpd_opts *o, fl_http_handler h, void *user,
                         fl_httpd **out, fl_err *e);
/* The bound port. */
int fl_httpd_port(const fl_httpd *h);
/* Requests whose request line has arrived and whose handler has not returned yet: 0 means
 * nothing a client has started sending is still on its way into the handler. */
int fl_httpd_busy(fl_httpd *h);
/* Stop accepting, close every connection (a request being handled finishes first), join the
 * threads, free. NULL is a no-op. */
void fl_httpd_stop(fl_httpd *h);

/* "OK", "Not Found", ...; "Unknown" for codes it does not name. */
const char *fl_http_reason(int status);

#endif
