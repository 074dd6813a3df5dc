/* worker.c — one part of a task, from the Master's instruction through the Worker's tool use
 * and the Checker's review back to the Master.
 *
 * Normal flow:   Master → Worker (instruction) → tools → Worker → Checker (draft)
 *                Checker → Worker (revise, at most once)  …  Checker → Master (approved)
 * Tool failure:  Worker → Master (escalation); the Master must recover (taskforce.c).
 *
 * Planted here: the review loop (TF_BUG_LOOP: the Worker's rounding policy ignores the
 * Checker's request for an exact value) and half of the ignored tool error (TF_BUG_TOOLERR:
 * the Worker treats a calculator overflow as a precision warning and answers anyway). */
#define _POSIX_C_SOURCE 200809L /* strndup */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "taskforce.h"

const char *const tf_route_names[] = {"math", "search", "write", "file", "translate", "chat"};

/* The review loop gives up only after this many rounds. (The intended value was 3; a typo
 * that shipped, which is what makes the loop visible as a turn-limit violation.) */
#define MAX_REVIEW_ROUNDS 64

/* The translate tool's documented input limit. */
#define MAX_TRANSLATE 300

/* The Worker gives a part back to the Master: "<what> failed: <why>". */
static void escalate(const char *what, const char *why, tf_buf *result) {
    tf_buf msg = {0};
    tf_buf_printf(&msg, "%s failed: %s", what, why);
    tf_emit_message("Worker", "Master", msg.s);
    tf_buf_clear(result);
    tf_buf_put(result, msg.s);
    tf_buf_free(&msg);
}

static void approve(const char *answer, tf_buf *result) {
    tf_emit_branch("Checker", "verdict", "accept");
    tf_buf msg = {0};
    tf_buf_printf(&msg, "approved: %s", answer);
    tf_emit_message("Checker", "Master", msg.s);
    tf_buf_free(&msg);
    tf_buf_clear(result);
    tf_buf_put(result, answer);
}

/* ---- math --------------------------------------------------------------------------------- */
/* Rewrite number words into operators ("3 times 4" -> "3 * 4", "15% of 80" -> "15/100 * 80"),
 * then keep the run of expression characters holding the most digits. */
static char *extract_expression(const char *text) {
    static const char *const words[][2] = {
        {"multiplied by", "*"}, {"divided by", "/"}, {"to the power of", "^"}, {"% of", "/100 *"},
        {"plus", "+"}, {"minus", "-"}, {"times", "*"}, {"squared", "^2"}, {"mod", "%"},
    };
    tf_buf b = {0};
    tf_buf_put(&b, "");
    for (const char *p = text; *p;) {
        int hit = 0;
        for (size_t w = 0; w < sizeof words / sizeof words[0] && !hit; w++) {
            size_t m = strlen(words[w][0]);
            if (strncasecmp(p, words[w][0], m) == 0 && !isalpha((unsigned char)p[m]) &&
                (p == text || !isalpha((unsigned char)p[-1]) || words[w][0][0] == '%')) {
                tf_buf_put(&b, words[w][1]);
                p += m;
                hit = 1;
            }
        }
        if (hit) continue;
        /* "3 x 4" and "3x4": an x between two numbers multiplies */
        size_t back = b.n;
        while (back && b.s[back - 1] == ' ') back--;
        const char *ahead = p + 1;
        while (*ahead == ' ') ahead++;
        if ((*p == 'x' || *p == 'X') && back && isdigit((unsigned char)b.s[back - 1]) &&
            isdigit((unsigned char)*ahead)) {
            tf_buf_put(&b, "*");
            p++;
            continue;
        }
        tf_buf_putn(&b, p++, 1);
    }
    const char *best = NULL;
    size_t best_len = 0;
    int best_digits = 0;
    for (const char *p = b.s; *p;) {
        size_t n = strspn(p, "0123456789.+-*/^%() \t");
        int digits = 0;
        for (size_t i = 0; i < n; i++) digits += isdigit((unsigned char)p[i]) != 0;
        if (digits > best_digits) best = p, best_len = n, best_digits = digits;
        p += n ? n : 1;
    }
    char *out = malloc(best_len + 1);
    size_t start = 0;
    while (start < best_len && best[start] == ' ') start++;
    while (best_len > start && best[best_len - 1] == ' ') best_len--;
    memcpy(out, best ? best + start : "", best_len - start);
    out[best_len - start] = 0;
    tf_buf_free(&b);
    return out;
}

int tf_is_math(const char *text) {
    if (!strpbrk(text, "0123456789")) return 0;
    char *e = extract_expression(text);
    int ops = 0;
    for (const char *p = e; *p; p++)
        if (strchr("+*/^%", *p) || (*p == '-' && p > e)) ops++;
    free(e);
    return ops > 0 || tf_has(text, "calculate") || tf_has(text, "compute") ||
           tf_has(text, "how much is");
}

static int has_long_number(const char *e) {
    for (const char *p = e; *p;) {
        size_t n = strspn(p, "0123456789");
        if (n >= 10) return 1;
        p += n ? n : 1;
    }
    return 0;
}

static void math_draft(const char *expr, tf_buf *value, int rounded, int approx_only, tf_buf *draft) {
    tf_buf_clear(draft);
    double v = strtod(tf_buf_cstr(value), NULL);
    if (rounded)
        tf_buf_printf(draft, "%s ≈ %.6g%s", expr, v, approx_only ? " (the exact value is out of range)" : "");
    else
        tf_buf_printf(draft, "%s = %s", expr, tf_buf_cstr(value));
}

static tf_part_status work_math(tf_session *s, const char *part, tf_buf *result) {
    char *expr = extract_expression(part);
    tf_buf msg = {0}, value = {0}, draft = {0};
    tf_buf_printf(&msg, "calculate: %s", expr);
    tf_emit_message("Master", "Worker", msg.s);
    /* "exact" asks the Checker to insist on every digit; "approximately" (or long operands,
     * which the Worker shortens for readability) makes the Worker round */
    int long_number = has_long_number(expr);
    int want_exact = tf_has(part, "exact") || long_number;
    int rounded = tf_has(part, "approx") || tf_has(part, "roughly") || long_number;
    int approx_only = 0; /* only a floating-point value could be had */
    tf_part_status st = TF_PART_OK;
    double ignored;
    char why[128];
    /* the Worker checks a call before making it: an expression that does not parse goes back
     * to the Master without a tool call */
    if (!tf_calc(expr, TF_CALC_SYNTAX, &ignored, why, sizeof why)) {
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "calculate \"%s\"", expr);
        escalate(msg.s, why, result);
        st = TF_PART_FAILED;
        goto out;
    }
    if (!tf_tool_calculate(s, "Worker", expr, TF_CALC_EXACT, &value)) {
        int overflow = strncmp(value.s, "overflow", 8) == 0;
        if ((tf_bugs & TF_BUG_TOOLERR) && overflow) {
            /* BUG (toolerror): an overflow is taken for a loss of precision; the Worker answers
             * with the calculator's limit as if it were the value, without retrying */
            tf_buf_clear(&value);
            tf_buf_put(&value, "1e15");
            rounded = 1;
        } else if ((tf_bugs & TF_BUG_TOOLERR) && s->multi_part) {
            /* BUG (toolerror): in a multi-part task the Worker gets one tool call per part, so
             * there is no retry; the Master then drops the failed part (taskforce.c) */
            escalate("calculate", value.s, result);
            st = TF_PART_FAILED;
            goto out;
        } else {
            /* recovery: the same calculation in floating point */
            tf_tool_calculate(s, "Worker", expr, TF_CALC_FLOAT, &value);
            if (strncmp(value.s, "undefined", 9) == 0) {
                escalate("calculate", value.s, result);
                st = TF_PART_FAILED;
                goto out;
            }
            rounded = approx_only = 1;
        }
    }
    for (int round = 1;; round++) {
        math_draft(expr, &value, rounded, approx_only, &draft);
        tf_emit_message("Worker", "Checker", draft.s);
        if (!(want_exact && rounded && !approx_only) || round == MAX_REVIEW_ROUNDS) break;
        tf_emit_branch("Checker", "verdict", "revise");
        tf_emit_message("Checker", "Worker", "revise: the user wants the exact value, give every digit");
        if (!tf_tool_calculate(s, "Worker", expr, TF_CALC_EXACT, &value)) { /* the overflow bug */
            tf_buf_clear(&value);
            tf_buf_put(&value, "1e15");
        }
        /* BUG (loop): the rounding policy does not look at the Checker's feedback */
        if (!(tf_bugs & TF_BUG_LOOP)) rounded = 0;
    }
    approve(draft.s, result);
out:
    free(expr);
    tf_buf_free(&msg);
    tf_buf_free(&value);
    tf_buf_free(&draft);
    return st;
}

/* ---- search ------------------------------------------------------------------------------- */
static tf_part_status work_search(tf_session *s, const char *part, tf_buf *result) {
    tf_buf msg = {0}, found = {0};
    tf_buf_printf(&msg, "search: %s", part);
    tf_emit_message("Master", "Worker", msg.s);
    tf_tool_search(s, "Worker", part, 0, &found);
    if (found.n == 0) tf_tool_search(s, "Worker", part, 1, &found); /* broaden once */
    tf_part_status st = TF_PART_OK;
    if (found.n) {
        tf_emit_message("Worker", "Checker", found.s);
        approve(found.s, result);
    } else {
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "no information found about: %s", part);
        tf_emit_message("Worker", "Checker", msg.s);
        tf_emit_branch("Checker", "verdict", "reject");
        tf_emit_message("Checker", "Master", "rejected: the answer has no source");
        tf_buf_clear(result);
        tf_buf_put(result, "I could not find anything about that.");
        st = TF_PART_NOTFOUND;
    }
    tf_buf_free(&msg);
    tf_buf_free(&found);
    return st;
}

/* ---- write and read files ----------------------------------------------------------------- */
int tf_file_token(const char *text, size_t *at, size_t *len) {
    for (const char *p = text; *p; p++) {
        if (p != text && (isalnum((unsigned char)p[-1]) || strchr("_-.", p[-1]))) continue;
        size_t m = 0;
        while (isalnum((unsigned char)p[m]) || p[m] == '_' || p[m] == '-') m++;
        size_t ext = strncmp(p + m, ".txt", 4) == 0 ? 4 : strncmp(p + m, ".md", 3) == 0 ? 3 : 0;
        if (m && m + ext < sizeof(((tf_file *)0)->path) && ext && !isalnum((unsigned char)p[m + ext])) {
            *at = (size_t)(p - text);
            *len = m + ext;
            return 1;
        }
    }
    return 0;
}

/* The file the part names, or the default. */
static void file_name(const char *text, char *out, size_t n) {
    size_t at, len;
    if (tf_file_token(text, &at, &len))
        snprintf(out, n, "%.*s", (int)len, text + at);
    else
        snprintf(out, n, "draft.txt");
}

/* The words after "about" (up to punctuation, at most 60 bytes), or "the day". */
static void topic_of(const char *text, char *out, size_t n) {
    const char *p = NULL;
    for (const char *q = text; *q; q++)
        if (strncasecmp(q, "about ", 6) == 0 && (q == text || q[-1] == ' ')) p = q + 6;
    if (!p) {
        snprintf(out, n, "the day");
        return;
    }
    size_t m = strcspn(p, ".,;:!?\n");
    for (const char *q = p; q < p + m; q++)
        if (strncasecmp(q, " and ", 5) == 0 || strncasecmp(q, " then ", 6) == 0) m = (size_t)(q - p);
    if (m > 60) m = 60;
    while (m && ((unsigned char)p[m] & 0xc0) == 0x80) m--; /* whole characters only */
    while (m && p[m - 1] == ' ') m--;
    snprintf(out, n, "%.*s", (int)m, m ? p : "the day");
}

static tf_part_status work_write(tf_session *s, const char *part, tf_buf *result) {
    char file[64], topic[64];
    file_name(part, file, sizeof file);
    topic_of(part, topic, sizeof topic);
    const char *kind = tf_has(part, "poem") || tf_has(part, "haiku") || tf_has(part, "verse")
                           ? "poem"
                       : tf_has(part, "email") || tf_has(part, "letter") ? "email"
                       : tf_has(part, "story") ? "story" : "note";
    tf_buf msg = {0}, draft = {0}, res = {0};
    tf_buf_printf(&msg, "write a %s about %s and save it to %s", kind, topic, file);
    tf_emit_message("Master", "Worker", msg.s);
    static const char *const openings[3] = {"Here is", "This is", "Presenting"};
    const char *open = openings[tf_rand_below(s, 3)];
    if (!strcmp(kind, "poem"))
        tf_buf_printf(&draft, "%s a poem about %s:\nquiet words on %s,\nlight that lingers, slow and kind.",
                      open, topic, topic);
    else if (!strcmp(kind, "email"))
        tf_buf_printf(&draft, "%s an email.\nSubject: %s\nHello,\nI am writing about %s.", open, topic, topic);
    else
        tf_buf_printf(&draft, "%s a %s about %s.\nIt covers %s in a few words.", open, kind, topic, topic);
    /* a short piece needs no closing line, so the Checker has nothing to ask for */
    int closed = tf_has(part, "short");
    if (closed) tf_buf_put(&draft, "\nThe end.");
    tf_part_status st = TF_PART_OK;
    if (!tf_tool_write_file(s, "Worker", file, draft.s, &res)) {
        escalate("write_file", res.s, result);
        st = TF_PART_FAILED;
        goto out;
    }
    tf_buf_clear(&msg);
    tf_buf_printf(&msg, "draft in %s: %s", file, draft.s);
    tf_emit_message("Worker", "Checker", msg.s);
    if (!closed) {
        tf_emit_branch("Checker", "verdict", "revise");
        tf_emit_message("Checker", "Worker", "revise: the draft needs a closing line");
        tf_buf_put(&draft, !strcmp(kind, "email") ? "\nBest regards,\nWorker" : "\nThe end.");
        const char *failed = !tf_tool_write_file(s, "Worker", file, draft.s, &res) ? "write_file"
                             : !tf_tool_read_file(s, "Worker", file, &res)          ? "read_file"
                                                                                    : NULL;
        if (failed) {
            escalate(failed, res.s, result);
            st = TF_PART_FAILED;
            goto out;
        }
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "revised draft in %s: %s", file, res.s);
        tf_emit_message("Worker", "Checker", msg.s);
    }
    approve(draft.s, result);
out:
    tf_buf_free(&msg);
    tf_buf_free(&draft);
    tf_buf_free(&res);
    return st;
}

static tf_part_status work_file(tf_session *s, const char *part, tf_buf *result) {
    char file[64];
    file_name(part, file, sizeof file);
    tf_buf msg = {0}, res = {0};
    tf_buf_printf(&msg, "read %s", file);
    tf_emit_message("Master", "Worker", msg.s);
    tf_part_status st = TF_PART_OK;
    /* the Worker knows which files it wrote in this conversation and asks for no other */
    int known = 0;
    for (int i = 0; i < s->n_files; i++) known |= !strcmp(s->files[i].path, file);
    if (known && tf_tool_read_file(s, "Worker", file, &res)) {
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "%s contains: %s", file, res.s);
        tf_emit_message("Worker", "Checker", msg.s);
        approve(msg.s, result);
    } else {
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "read %s", file);
        escalate(msg.s, "no such file in this conversation", result);
        st = TF_PART_FAILED;
    }
    tf_buf_free(&msg);
    tf_buf_free(&res);
    return st;
}

/* ---- translate ---------------------------------------------------------------------------- */
/* Target language from "to French" / "into German" / "in Chinese"; the word after "to"/"into"
 * when it is none of those (then the tool refuses it); French by default. */
static void target_language(const char *part, char *lang, size_t n) {
    static const char *const names[][2] = {
        {"french", "fr"}, {"spanish", "es"}, {"german", "de"}, {"chinese", "zh"}, {"中文", "zh"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (tf_has(part, names[i][0])) {
            snprintf(lang, n, "%s", names[i][1]);
            return;
        }
    snprintf(lang, n, "fr");
    const char *last = NULL;
    for (const char *q = part; *q; q++)
        if (strncasecmp(q, " into ", 6) == 0 || strncasecmp(q, " to ", 4) == 0) last = q;
    if (!last) return;
    last += last[2] == 'n' ? 6 : 4;
    size_t m = 0;
    while (isalpha((unsigned char)last[m]) && m + 1 < n) m++;
    if (m) {
        for (size_t i = 0; i < m; i++) lang[i] = (char)tolower((unsigned char)last[i]);
        lang[m] = 0;
    }
}

/* The quoted text ('…', "…" or “…”), else what follows "translate" up to " to "/" into ". */
static char *source_text(const char *part) {
    static const char *const quotes[][2] = {{"'", "'"}, {"\"", "\""}, {"\xe2\x80\x9c", "\xe2\x80\x9d"}};
    for (size_t i = 0; i < 3; i++) {
        const char *a = strstr(part, quotes[i][0]);
        if (!a) continue;
        a += strlen(quotes[i][0]);
        const char *b = strstr(a, quotes[i][1]);
        if (b) return strndup(a, (size_t)(b - a));
    }
    const char *a = part;
    for (const char *q = part; *q; q++)
        if (strncasecmp(q, "translate", 9) == 0) {
            a = q + 9;
            break;
        }
    while (*a == ' ' || *a == ':') a++;
    size_t m = strlen(a);
    for (const char *q = a; *q; q++)
        if (strncasecmp(q, " to ", 4) == 0 || strncasecmp(q, " into ", 6) == 0) {
            m = (size_t)(q - a);
            break;
        }
    return strndup(a, m);
}

static tf_part_status work_translate(tf_session *s, const char *part, tf_buf *result) {
    char lang[32];
    target_language(part, lang, sizeof lang);
    char *text = source_text(part);
    tf_buf msg = {0}, res = {0};
    tf_buf_printf(&msg, "translate to %s: %s", lang, text);
    tf_emit_message("Master", "Worker", msg.s);
    tf_part_status st = TF_PART_OK;
    /* the Worker checks the call against the tool's description before making it */
    int supported = !strcmp(lang, "fr") || !strcmp(lang, "es") || !strcmp(lang, "de") || !strcmp(lang, "zh");
    size_t len = strlen(text);
    if (!supported || !len || len > MAX_TRANSLATE) {
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "translate to %s", lang);
        escalate(msg.s, !supported ? "unsupported language" : len ? "text too long (300 bytes at most)" : "nothing to translate",
                 result);
        st = TF_PART_FAILED;
    } else if (tf_tool_translate(s, "Worker", text, lang, &res)) {
        /* quote the source briefly: the answer is the translation */
        size_t q = len > 40 ? 40 : len;
        while (q < len && q && ((unsigned char)text[q] & 0xc0) == 0x80) q--;
        tf_buf_clear(&msg);
        tf_buf_printf(&msg, "\"%.*s%s\" in %s: %s", (int)q, text, q < len ? "…" : "", lang, res.s);
        tf_emit_message("Worker", "Checker", msg.s);
        approve(msg.s, result);
    } else {
        escalate("translate", res.s, result);
        st = TF_PART_FAILED;
    }
    free(text);
    tf_buf_free(&msg);
    tf_buf_free(&res);
    return st;
}

tf_part_status tf_work(tf_session *s, tf_route route, const char *part, tf_buf *result) {
    switch (route) {
    case TF_MATH: return work_math(s, part, result);
    case TF_SEARCH: return work_search(s, part, result);
    case TF_WRITE: return work_write(s, part, result);
    case TF_FILE: return work_file(s, part, result);
    case TF_TRANSLATE: return work_translate(s, part, result);
    case TF_CHAT: break; /* the Master answers small talk itself */
    }
    tf_buf_clear(result);
    return TF_PART_OK;
}
