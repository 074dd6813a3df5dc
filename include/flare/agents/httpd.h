/* httpd.h — flare's HTTP server for its own endpoints (the OTLP/HTTP receiver): Debian's
 * libmicrohttpd on one internal polling thread, and a handler callback that turns a whole
 * request into a whole JSON response.
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
 *     fl_httpd_stop(h);                                    // joins the server's thread
 *
 * What the clients need: they are OpenTelemetry exporters (Node's OTLPTraceExporter, the
 * Collector's otlphttp exporter, curl in a shell script), which send POST requests with a body
 * and read the status. libmicrohttpd does the HTTP/1.1 (bodies framed by Content-Length or
 * Transfer-Encoding: chunked, "Expect: 100-continue", keep-alive and pipelined requests served
 * in order, "Connection: close" and HTTP/1.0 ending the connection); on top of it:
 *   - "Content-Encoding: gzip" bodies are inflated (the Collector's exporter compresses by
 *     default); any other coding is a 415;
 *   - limits, each answered with a status and the connection closed: request line + headers
 *     over max_header bytes → 431, a body over max_body bytes (declared, chunked or inflated)
 *     → 413, a second Content-Length with another value or a Transfer-Encoding other than
 *     chunked → 400, more than max_conns open connections → 503 to their requests, a
 *     connection silent for idle_ms (rounded up to whole seconds) → closed.
 * flare's responses are JSON (Content-Type: application/json); a handler that leaves body NULL
 * gets {"error":"<reason phrase>"} for status >= 400 and {} otherwise. What libmicrohttpd
 * rejects before flare sees it (a malformed request line or header → 400, an unsupported HTTP
 * version → 505, headers past its memory pool → 431) gets the library's short HTML page. No
 * TLS, no HTTP/2.
 *
 * The handler runs on the server's thread, one request at a time; it must still be
 * thread-safe against the rest of the program (the store it feeds is read by workers).
 */
#ifndef FLARE_AGENTS_HTTPD_H
#define FLARE_AGENTS_HTTPD_H

#include "flare/flare.h"

typedef struct fl_http_req {
    const char *method;        /* "POST" */
    const char *path;          /* "/v1/traces" (without the query string) */
    const char *content_type;  /* the header's value without parameters, lower case; "" if none */
    const char *body;          /* NUL-terminated for convenience; may hold NULs (body_len) */
    size_t body_len;
} fl_http_req;

typedef struct fl_http_resp {
    int status;                /* default 200 */
    char *body;                /* malloc'd JSON, taken over by the server; NULL: see above */
    const char *content_type;  /* a static string; NULL: application/json */
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
 * server's thread, free. NULL is a no-op. */
void fl_httpd_stop(fl_httpd *h);

#endif
