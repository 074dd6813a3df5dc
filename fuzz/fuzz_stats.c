/* libFuzzer harness for the campaign folder's fuzzer_stats reader (fl_fuzz_stats_get: how
 * nn fuzz -i - resumes its seed, seeds and scale from a folder it did not necessarily write):
 * any file must give, for any key and buffer size, a NUL-terminated value that fits — never
 * crash or write past the buffer. */
#include <stdlib.h>
#include <string.h>

#include "fuzzfile.h"
#include "flare/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256], dir[256];
    ff_write("out/fuzzer_stats", data, size, path, sizeof path);
    snprintf(dir, sizeof dir, "%s/out", ff_dir());
    static const char *const keys[] = {"seed", "seeds", "scale", "execs_done", "", "x y", "seed\n"};
    static const size_t caps[] = {1, 2, 8, 64, 4096};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            char *buf = malloc(caps[c]); /* exactly caps[c]: ASan sees a write past it */
            if (!buf) abort();
            int got = fl_fuzz_stats_get(dir, keys[k], buf, caps[c]);
            if (strnlen(buf, caps[c]) >= caps[c]) abort();
            if (!got && buf[0]) abort();
            free(buf);
        }
    return 0;
}
