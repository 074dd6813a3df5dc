/* flare's HTTP server (httpd.h) is libmicrohttpd: it reads requests (framing, chunked bodies,
 * Expect: 100-continue, keep-alive, pipelining, timeouts) on one internal polling thread. This
 * file is the adapter: it adds what flare's endpoints need on top — the limits answered with
 * a JSON status, gzip bodies inflated, the whole body gathered before the handler sees it, and
 * the count of requests on their way in (fl_httpd_busy).
 *
 * Per request, MHD calls `access` first when the headers are in (the limits are checked
 * there), then once per piece of body, then once more with no data: the body is complete.
 * A response can only be queued at the first or the last call (MHD_queue_response refuses
 * one mid-body), so a chunked body that passes max_body is read on and dropped, and answered
 * 413 when it ends. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <microhttpd.h>

#include "flare/agents/httpd.h"

struct fl_httpd {
    struct MHD_Daemon *d;
    int port;
    fl_httpd_opts o;
    fl_http_handler fn;
    void *user;
    atomic_int busy;    /* requests whose request line came and whose handler has not returned */
    atomic_int conns;   /* open connections */
};

/* One request, from its request line (uri_log) to its end (completed). */
typedef struct req {
    fl_httpd *h;
    int started;        /* the header checks passed */
    int busy;           /* counted in h->busy */
    int over;           /* the body passed max_body: dropped, answered 413 at its end */
    int gzip;
    char ctype[128];
    char *body;
    size_t blen, bcap;
} req;

/* Marks a connection over max_conns in its socket context. */
static char over_limit;

void fl_httpd_opts_default(fl_httpd_opts *o) {
    o->max_header = 16 << 10;
    o->max_body = 32u << 20;
    o->max_conns = 32;
    o->idle_ms = 30000;
}

/* ---- responses ------------------------------------------------------------------------------ */
/* Queue status with body (malloc'd JSON, taken over; NULL: the default one). close: end the
 * connection after it (MHD reads "Connection: close" in the response and does so). */
static enum MHD_Result respond(struct MHD_Connection *c, int status, char *body, const char *ctype,
                               int close) {
    if (!body) {
        char dflt[96];
        if (status >= 400) snprintf(dflt, sizeof dflt, "{\"error\":\"%s\"}", MHD_get_reason_phrase_for((unsigned)status));
        else snprintf(dflt, sizeof dflt, "{}");
        body = strdup(dflt);
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype ? ctype : "application/json");
    if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- the body --------------------------------------------------------------------------------- */
/* Room for n more body bytes; 0 when that would pass max (or memory ran out). */
static int body_room(req *r, size_t n, size_t max) {
    if (n > max || r->blen > max - n) return 0;
    if (r->blen + n + 1 > r->bcap) {
        size_t nc = r->bcap ? r->bcap : 4096;
        while (nc < r->blen + n + 1) nc *= 2;
        char *nb = realloc(r->body, nc);
        if (!nb) return 0;
        r->body = nb, r->bcap = nc;
    }
    return 1;
}

/* Inflate a gzip body in place of r->body. 0 ok, else the status to answer. */
static int gunzip(req *r, size_t max) {
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 500;
    size_t cap = r->blen * 4 + 4096, n = 0;
    char *out = malloc(cap + 1);
    z.next_in = (Bytef *)r->body;
    z.avail_in = (uInt)r->blen;
    int zr = Z_OK, status = 0;
    while (out && zr == Z_OK) {
        if (n == cap) {
            if (cap >= max) { status = 413; break; }
            cap = cap * 2 > max ? max : cap * 2;
            char *no = realloc(out, cap + 1);
            if (!no) break;
            out = no;
        }
        z.next_out = (Bytef *)out + n;
        z.avail_out = (uInt)(cap - n);
        zr = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
        if (zr == Z_BUF_ERROR && z.avail_in == 0) zr = Z_DATA_ERROR; /* truncated */
    }
    inflateEnd(&z);
    if (!status) status = !out ? 500 : zr == Z_STREAM_END ? 0 : zr == Z_OK ? 500 : 400;
    if (status) {
        free(out);
        return status;
    }
    free(r->body);
    r->body = out, r->blen = n, r->bcap = cap + 1;
    return 0;
}

/* ---- the headers ------------------------------------------------------------------------------ */
typedef struct head_scan {
    size_t bytes;       /* names, values and their separators */
    const char *clen;   /* the first Content-Length */
    int clen_conflict;  /* a second one with another value (RFC 9112 6.3: a 400) */
} head_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v) {
    (void)kind;
    head_scan *s = cls;
    s->bytes += strlen(k) + strlen(v) + 4;
    if (!strcasecmp(k, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (s->clen && strcmp(s->clen, v)) s->clen_conflict = 1;
        if (!s->clen) s->clen = v;
    }
    return MHD_YES;
}

/* The checks MHD leaves to the application, at the first call. 0: go on reading the body;
 * else the status to answer (and close). */
static int check_head(fl_httpd *h, req *r, struct MHD_Connection *c, const char *url,
                      const char *method) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci && ci->socket_context == &over_limit) return 503;
    head_scan s = {strlen(method) + strlen(url) + 12, NULL, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &s);
    if (s.bytes > h->o.max_header) return 431;
    if (s.clen_conflict) return 400;
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te && strcasecmp(te, "chunked")) return 400; /* gzip/deflate framing: nobody sends it */
    if (s.clen && strtoull(s.clen, NULL, 10) > h->o.max_body) return 413;
    const char *ce = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce && !strcasecmp(ce, "gzip")) r->gzip = 1;
    else if (ce && strcasecmp(ce, "identity")) return 415;
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t i = 0;
    for (; ct && ct[i] && ct[i] != ';' && i + 1 < sizeof r->ctype; i++)
        r->ctype[i] = (char)(ct[i] >= 'A' && ct[i] <= 'Z' ? ct[i] + 32 : ct[i]);
    while (i && r->ctype[i - 1] == ' ') i--;
    r->ctype[i] = 0;
    return body_room(r, 0, h->o.max_body) ? 0 : 500;
}

/* ---- MHD's callbacks ---------------------------------------------------------------------------- */
/* The request line has arrived: the request is on its way in. Its req is MHD's con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)uri, (void)c;
    fl_httpd *h = cls;
    req *r = calloc(1, sizeof *r);
    if (r) r->h = h, r->busy = 1, atomic_fetch_add(&h->busy, 1);
    return r;
}

static void not_busy(req *r) {
    if (r->busy) r->busy = 0, atomic_fetch_sub(&r->h->busy, 1);
}

/* Every request whose request line came ends here: answered, failed, or cut by stop. */
static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c, (void)t;
    req *r = *con_cls;
    if (!r) return;
    not_busy(r);
    free(r->body);
    free(r);
    *con_cls = NULL;
}

static void on_conn(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode t) {
    (void)c;
    fl_httpd *h = cls;
    if (t == MHD_CONNECTION_NOTIFY_STARTED) {
        if (atomic_fetch_add(&h->conns, 1) >= h->o.max_conns) *ctx = &over_limit;
    } else {
        atomic_fetch_sub(&h->conns, 1);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    fl_httpd *h = cls;
    req *r = *con_cls;
    if (!r) return respond(c, 500, NULL, NULL, 1); /* on_uri ran out of memory */
    if (!r->started) {
        int s = check_head(h, r, c, url, method);
        if (s) {
            not_busy(r);
            return respond(c, s, NULL, NULL, 1);
        }
        r->started = 1;
        return MHD_YES; /* MHD sends "100 Continue" now when the client asked for it */
    }
    if (*data_size) {
        if (!r->over && body_room(r, *data_size, h->o.max_body)) {
            memcpy(r->body + r->blen, data, *data_size);
            r->blen += *data_size;
        } else {
            r->over = 1;
        }
        *data_size = 0;
        return MHD_YES;
    }
    int s = r->over ? 413 : r->gzip ? gunzip(r, h->o.max_body) : 0;
    if (s) {
        not_busy(r);
        return respond(c, s, NULL, NULL, 1);
    }
    r->body[r->blen] = 0;
    fl_http_req rq = {method, url, r->ctype, r->body, r->blen};
    fl_http_resp rs = {200, NULL, NULL};
    h->fn(&rq, &rs, h->user);
    not_busy(r);
    return respond(c, rs.status, rs.body, rs.content_type, 0);
}

/* ---- start and stop ------------------------------------------------------------------------------ */
/* "host:port" → an IPv4 socket address. */
static fl_status parse_addr(const char *addr, struct sockaddr_in *sa, fl_err *e) {
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char host[64];
    if (!colon || (size_t)(colon - addr) >= sizeof host)
        return fl_fail(e, FL_ERR_ARG, "listen address \"%s\": expected HOST:PORT (127.0.0.1:4318)",
                       addr ? addr : "");
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535)
        return fl_fail(e, FL_ERR_ARG, "listen address \"%s\": bad port", addr);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost") || !host[0]) strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return fl_fail(e, FL_ERR_ARG, "listen address \"%s\": the host must be an IPv4 address "
                       "or localhost", addr);
    return FL_OK;
}

fl_status fl_httpd_start(const char *addr, const fl_httpd_opts *o, fl_http_handler fn, void *user,
                         fl_httpd **out, fl_err *e) {
    *out = NULL;
    struct sockaddr_in sa;
    fl_status st = parse_addr(addr, &sa, e);
    if (st) return st;
    fl_httpd *h = calloc(1, sizeof *h);
    if (!h) return fl_fail(e, FL_ERR_NOMEM, "out of memory");
    if (o) h->o = *o;
    else fl_httpd_opts_default(&h->o);
    if (h->o.max_conns < 1) h->o.max_conns = 1;
    h->fn = fn, h->user = user;
    /* the socket is bound here, not by MHD, so that a failure says why (errno) */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    socklen_t sl = sizeof sa;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl)) {
        st = fl_fail(e, FL_ERR_IO, "listen on %s: %s", addr, strerror(errno));
        if (fd >= 0) close(fd);
        free(h);
        return st;
    }
    h->port = ntohs(sa.sin_port);
    /* connections past max_conns are answered 503 (on_conn); MHD's own limit, where it
     * closes without a word, lies beyond */
    unsigned timeout_s = h->o.idle_ms <= 1000 ? 1u : (unsigned)((h->o.idle_ms + 999) / 1000);
    size_t pool = 2 * h->o.max_header + (16 << 10);
    h->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->o.max_conns + 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool < (32u << 10) ? (size_t)(32u << 10) : pool,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_conn, h,
                            MHD_OPTION_END);
    if (!h->d) {
        close(fd);
        free(h);
        return fl_fail(e, FL_ERR_IO, "listen on %s: cannot start the HTTP server", addr);
    }
    *out = h;
    return FL_OK;
}

int fl_httpd_port(const fl_httpd *h) { return h ? h->port : 0; }

int fl_httpd_busy(fl_httpd *h) { return h ? atomic_load(&h->busy) : 0; }

void fl_httpd_stop(fl_httpd *h) {
    if (!h) return;
    MHD_stop_daemon(h->d); /* joins its thread, closes every connection and the socket */
    free(h);
}
