/* FNV-1a, 64 bit (Fowler, Noll, Vo; draft-eastlake-fnv): one byte at a time, h ^= byte, then
 * h *= 1099511628211, from the offset basis 14695981039346656037. Cheap, stable across runs
 * and machines, and the same everywhere in flare: file checksums, names of saved files, keys of
 * in-memory sets. Not for anything an adversary chooses to collide. */
#include "flare/flare.h"

uint64_t fl_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FL_FNV_PRIME;
    return h;
}
