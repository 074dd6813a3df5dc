/* The HTTP server (httpd.h, libmicrohttpd underneath) over a real loopback socket:
 * Content-Length and chunked bodies, keep-alive, gzip, Expect: 100-continue, and every limit
 * and malformed request answered with its status. The handler echoes what it saw, so the tests
 * check what the server parsed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "testutil.h"

#include "flare/agents/httpd.h"

/* /echo answers {"method","path","ctype","len","body"}; anything else is a 404. */
static void echo(const fl_http_req *rq, fl_http_resp *rs, void *user) {
    (void)user;
    if (strcmp(rq->path, "/echo")) {
        rs->status = 404;
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", rq->method);
    cJSON_AddStringToObject(o, "path", rq->path);
    cJSON_AddStringToObject(o, "ctype", rq->content_type);
    cJSON_AddNumberToObject(o, "len", (double)rq->body_len);
    cJSON_AddStringToObject(o, "body", rq->body);
    rs->body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
}

static fl_httpd *start(size_t max_body) {
    fl_httpd_opts o;
    fl_httpd_opts_default(&o);
    o.max_body = max_body;
    o.max_header = 1024;
    fl_httpd *h = NULL;
    fl_err e = {0};
    if (fl_httpd_start("127.0.0.1:0", &o, echo, NULL, &h, &e)) fail_msg("start: %s", e.msg);
    assert_true(fl_httpd_port(h) > 0);
    return h;
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void put(int fd, const char *s, size_t n) {
    assert_int_equal(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* One response: status, body (malloc'd into *body), and whether the server said close. */
typedef struct resp {
    int status, close;
    char body[4096];
} resp;

/* Read one whole response from fd (buffer carried between calls for keep-alive). */
static char rbuf[65536];
static size_t rlen;

static int read_resp(int fd, resp *r) {
    for (;;) {
        rbuf[rlen] = 0;
        char *end = strstr(rbuf, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(rbuf, "Content-Length:");
            size_t n = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
            size_t head = (size_t)(end + 4 - rbuf);
            if (rlen >= head + n) {
                r->status = atoi(rbuf + 9);
                r->close = strcasestr(rbuf, "Connection: close") && strcasestr(rbuf, "Connection: close") < end;
                assert_true(n < sizeof r->body);
                memcpy(r->body, rbuf + head, n);
                r->body[n] = 0;
                memmove(rbuf, rbuf + head + n, rlen - head - n);
                rlen -= head + n;
                return 1;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0) return 0;
        ssize_t got = recv(fd, rbuf + rlen, sizeof rbuf - 1 - rlen, 0);
        if (got <= 0) return 0;
        rlen += (size_t)got;
    }
}

/* Send raw text on a new connection and read one response. */
static resp once(fl_httpd *h, const char *raw, size_t n) {
    int fd = dial(fl_httpd_port(h));
    rlen = 0;
    put(fd, raw, n ? n : strlen(raw));
    resp r = {0};
    if (!read_resp(fd, &r)) fail_msg("no response to: %.60s", raw);
    close(fd);
    return r;
}

/* Send raw text on a new connection: 1 when the server closes it without a response. */
static int closed_silently(fl_httpd *h, const char *raw) {
    int fd = dial(fl_httpd_port(h));
    rlen = 0;
    put(fd, raw, strlen(raw));
    resp r = {0};
    int got = read_resp(fd, &r);
    close(fd);
    return !got && rlen == 0;
}

static cJSON *json_of(const resp *r) {
    cJSON *j = cJSON_Parse(r->body);
    if (!j) fail_msg("not JSON: %s", r->body);
    return j;
}

static void test_content_length(void **state) {
    fl_httpd *h = start(1 << 20);
    resp r = once(h, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: Application/JSON; charset=utf-8"
                     "\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}!", 0);
    assert_int_equal(r.status, 200);
    cJSON *j = json_of(&r);
    assert_string_equal(cJSON_GetObjectItem(j, "method")->valuestring, "POST");
    assert_string_equal(cJSON_GetObjectItem(j, "ctype")->valuestring, "application/json");
    assert_string_equal(cJSON_GetObjectItem(j, "body")->valuestring, "{\"a\":\"bc\"}!");
    assert_int_equal(cJSON_GetObjectItem(j, "len")->valueint, 11);
    cJSON_Delete(j);
    fl_httpd_stop(h);
}

static void test_chunked(void **state) {
    fl_httpd *h = start(1 << 20);
    /* chunks split across sends, one with an extension, then a trailer */
    int fd = dial(fl_httpd_port(h));
    rlen = 0;
    const char *parts[] = {"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
                           "lo\r\n1;ext=1\r\n,\r\n6\r", "\n world\r\n0\r\nX-T: 1\r\n\r\n"};
    for (int i = 0; i < 3; i++) {
        put(fd, parts[i], strlen(parts[i]));
        usleep(20000);
    }
    resp r = {0};
    assert_true(read_resp(fd, &r));
    assert_int_equal(r.status, 200);
    cJSON *j = json_of(&r);
    assert_string_equal(cJSON_GetObjectItem(j, "body")->valuestring, "hello, world");
    cJSON_Delete(j);
    close(fd);
    fl_httpd_stop(h);
}

static void test_keep_alive(void **state) {
    fl_httpd *h = start(1 << 20);
    int fd = dial(fl_httpd_port(h));
    rlen = 0;
    /* two requests in one write (pipelined), a third after the answers */
    const char *two = "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nonePOST /echo HTTP/1.1\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n";
    put(fd, two, strlen(two));
    resp r1 = {0}, r2 = {0}, r3 = {0};
    assert_true(read_resp(fd, &r1));
    assert_true(read_resp(fd, &r2));
    assert_true(strstr(r1.body, "\"one\"") && !r1.close);
    assert_true(strstr(r2.body, "\"two\"") && !r2.close);
    const char *last = "POST /echo HTTP/1.1\r\nConnection: close\r\nContent-Length: 5\r\n\r\nthree";
    put(fd, last, strlen(last));
    assert_true(read_resp(fd, &r3));
    assert_true(strstr(r3.body, "\"three\"") && r3.close);
    char b;
    assert_int_equal(recv(fd, &b, 1, 0), 0); /* closed after "Connection: close" */
    close(fd);
    /* HTTP/1.0 without keep-alive: closed too */
    resp r4 = once(h, "POST /echo HTTP/1.0\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r4.status, 200);
    assert_true(r4.close);
    fl_httpd_stop(h);
}

static void test_limits(void **state) {
    fl_httpd *h = start(100);
    resp r = once(h, "POST /echo HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 0);
    assert_int_equal(r.status, 413);
    assert_true(r.close);
    assert_non_null(strstr(r.body, "Content Too Large")); /* RFC 9110's name for 413 */
    char big[400];
    int n = snprintf(big, sizeof big, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      "40\r\n%064d\r\n40\r\n%064d\r\n0\r\n\r\n", 1, 2);
    r = once(h, big, (size_t)n);
    assert_int_equal(r.status, 413);
    char hdr[2048];
    n = snprintf(hdr, sizeof hdr, "POST /echo HTTP/1.1\r\nX-Big: %01500d\r\n\r\n", 7);
    r = once(h, hdr, (size_t)n);
    assert_int_equal(r.status, 431);
    fl_httpd_stop(h);
}

static void test_bad_requests(void **state) {
    fl_httpd *h = start(1 << 20);
    /* no request line at all: libmicrohttpd closes without a word */
    assert_true(closed_silently(h, "GARBAGE\r\n\r\n"));
    assert_int_equal(once(h, "POST /echo HTTP/2.0\r\n\r\n", 0).status, 505);
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 0).status, 400);
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", 0).status, 400);
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nno colon here\r\n\r\n", 0).status, 400);
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0).status, 400);
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nContent-Encoding: br\r\n\r\n", 0).status, 415);
    resp r = once(h, "GET /nope HTTP/1.1\r\n\r\n", 0);
    assert_int_equal(r.status, 404);
    assert_false(r.close); /* a handler's 404 keeps the connection */
    assert_non_null(strstr(r.body, "Not Found"));
    fl_httpd_stop(h);
}

static void test_gzip_expect(void **state) {
    fl_httpd *h = start(1 << 20);
    const char *text = "{\"resourceSpans\":[]} compressed";
    unsigned char gz[256];
    z_stream z = {0};
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)strlen(text);
    z.next_out = gz;
    z.avail_out = sizeof gz;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t gzn = sizeof gz - z.avail_out;
    deflateEnd(&z);
    char req[512];
    int n = snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nContent-Encoding: gzip\r\n"
                                      "Expect: 100-continue\r\nContent-Length: %zu\r\n\r\n", gzn);
    int fd = dial(fl_httpd_port(h));
    rlen = 0;
    put(fd, req, (size_t)n);
    resp r = {0};
    assert_true(read_resp(fd, &r)); /* the interim 100 Continue */
    assert_int_equal(r.status, 100);
    put(fd, (const char *)gz, gzn);
    assert_true(read_resp(fd, &r));
    assert_int_equal(r.status, 200);
    cJSON *j = json_of(&r);
    assert_string_equal(cJSON_GetObjectItem(j, "body")->valuestring, text);
    cJSON_Delete(j);
    close(fd);
    /* a corrupt gzip body */
    assert_int_equal(once(h, "POST /echo HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 4"
                             "\r\n\r\nabcd", 0).status, 400);
    fl_httpd_stop(h);
}

static void test_addresses(void **state) {
    fl_httpd *h = NULL;
    fl_err e = {0};
    assert_int_equal(fl_httpd_start("127.0.0.1", NULL, echo, NULL, &h, &e), FL_ERR_ARG);
    assert_non_null(strstr(e.msg, "HOST:PORT"));
    assert_int_equal(fl_httpd_start("127.0.0.1:99999", NULL, echo, NULL, &h, &e), FL_ERR_ARG);
    assert_int_equal(fl_httpd_start("example.com:80", NULL, echo, NULL, &h, &e), FL_ERR_ARG);
    assert_null(h);
    /* a port in use is an I/O error naming the address */
    fl_httpd *a = start(100);
    char addr[64];
    snprintf(addr, sizeof addr, "localhost:%d", fl_httpd_port(a));
    assert_int_equal(fl_httpd_start(addr, NULL, echo, NULL, &h, &e), FL_ERR_IO);
    assert_non_null(strstr(e.msg, addr));
    fl_httpd_stop(a);
    fl_httpd_stop(NULL);
}

/* Connections over max_conns get a 503; an idle keep-alive connection does not hold up
 * fl_httpd_stop. */
static void test_conns_and_stop(void **state) {
    fl_httpd_opts o;
    fl_httpd_opts_default(&o);
    o.max_conns = 2;
    fl_httpd *h = NULL;
    fl_err e = {0};
    assert_int_equal(fl_httpd_start("127.0.0.1:0", &o, echo, NULL, &h, &e), FL_OK);
    int a = dial(fl_httpd_port(h)), b = dial(fl_httpd_port(h));
    usleep(100000); /* both accepted, both idle */
    resp r = once(h, "POST /echo HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.status, 503);
    close(b);
    usleep(150000); /* its thread ends; the slot is reused */
    r = once(h, "POST /echo HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(r.status, 200);
    double t0 = fl_now();
    fl_httpd_stop(h); /* `a` is still open and silent */
    assert_true(fl_now() - t0 < 1.0);
    char c;
    assert_int_equal(recv(a, &c, 1, 0), 0);
    close(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length), cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_keep_alive),     cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bad_requests),   cmocka_unit_test(test_gzip_expect),
        cmocka_unit_test(test_addresses),      cmocka_unit_test(test_conns_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
