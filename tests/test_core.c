/* src/core: the FNV-1a 64 hash against the published test vectors (the FNV authors' page and
 * draft-eastlake-fnv), and chaining. */
#include "testutil.h"

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
        cmocka_unit_test(test_fnv1a_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
