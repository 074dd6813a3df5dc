/* Core facilities the modules share: the growing string of core/text.h (appends across many
 * growths, printf past the capacity, NUL-terminated), its line walker (numbering, the last
 * line without '\n', a NUL byte, the first failure stops the walk), fl_file_parse (the
 * bytes and path reach the parser, its status comes back, a read failure skips it), and the
 * open-addressing index of flare/index.h (colliding and zero hashes, growth, copy, clear), and
 * the FNV-1a 64 hash against the published test vectors (the FNV authors' page and
 * draft-eastlake-fnv), and chaining; fl_file_map (a regular file mapped, an empty file read
 * instead, a missing file named). */
#include <unistd.h>

#include "testutil.h"

#include "core/text.h"
#include "flare/index.h"

static void test_sb(void **state) {
    (void)state;
    fl_sb b = {0};
    fl_sb_put(&b, "", 0);
    assert_non_null(b.p);
    assert_string_equal(b.p, "");
    char want[20000];
    size_t n = 0;
    for (int i = 0; i < 2000; i++) { /* many growths, each kind of append */
        if (i % 3 == 0) fl_sb_puts(&b, "ab"), want[n++] = 'a', want[n++] = 'b';
        else if (i % 3 == 1) fl_sb_putc(&b, 'c'), want[n++] = 'c';
        else fl_sb_printf(&b, "%d;", i), n += (size_t)sprintf(want + n, "%d;", i);
    }
    assert_false(b.oom);
    assert_int_equal(b.n, n);
    assert_memory_equal(b.p, want, n);
    assert_int_equal(b.p[b.n], 0);
    /* one printf far larger than the capacity */
    fl_sb c = {0};
    fl_sb_printf(&c, "%s=%05d", "k", 7);
    fl_sb_printf(&c, "[%.*s]", 4000, want);
    assert_true(n > 4000);
    assert_int_equal(c.n, 7 + 4002);
    assert_memory_equal(c.p, "k=00007[", 8);
    assert_memory_equal(c.p + 8, want, 4000);
    assert_string_equal(c.p + 4008, "]");
    free(b.p), free(c.p);
}

typedef struct seen {
    int n, stop_at;
    char lines[8][16];
    int numbers[8];
} seen;

static fl_status collect(void *ctx, const char *line, size_t n, const char *name, int lineno,
                         fl_err *e) {
    seen *s = ctx;
    if (lineno == s->stop_at) return fl_fail(e, FL_ERR_FORMAT, "%s:%d: stop", name, lineno);
    snprintf(s->lines[s->n], sizeof s->lines[0], "%.*s", (int)n, line);
    s->numbers[s->n++] = lineno;
    return FL_OK;
}

static void test_lines(void **state) {
    (void)state;
    fl_err e = {0};
    seen s = {0};
    const char *t = "one\n\nthree\r\nlast";
    assert_int_equal(fl_text_lines(t, strlen(t), "t.txt", collect, &s, &e), FL_OK);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.lines[0], "one");
    assert_string_equal(s.lines[1], "");
    assert_string_equal(s.lines[2], "three\r"); /* the reader decides about '\r' */
    assert_string_equal(s.lines[3], "last");
    assert_int_equal(s.numbers[3], 4);
    s = (seen){0};
    assert_int_equal(fl_text_lines("a\n", 2, "t.txt", collect, &s, &e), FL_OK);
    assert_int_equal(s.n, 1); /* a final '\n' ends the last line, it opens none */
    s = (seen){0};
    const char nul[] = "a\nb\0c\nd\n";
    assert_int_equal(fl_text_lines(nul, sizeof nul - 1, "n.txt", collect, &s, &e), FL_ERR_FORMAT);
    assert_string_equal(e.msg, "n.txt:2: NUL byte in a text file");
    assert_int_equal(s.n, 1); /* nothing after the bad line */
    s = (seen){.stop_at = 2};
    assert_int_equal(fl_text_lines("x\ny\nz\n", 6, "s.txt", collect, &s, &e), FL_ERR_FORMAT);
    assert_string_equal(e.msg, "s.txt:2: stop");
    assert_int_equal(s.n, 1);
}

typedef struct got {
    char text[64], path[128];
    size_t len;
    int calls;
} got;

static fl_status keep(const uint8_t *buf, size_t len, const char *path, void *out, fl_err *e) {
    got *g = out;
    g->calls++;
    g->len = len;
    snprintf(g->text, sizeof g->text, "%.*s", (int)len, (const char *)buf);
    snprintf(g->path, sizeof g->path, "%s", path);
    return len > 5 ? fl_fail(e, FL_ERR_FORMAT, "%s: too long", path) : FL_OK;
}

static void test_file_parse(void **state) {
    (void)state;
    char path[] = "/tmp/flare_test_core_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    close(fd);
    fl_err e = {0};
    got g = {0};
    assert_int_equal(fl_file_parse(path, keep, &g, &e), FL_OK);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.len, 3);
    assert_string_equal(g.text, "abc");
    assert_string_equal(g.path, path);
    fl_status st = fl_file_write_atomic(path, "abcdefgh", 8, &e);
    assert_int_equal(st, FL_OK);
    assert_int_equal(fl_file_parse(path, keep, &g, &e), FL_ERR_FORMAT); /* the parser's status */
    assert_non_null(strstr(e.msg, "too long"));
    unlink(path);
    g.calls = 0;
    assert_int_equal(fl_file_parse(path, keep, &g, &e), FL_ERR_IO);
    assert_int_equal(g.calls, 0);
    assert_non_null(strstr(e.msg, path));
}

static void test_file_map(void **state) {
    (void)state;
    char path[] = "/tmp/flare_test_core_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello map", 9), 9);
    close(fd);
    fl_err e = {0};
    fl_mapped f;
    assert_int_equal(fl_file_map(path, &f, &e), FL_OK);
    assert_int_equal(f.mapped, 1);
    assert_int_equal(f.len, 9);
    assert_memory_equal(f.data, "hello map", 9);
    fl_file_unmap(&f);
    assert_null(f.data);
    /* an empty file cannot be mapped: it is read (0 bytes) */
    assert_int_equal(fl_file_write_atomic(path, "", 0, &e), FL_OK);
    assert_int_equal(fl_file_map(path, &f, &e), FL_OK);
    assert_int_equal(f.mapped, 0);
    assert_int_equal(f.len, 0);
    fl_file_unmap(&f);
    unlink(path);
    assert_int_equal(fl_file_map(path, &f, &e), FL_ERR_IO);
    assert_non_null(strstr(e.msg, path));
    assert_null(f.data);
}

static const int64_t *g_keys;
static int same_key(const void *ctx, int64_t i) { return g_keys[i] == *(const int64_t *)ctx; }
/* A poor hash on purpose: 8 values, one of them 0, so that probes collide and wrap. */
static uint64_t poor(int64_t k) { return (uint64_t)(k % 8); }

static int64_t find(const fl_index *ix, int64_t k, int64_t *at) {
    return fl_index_find(ix, poor(k), same_key, &k, at);
}

static void test_index(void **state) {
    (void)state;
    int64_t keys[3000], at;
    g_keys = keys;
    fl_index ix = {0};
    assert_int_equal(find(&ix, 5, &at), -1); /* never reserved */
    assert_int_equal(at, -1);
    int64_t n = 0;
    for (int64_t k = 0; k < 3000; k++) {
        int64_t key = (k * 7919) % 1500; /* every key twice */
        assert_true(fl_index_reserve(&ix, n + 1));
        int64_t i = find(&ix, key, &at);
        if (i >= 0) {
            assert_int_equal(keys[i], key);
            continue;
        }
        keys[n] = key;
        fl_index_put(&ix, at, poor(key), n++);
    }
    assert_int_equal(n, 1500);
    assert_int_equal(ix.n, 1500);
    assert_true(ix.cap >= 2 * n && (ix.cap & (ix.cap - 1)) == 0);
    for (int64_t key = 0; key < 1500; key++) {
        int64_t i = find(&ix, key, &at);
        assert_true(i >= 0 && keys[i] == key);
    }
    assert_int_equal(find(&ix, 1500, &at), -1);
    fl_index cp = {0};
    assert_true(fl_index_copy(&cp, &ix));
    fl_index_clear(&ix);
    assert_int_equal(find(&ix, 7, &at), -1);
    assert_int_equal(ix.n, 0);
    int64_t i = find(&cp, 7, &at);
    assert_true(i >= 0 && keys[i] == 7);
    fl_index_free(&ix);
    fl_index_free(&cp);
    assert_int_equal(ix.cap, 0);
}

static void test_fnv1a_vectors(void **state) {
    (void)state;
    assert_true(FL_FNV_BASIS == 14695981039346656037ull);
    assert_true(FL_FNV_PRIME == 1099511628211ull);
    assert_true(fl_fnv1a(FL_FNV_BASIS, "", 0) == 0xcbf29ce484222325ull);
    assert_true(fl_fnv1a(FL_FNV_BASIS, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(fl_fnv1a(FL_FNV_BASIS, "foobar", 6) == 0x85944171f73967e8ull);
    /* chained pieces hash as one string */
    assert_true(fl_fnv1a(fl_fnv1a(FL_FNV_BASIS, "foo", 3), "bar", 3) == 0x85944171f73967e8ull);
    /* bytes above 0x7f are not sign-extended: "\xff" by hand, (basis ^ 0xff) * prime */
    assert_true(fl_fnv1a(FL_FNV_BASIS, "\xff", 1) == (0xcbf29ce484222325ull ^ 0xff) * 0x100000001b3ull);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sb),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_file_parse),
        cmocka_unit_test(test_file_map),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_fnv1a_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
