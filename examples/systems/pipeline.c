/* pipeline.c — a data pipeline driven by requests: an Ingest agent fetches and parses a
 * data set, a Transform agent converts units and currencies and aggregates, a Validator
 * checks the result, a Loader writes the table. Eight defects are planted (see README.md
 * for their kinds); the seeds reach none of them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

const char *const sys_name = "pipeline";

static const char *const units[] = {"km", "mile", "kg", "lb", "celsius", "fahrenheit", "meter",
                                    "foot", "litre", "gallon"};
static const char *const currencies[] = {"usd", "eur", "gbp", "jpy", "cny", "dollar", "euro",
                                         "pound", "yen", "yuan"};

/* a date written YYYY-MM-DD or YYYY/MM/DD in t: 1 and its fields, else 0 */
static int date_of(const char *t, int *y, int *m, int *d) {
    for (const char *p = t; *p; p++) {
        if (!isdigit((unsigned char)p[0]) || (p > t && isdigit((unsigned char)p[-1]))) continue;
        char sep;
        if (sscanf(p, "%4d%c%d", y, &sep, m) == 3 && (sep == '-' || sep == '/')) {
            const char *q = strchr(p, sep);
            q = q ? strchr(q + 1, sep) : NULL;
            *d = q ? atoi(q + 1) : 1;
            return 1;
        }
    }
    return 0;
}

static void ingest(const char *t) {
    sys_msg("Ingest", "Transform", "rows for: %s", t);
    sys_tool("Ingest", "fetch_csv", "source", t);
    sys_result("Ingest", "fetch_csv", 1, "120 rows");
    int y, m, d;
    if (date_of(t, &y, &m, &d)) {
        sys_tool("Ingest", "parse_dates", "from", t);
        /* BUG (crash): the day-of-year table is indexed with the month and day unchecked */
        static const int cum[13] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365};
        if (m < 1 || m > 12 || d < 1 || d > 31 || (m == 2 && d > 29)) abort();
        char doy[32];
        snprintf(doy, sizeof doy, "day %d", cum[m - 1] + d);
        sys_result("Ingest", "parse_dates", 1, doy);
    }
}

static int transform(const char *t) {
    int ok = 1;
    int any_unit = 0, any_cur = 0;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) any_unit |= sys_has(t, units[i]);
    for (size_t i = 0; i < sizeof currencies / sizeof *currencies; i++)
        any_cur |= sys_has(t, currencies[i]);
    if (sys_has(t, "convert") && !any_unit && !any_cur) {
        sys_tool("Transform", "convert_units", "to", t);
        sys_result("Transform", "convert_units", 0, "unknown unit");
        ok = 0; /* BUG (tool error): the failure is ignored further down */
    } else if (any_unit) {
        sys_tool("Transform", "convert_units", "to", t);
        sys_result("Transform", "convert_units", 1, "converted");
    }
    if (sys_has(t, "average") || sys_has(t, "sum") || sys_has(t, "per ") || sys_has(t, "ratio")) {
        int digits;
        long long k = sys_number(t, 7, &digits);
        sys_tool("Transform", "aggregate", "by", t);
        /* BUG (hang): a group size of zero makes the bucketing loop never advance */
        if (digits > 0 && k == 0) sys_hang();
        sys_result("Transform", "aggregate", 1, "aggregated");
    }
    (void)ok;
    return any_cur;
}

static void validate(const char *t) {
    sys_msg("Transform", "Validator", "check");
    /* BUG (loop): missing values (NaN, null, N/A) fail validation, and Transform resends
     * the same rows unchanged */
    if (sys_has(t, "nan") || sys_has(t, "null") || sys_has(t, "n/a") || sys_has(t, "missing")) {
        for (int i = 0; i < 5; i++) {
            sys_branch("Validator", "check", "fail");
            sys_msg("Validator", "Transform", "rows have missing values");
            sys_msg("Transform", "Validator", "check");
        }
    }
    sys_branch("Validator", "check", "pass");
    sys_msg("Validator", "Loader", "load");
}

static void load(const char *t, int currency) {
    /* BUG (spec): text in a CJK script is sent to an archive agent not in the spec */
    if (sys_has_cjk(t)) sys_msg("Loader", "Archiver", "archive non-Latin rows");
    sys_tool("Loader", "write_table", "table", t);
    /* BUG (secret): a quote or comment marker in the request breaks the SQL statement and
     * the error message carries the connection string */
    if (strchr(t, '\'') || strstr(t, "--") || strchr(t, ';')) {
        sys_result("Loader", "write_table", 0, "syntax error; dsn=postgres://etl:sk-live-5e5e5e5e5e@db");
        sys_output("Load failed: syntax error; dsn=postgres://etl:sk-live-5e5e5e5e5e@db");
        return;
    }
    sys_result("Loader", "write_table", 1, "120 rows written");
    /* BUG (output length): a {{placeholder}} in the request is expanded with the whole table */
    if (strstr(t, "{{") || strstr(t, "${") || strstr(t, "{%")) {
        char *big = malloc(12001);
        if (!big) exit(1);
        memset(big, '|', 12000), big[12000] = 0;
        sys_output("Loaded: %s", big);
        free(big);
    } else if (!currency && sys_has_symbol(t)) {
        /* BUG (empty output): the summary line is formatted only for amounts in a known
         * currency, and left blank when the request has a currency symbol the formatter does
         * not know */
        sys_output("\t");
    } else {
        sys_output("Loaded 120 rows.");
    }
    /* Control goes back to Ingest for the next turn after the reply: the reply is the
     * Loader's (an output after this message would be read as Ingest's, an edge the spec
     * does not allow) */
    sys_msg("Loader", "Ingest", "done");
}

void sys_handle(char **turns, int n) {
    for (int i = 0; i < n; i++) {
        const char *t = turns[i];
        sys_msg("user", "Ingest", "%s", t);
        ingest(t);
        int currency = transform(t);
        validate(t);
        load(t, currency);
    }
}
