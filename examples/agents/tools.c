/* tools.c — the Worker's tools: a calculator, a tiny knowledge base, a file sandbox and a
 * phrase-book translator. Each tool reports its call and result as protocol events; tool
 * failures come back as ok:false with a reason, which the caller must handle. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "taskforce.h"

/* ---- calculate ---------------------------------------------------------------------------
 * Recursive descent over doubles:
 *     expr   = term { ("+" | "-") term }
 *     term   = power { ("*" | "/" | "%") power }
 *     power  = unary [ "^" power ]            (right-associative)
 *     unary  = "-" unary | "+" unary | atom
 *     atom   = number | "(" expr ")"
 * Exact mode (the tool's default) fails on division by zero, a math domain error, or a result
 * beyond 1e15 ("overflow": it could no longer be given to the last digit). Float mode always
 * answers: the double result, or "undefined: <reason>" when it is not finite. Syntax mode only
 * parses (the Worker's check of a call before making it). The nesting depth is bounded so that
 * inputs like "((((((..." fail cleanly instead of exhausting the stack. */
#define CALC_LIMIT 1e15
#define CALC_MAX_DEPTH 64

typedef struct calc {
    const char *p;
    tf_calc_mode mode;
    int depth;
    char *err;
    size_t err_len;
    int failed; /* a syntax error, or an arithmetic one in exact mode: stop */
    int noted;  /* an arithmetic problem noted (float / syntax modes carry on) */
} calc;

static double fail(calc *c, const char *msg) {
    if (!c->failed) snprintf(c->err, c->err_len, "%s", msg);
    c->failed = 1;
    return 0;
}

/* An arithmetic problem: fatal in exact mode, noted (first one wins) otherwise. */
static double arith(calc *c, const char *msg, double v) {
    if (c->mode == TF_CALC_EXACT) return fail(c, msg);
    if (!c->noted && !c->failed) snprintf(c->err, c->err_len, "%s", msg);
    c->noted = 1;
    return v;
}

static void skip(calc *c) {
    while (*c->p == ' ' || *c->p == '\t') c->p++;
}

static double checked(calc *c, double v) {
    if (c->failed) return 0;
    if (isnan(v)) return arith(c, "math domain error", v);
    if (!isfinite(v) || fabs(v) > CALC_LIMIT) return arith(c, "overflow: result exceeds 1e15", v);
    return v;
}

static double expr(calc *c);

static double atom(calc *c) {
    skip(c);
    if (*c->p == '(') {
        if (++c->depth > CALC_MAX_DEPTH) return fail(c, "expression nested too deeply");
        c->p++;
        double v = expr(c);
        skip(c);
        if (c->failed) return 0;
        if (*c->p != ')') return fail(c, "syntax error: missing ')'");
        c->p++;
        c->depth--;
        return v;
    }
    if (isdigit((unsigned char)*c->p) || (*c->p == '.' && isdigit((unsigned char)c->p[1]))) {
        double v = 0, scale = 0;
        for (; isdigit((unsigned char)*c->p) || *c->p == '.'; c->p++) {
            if (*c->p == '.') {
                if (scale) return fail(c, "syntax error: two decimal points in a number");
                scale = 1;
            } else if (scale) {
                scale /= 10;
                v += (*c->p - '0') * scale;
            } else {
                v = v * 10 + (*c->p - '0');
            }
        }
        return checked(c, v);
    }
    char msg[64];
    if (*c->p)
        snprintf(msg, sizeof msg, "syntax error at '%c'", *c->p);
    else
        snprintf(msg, sizeof msg, "syntax error: unexpected end of expression");
    return fail(c, msg);
}

static double unary(calc *c) {
    skip(c);
    if (*c->p == '-' || *c->p == '+') {
        if (++c->depth > CALC_MAX_DEPTH) return fail(c, "expression nested too deeply");
        int neg = *c->p++ == '-';
        double v = unary(c);
        c->depth--;
        return neg ? -v : v;
    }
    return atom(c);
}

static double power(calc *c) {
    double base = unary(c);
    skip(c);
    if (*c->p != '^' || c->failed) return base;
    c->p++;
    if (++c->depth > CALC_MAX_DEPTH) return fail(c, "expression nested too deeply");
    double e = power(c);
    c->depth--;
    if (c->failed) return 0;
    if (base == 0 && e < 0) return arith(c, "division by zero", INFINITY);
    return checked(c, pow(base, e));
}

static double term(calc *c) {
    double v = power(c);
    for (;;) {
        skip(c);
        char op = *c->p;
        if ((op != '*' && op != '/' && op != '%') || c->failed) return v;
        c->p++;
        double r = power(c);
        if (c->failed) return 0;
        if ((op == '/' || op == '%') && r == 0) {
            v = arith(c, "division by zero", op == '%' || v == 0 ? NAN : v > 0 ? INFINITY : -INFINITY);
            continue;
        }
        v = checked(c, op == '*' ? v * r : op == '/' ? v / r : fmod(v, r));
    }
}

static double expr(calc *c) {
    double v = term(c);
    for (;;) {
        skip(c);
        char op = *c->p;
        if ((op != '+' && op != '-') || c->failed) return v;
        c->p++;
        double r = term(c);
        v = checked(c, op == '+' ? v + r : v - r);
    }
}

int tf_calc(const char *text, tf_calc_mode mode, double *value, char *err, size_t err_len) {
    calc c = {.p = text, .mode = mode, .err = err, .err_len = err_len};
    err[0] = 0;
    double v = expr(&c);
    skip(&c);
    if (!c.failed && *c.p) {
        char msg[64];
        snprintf(msg, sizeof msg, "syntax error at '%c'", *c.p);
        fail(&c, msg);
    }
    if (c.failed) return 0;
    *value = v == 0 ? 0 : v; /* no "-0" */
    return 1;
}

void tf_format_number(double v, char *out, size_t n) {
    if (v == floor(v) && fabs(v) < CALC_LIMIT)
        snprintf(out, n, "%.0f", v);
    else
        snprintf(out, n, "%.10g", v);
}

int tf_tool_calculate(tf_session *s, const char *agent, const char *text, tf_calc_mode mode, tf_buf *out) {
    (void)s;
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "expression", text);
    if (mode == TF_CALC_FLOAT) cJSON_AddStringToObject(args, "mode", "float");
    tf_emit_tool_call(agent, "calculate", args);
    double v;
    char err[128];
    tf_buf_clear(out);
    int ok = tf_calc(text, mode, &v, err, sizeof err);
    if (!ok) {
        tf_buf_put(out, err);
    } else if (!isfinite(v)) {
        tf_buf_printf(out, "undefined: %s", err[0] ? err : "overflow");
    } else {
        char num[64];
        tf_format_number(v, num, sizeof num);
        tf_buf_put(out, num);
    }
    tf_emit_tool_result(agent, "calculate", ok, tf_buf_cstr(out));
    return ok;
}

/* ---- search: a built-in knowledge base ---------------------------------------------------
 * An entry matches when its entity is in the query and its topic is in the query or in the
 * conversation context (so "And what about Germany?" after a question about capitals works).
 * A broad search accepts the entity alone. */
typedef struct kb_entry {
    const char *topic, *entity, *answer;
} kb_entry;

static const kb_entry kb[] = {
    {"capital", "france", "The capital of France is Paris."},
    {"capital", "germany", "The capital of Germany is Berlin."},
    {"capital", "japan", "The capital of Japan is Tokyo."},
    {"capital", "italy", "The capital of Italy is Rome."},
    {"capital", "spain", "The capital of Spain is Madrid."},
    {"capital", "canada", "The capital of Canada is Ottawa."},
    {"capital", "brazil", "The capital of Brazil is Brasilia."},
    {"capital", "china", "The capital of China is Beijing."},
    {"capital", "australia", "The capital of Australia is Canberra."},
    {"tall", "everest", "Mount Everest is 8,849 metres tall."},
    {"high", "everest", "Mount Everest is 8,849 metres high."},
    {"ocean", "largest", "The Pacific is the largest ocean."},
    {"speed", "light", "Light travels at 299,792,458 metres per second."},
    {"boil", "water", "Water boils at 100 degrees Celsius at sea level."},
    {"wrote", "hamlet", "Hamlet was written by William Shakespeare."},
    {"painted", "mona lisa", "The Mona Lisa was painted by Leonardo da Vinci."},
    {"moon", "distance", "The Moon is about 384,400 km from Earth."},
    {"", "photosynthesis", "Photosynthesis turns light, water and CO2 into sugar and oxygen."},
    {"", "python", "Python is a programming language created by Guido van Rossum."},
    {"world war", "end", "The Second World War ended in 1945."},
    {"首都", "法国", "法国的首都是巴黎。"},
    {"首都", "日本", "日本的首都是东京。"},
    {"首都", "中国", "中国的首都是北京。"},
};
#define KB_N (int)(sizeof kb / sizeof kb[0])

static const kb_entry *kb_find(const char *query, const char *context, int broad) {
    for (int i = 0; i < KB_N; i++) {
        if (!tf_has(query, kb[i].entity)) continue;
        if (broad || tf_has(query, kb[i].topic) || (context && tf_has(context, kb[i].topic)))
            return &kb[i];
    }
    return NULL;
}

int tf_tool_search(tf_session *s, const char *agent, const char *query, int broad, tf_buf *out) {
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "query", query);
    if (broad) cJSON_AddBoolToObject(args, "broad", 1);
    tf_emit_tool_call(agent, "search", args);
    const kb_entry *hit = kb_find(query, s->context, broad);
    tf_buf_clear(out);
    tf_buf_put(out, hit ? hit->answer : "");
    tf_emit_tool_result(agent, "search", 1, hit ? hit->answer : "no results");
    return 1;
}

/* ---- write_file / read_file: an in-memory sandbox, emptied for every request ------------- */
static int valid_path(const char *p) {
    size_t n = strlen(p);
    if (n == 0 || n >= sizeof(((tf_file *)0)->path) || p[0] == '.') return 0;
    for (; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-') return 0;
    return 1;
}

static tf_file *find_file(tf_session *s, const char *path) {
    for (int i = 0; i < s->n_files; i++)
        if (strcmp(s->files[i].path, path) == 0) return &s->files[i];
    return NULL;
}

int tf_tool_write_file(tf_session *s, const char *agent, const char *path, const char *content,
                       tf_buf *out) {
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "path", path);
    cJSON_AddStringToObject(args, "content", content);
    tf_emit_tool_call(agent, "write_file", args);
    tf_buf_clear(out);
    tf_file *f = valid_path(path) ? find_file(s, path) : NULL;
    int ok = 1;
    if (!valid_path(path)) {
        tf_buf_printf(out, "invalid path: %s", path);
        ok = 0;
    } else if (!f && s->n_files == TF_MAX_FILES) {
        tf_buf_put(out, "sandbox full");
        ok = 0;
    } else {
        if (!f) {
            f = &s->files[s->n_files++];
            snprintf(f->path, sizeof f->path, "%s", path);
        }
        tf_buf_clear(&f->content);
        tf_buf_put(&f->content, content);
        tf_buf_printf(out, "wrote %zu bytes to %s", strlen(content), path);
    }
    tf_emit_tool_result(agent, "write_file", ok, tf_buf_cstr(out));
    return ok;
}

int tf_tool_read_file(tf_session *s, const char *agent, const char *path, tf_buf *out) {
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "path", path);
    tf_emit_tool_call(agent, "read_file", args);
    tf_buf_clear(out);
    tf_file *f = valid_path(path) ? find_file(s, path) : NULL;
    if (f)
        tf_buf_put(out, tf_buf_cstr(&f->content));
    else
        tf_buf_printf(out, "no such file: %s", path);
    tf_emit_tool_result(agent, "read_file", f != NULL, tf_buf_cstr(out));
    return f != NULL;
}

/* ---- translate: a phrase book, longest phrase first, unknown words kept ------------------ */
typedef struct phrase {
    const char *en, *fr, *es, *de, *zh;
} phrase;

static const phrase book[] = {
    {"good morning", "bonjour", "buenos días", "guten Morgen", "早上好"},
    {"good night", "bonne nuit", "buenas noches", "gute Nacht", "晚安"},
    {"thank you", "merci", "gracias", "danke", "谢谢"},
    {"how are you", "comment ça va", "cómo estás", "wie geht's", "你好吗"},
    {"hello", "bonjour", "hola", "hallo", "你好"},
    {"goodbye", "au revoir", "adiós", "auf Wiedersehen", "再见"},
    {"please", "s'il vous plaît", "por favor", "bitte", "请"},
    {"friend", "ami", "amigo", "Freund", "朋友"},
    {"cat", "chat", "gato", "Katze", "猫"},
    {"dog", "chien", "perro", "Hund", "狗"},
    {"water", "eau", "agua", "Wasser", "水"},
    {"love", "amour", "amor", "Liebe", "爱"},
    {"yes", "oui", "sí", "ja", "是"},
    {"no", "non", "no", "nein", "不"},
    {"the", "le", "el", "der", "这"},
    {"weather", "temps", "tiempo", "Wetter", "天气"},
    {"is", "est", "es", "ist", "是"},
    {"nice", "beau", "bueno", "schön", "好"},
};
#define BOOK_N (int)(sizeof book / sizeof book[0])

static const char *in_lang(const phrase *ph, const char *lang) {
    return !strcmp(lang, "fr") ? ph->fr : !strcmp(lang, "es") ? ph->es
         : !strcmp(lang, "de") ? ph->de : ph->zh;
}

int tf_tool_translate(tf_session *s, const char *agent, const char *text, const char *lang,
                      tf_buf *out) {
    (void)s;
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "text", text);
    cJSON_AddStringToObject(args, "to", lang);
    tf_emit_tool_call(agent, "translate", args);
    tf_buf_clear(out);
    int ok = 0;
    if (strcmp(lang, "fr") && strcmp(lang, "es") && strcmp(lang, "de") && strcmp(lang, "zh")) {
        tf_buf_printf(out, "unsupported language: %s", lang);
    } else if (!*text) {
        tf_buf_put(out, "nothing to translate");
    } else {
        ok = 1;
        tf_buf_put(out, "");
        const char *p = text;
        while (*p) {
            int best = -1;
            size_t best_len = 0;
            for (int i = 0; i < BOOK_N; i++) {
                size_t m = strlen(book[i].en);
                if (m > best_len && strncasecmp(p, book[i].en, m) == 0 && !isalpha((unsigned char)p[m]))
                    best = i, best_len = m;
            }
            if (best >= 0) {
                tf_buf_put(out, in_lang(&book[best], lang));
                p += best_len;
            } else { /* copy the word (or the separator) as it is */
                const char *q = p;
                if (isalpha((unsigned char)*q))
                    while (isalpha((unsigned char)*q)) q++;
                else
                    q++;
                tf_buf_putn(out, p, (size_t)(q - p));
                p = q;
            }
        }
    }
    tf_emit_tool_result(agent, "translate", ok, tf_buf_cstr(out));
    return ok;
}
