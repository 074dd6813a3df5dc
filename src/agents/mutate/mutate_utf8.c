/* UTF-8 units, character classes, word and sentence segmentation, and the string builder the
 * mutators write into. Every mutator cuts text only at the unit boundaries computed here,
 * which is what keeps valid UTF-8 valid. */
#include <stdlib.h>
#include <string.h>

#include "agents/mutate/mutate_int.h"

static int cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* The well-formed byte sequences of Unicode 15, table 3-7 (no overlongs, no surrogates,
 * nothing above U+10FFFF). */
size_t mt_u8_seq(const char *s, size_t n, size_t i) {
    const unsigned char *p = (const unsigned char *)s + i;
    size_t left = n - i;
    if (i >= n) return 0;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(p[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(p[1]) || !cont(p[2])) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(p[1]) || !cont(p[2]) || !cont(p[3])) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

size_t mt_u8_unit(const char *s, size_t n, size_t i) {
    size_t k = mt_u8_seq(s, n, i);
    return k ? k : 1;
}

uint32_t mt_u8_decode(const char *s, size_t n, size_t i) {
    const unsigned char *p = (const unsigned char *)s + i;
    switch (mt_u8_seq(s, n, i)) {
    case 1: return p[0];
    case 2: return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3: return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    case 4:
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    default: return i < n ? p[0] : 0;
    }
}

/* A byte that is not a continuation byte always starts a unit (continuation bytes occur only
 * inside sequences), so look back at most three bytes for a sequence that covers i. */
size_t mt_u8_floor(const char *s, size_t n, size_t i) {
    if (i >= n) return n;
    for (size_t j = i; j > 0 && i - j < 3;) {
        j--;
        if (!cont((unsigned char)s[j])) return j + mt_u8_unit(s, n, j) > i ? j : i;
    }
    return i;
}

size_t mt_u8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i += mt_u8_unit(s, n, i)) k++;
    return k;
}

size_t mt_u8_offset(const char *s, size_t n, size_t k) {
    size_t i = 0;
    while (k-- > 0 && i < n) i += mt_u8_unit(s, n, i);
    return i;
}

int mt_u8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)), out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)), out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int fl_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = mt_u8_seq(s, n, i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

int mt_is_space_cp(uint32_t cp) {
    return cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0xA0 || cp == 0x3000 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x85;
}

int mt_is_punct_cp(uint32_t cp) {
    if (cp < 0x80) return cp > 32 && cp < 127 && !mt_is_alnum((unsigned char)cp) && cp != '_';
    return (cp >= 0x2000 && cp <= 0x206F) ||  /* general punctuation, ZW*, bidi controls */
           (cp >= 0x3000 && cp <= 0x303F) ||  /* CJK symbols and punctuation */
           (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
           (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65) ||
           (cp >= 0x0300 && cp <= 0x036F) ||  /* combining marks */
           (cp >= 0xFE00 && cp <= 0xFE0F) ||  /* variation selectors */
           cp == 0xFEFF || cp == 0xAD || (cp >= 0x80 && cp < 0xA0) || cp == 0xB7;
}

int mt_has_cjk(const char *s, size_t n) {
    for (size_t i = 0; i < n; i += mt_u8_unit(s, n, i)) {
        uint32_t cp = mt_u8_decode(s, n, i);
        if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
            (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFF00 && cp <= 0xFFEF))
            return 1;
    }
    return 0;
}

const char *mt_pick_lang(fl_rng *r, int mix, const char *s, size_t n, const char *const *en,
                         int n_en, const char *const *zh, int n_zh) {
    int cjk = mt_has_cjk(s, n);
    int other = mix >= 2 || (mix == 1 && fl_rng_below(r, 4) == 0);
    int want_zh = other ? !cjk : cjk;
    return want_zh ? mt_pick(r, zh, n_zh) : mt_pick(r, en, n_en);
}

int mt_has_han(const char *s, size_t n) {
    for (size_t i = 0; i < n; i += mt_u8_unit(s, n, i)) {
        uint32_t cp = mt_u8_decode(s, n, i);
        if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF)) return 1;
    }
    return 0;
}

const char *mt_pick_kept(const mt_env *env, const char *s, size_t n, const char *const *list,
                         int cnt) {
    const char *v = mt_pick(env->r, list, cnt);
    if (env->m->o.mix_lang || mt_has_han(s, n)) return v;
    for (int tries = 0; tries < 16 && mt_has_han(v, strlen(v)); tries++) v = mt_pick(env->r, list, cnt);
    return v;
}

/* ---- segmentation --------------------------------------------------------------------------- */
static int push_span(mt_span **v, int *n, int *cap, size_t at, size_t len, int kind) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        mt_span *nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        *v = nv, *cap = nc;
    }
    (*v)[(*n)++] = (mt_span){at, len, kind};
    return 0;
}

static int word_byte(unsigned char c) { return mt_is_alnum(c) || c == '\'' || c == '_'; }

int mt_words(const char *s, size_t n, mt_span **out) {
    mt_span *v = NULL;
    int k = 0, cap = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (mt_is_alnum(c)) {
            size_t j = i;
            while (j < n && word_byte((unsigned char)s[j])) j++;
            while (j > i + 1 && s[j - 1] == '\'') j--; /* "users'" -> users */
            if (push_span(&v, &k, &cap, i, j - i, 0)) goto oom;
            i = j;
            continue;
        }
        size_t u = mt_u8_unit(s, n, i);
        if (c >= 0x80 && mt_u8_seq(s, n, i)) {
            uint32_t cp = mt_u8_decode(s, n, i);
            if (!mt_is_space_cp(cp) && !mt_is_punct_cp(cp) && push_span(&v, &k, &cap, i, u, 1))
                goto oom;
        }
        i += u;
    }
    *out = v;
    return k;
oom:
    free(v);
    *out = NULL;
    return -1;
}

static int is_end_cp(uint32_t cp, int clauses) {
    if (cp == '!' || cp == '?' || cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F || cp == '\n')
        return 1;
    return clauses && (cp == ',' || cp == ';' || cp == 0xFF0C || cp == 0xFF1B || cp == 0x3001);
}

static int trim_push(const char *s, size_t a, size_t b, mt_span **v, int *k, int *cap) {
    while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r')) a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\n' || s[b - 1] == '\r')) b--;
    return b > a ? push_span(v, k, cap, a, b - a, 0) : 0;
}

int mt_sentences(const char *s, size_t n, int clauses, mt_span **out) {
    mt_span *v = NULL;
    int k = 0, cap = 0;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        size_t u = mt_u8_unit(s, n, i);
        uint32_t cp = mt_u8_decode(s, n, i);
        int end = is_end_cp(cp, clauses);
        /* "3.14", "e.g." and "example.com" are not sentence ends: an ASCII '.' ends a sentence
         * only before whitespace or the end of the text */
        if (cp == '.') end = i + 1 >= n || s[i + 1] == ' ' || s[i + 1] == '\n' || s[i + 1] == '\t';
        i += u;
        if (!end) continue;
        /* keep a run of terminators and closing quotes with the sentence ("Why?!", "Stop.\"") */
        while (i < n && strchr(".!?\"')", s[i]) && s[i]) i++;
        if (trim_push(s, start, i, &v, &k, &cap)) goto oom;
        start = i;
    }
    if (trim_push(s, start, n, &v, &k, &cap)) goto oom;
    *out = v;
    return k;
oom:
    free(v);
    *out = NULL;
    return -1;
}

/* ---- words into a string -------------------------------------------------------------------- */
void mt_put_word(fl_sb *b, const char *s, size_t n) {
    if (b->n && n) {
        unsigned char prev = (unsigned char)b->p[b->n - 1], next = (unsigned char)s[0];
        if (prev < 0x80 && next < 0x80 && prev != ' ' && prev != '\n' && next != ' ' &&
            next != '\n' && !strchr(",.;:!?)", (char)next))
            fl_sb_putc(b, ' ');
    }
    fl_sb_put(b, s, n);
}

void mt_insert_word(fl_sb *b, const char *s, size_t n, size_t at, const char *w) {
    fl_sb_put(b, s, at);
    mt_put_word(b, w, strlen(w));
    mt_put_word(b, s + at, n - at);
}
