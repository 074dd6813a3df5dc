/* "Did you mean": the closest known word to a misspelt command, flag or layer name.
 *
 * Closeness is the optimal-string-alignment distance (Levenshtein plus swapped neighbours,
 * the commonest typo). A candidate counts as a suggestion only when the distance is small
 * against the word's length (1 for up to 4 characters, 2 up to 8, then a third of the
 * length), when one is a prefix of the other (a name cut short, at least 3 characters), or
 * when the word is part of the candidate ("conv1" of "/conv1/Conv_output_0"):
 * a suggestion that has little to do with what was typed is worse than none.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/onnx.h"

int cli_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 255 || m > 255) return n > m ? (int)(n - m) + 256 : (int)(m - n) + 256;
    /* three rows of the DP table: i-2, i-1, i */
    int rows[3][257];
    for (size_t j = 0; j <= m; j++) rows[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int *cur = rows[i % 3], *prev = rows[(i - 1) % 3], *pp = rows[(i + 1) % 3];
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (prev[j - 1] + cost < v) v = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            cur[j] = v;
        }
    }
    return rows[n % 3][m];
}

void cli_suggest_init(cli_suggest *s, const char *word) {
    s->word = word;
    s->best = NULL;
    s->score = 1 << 30;
}

/* Lower is closer; -1: not close enough to suggest. */
static int closeness(const char *word, const char *cand) {
    size_t n = strlen(word), m = strlen(cand);
    int d = cli_edit_distance(word, cand);
    int limit = n <= 4 ? 1 : n <= 8 ? 2 : (int)(n / 3);
    if (d <= limit) return d;
    size_t k = n < m ? n : m, diff = n > m ? n - m : m - n;
    if (k >= 3 && !strncmp(word, cand, k)) return limit + 1 + (int)diff;
    if (n >= 3 && strstr(cand, word)) return limit + 2 + (int)diff; /* "conv1" in a path */
    return -1;
}

void cli_suggest_add(cli_suggest *s, const char *cand) {
    if (!cand || !strcmp(cand, s->word)) return;
    int c = closeness(s->word, cand);
    if (c >= 0 && c < s->score) {
        s->score = c;
        s->best = cand;
    }
}

/* An unknown layer name: a usage error naming the model, with the closest layer name, or
 * else the first few layers, and where to see them all. */
static int unknown_layer(cli_cmd_id cmd, const char *flag, const char *model_path,
                         fl_model *m, const char *name) {
    fl_err e = {0};
    fl_layer_info *L = NULL;
    int n = fl_model_layers(m, &L, &e);
    if (n < 0) return cli_fail(&e);
    cli_suggest s;
    cli_suggest_init(&s, name);
    for (int i = 0; i < n; i++) cli_suggest_add(&s, L[i].name);
    char list[1024] = "";
    size_t k = 0;
    if (s.best) {
        snprintf(list, sizeof list, "did you mean %s?", s.best);
    } else {
        k = (size_t)snprintf(list, sizeof list, "layers are:");
        for (int i = 0; i < n && i < 8 && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s %s", i ? "," : "", L[i].name);
        if (n > 8 && k < sizeof list) snprintf(list + k, sizeof list - k, ", ...");
    }
    int rc = cli_usage(cmd, "--%s %s: %s has no layer of that name; %s (all: flare nn info "
                       "--model %s)", flag, name, model_path, list, model_path);
    free(L);
    return rc;
}

int cli_layers_check(cli_cmd_id cmd, const char *flag, const char *model_path, fl_model *m,
                     const char *spec) {
    if (!strcmp(spec, "all") || !strcmp(spec, "conv+dense")) return CLI_OK;
    char *copy = strdup(spec), *save = NULL;
    if (!copy) {
        fl_err e = {0};
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        return cli_fail(&e);
    }
    int rc = CLI_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == CLI_OK;
         tok = strtok_r(NULL, ",", &save))
        if (fl_model_find(m, tok) < 0) rc = unknown_layer(cmd, flag, model_path, m, tok);
    free(copy);
    return rc;
}
