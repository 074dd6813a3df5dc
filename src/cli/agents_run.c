/* flare agents run: one case against a target command; prints the trace, one line per event
 * (or, with --json, the whole result as fl_trace_report_json plus "findings"), how the case
 * ended, the case's stderr (captured, not passed through), and the rule oracles' findings
 * (with --spec, its oracles too). Exit status 1 when an
 * oracle reported a finding (a crash, a hang, a missing "done", a leak ...), as a libFuzzer user
 * expects of re-running a crashing input; 0 when the case passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "flare/agents/http_target.h"
#include "flare/agents/oracle.h"
#include "flare/agents/otlp_recv.h"
#include "flare/agents/target.h"

/* s as a double-quoted, escaped string of at most `max` bytes of content. */
static void quoted(const char *s, size_t max) {
    size_t n = strlen(s);
    putchar('"');
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\t') fputs("\\t", stdout);
        else if (ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
        else putchar(ch);
    }
    putchar('"');
    if (n > max) printf("... (%zu bytes)", n);
}

static void print_event(const fl_event *ev) {
    static const char *const names[] = {"message", "tool_call", "tool_result", "branch",
                                        "error",   "output",    "done"};
    printf("%9.2f ms  %-*s%s", ev->t_ms, ev->kind == FL_EV_DONE ? 0 : 12, names[ev->kind],
           ev->kind == FL_EV_DONE ? "" : " ");
    switch (ev->kind) {
    case FL_EV_MESSAGE:
        printf("%s -> %s: ", ev->agent, ev->to);
        quoted(ev->content, 160);
        break;
    case FL_EV_TOOL_CALL:
        printf("%s %s", ev->agent, ev->tool);
        if (ev->arguments) { /* compact JSON already: shown as is */
            int n = (int)strlen(ev->arguments);
            printf(" %.*s%s", n > 160 ? 160 : n, ev->arguments, n > 160 ? "..." : "");
        }
        break;
    case FL_EV_TOOL_RESULT:
        printf("%s %s %s", ev->agent, ev->tool, ev->ok ? "ok" : "FAILED");
        if (ev->content) fputs(": ", stdout), quoted(ev->content, 160);
        break;
    case FL_EV_BRANCH: printf("%s %s = %s", ev->agent, ev->point, ev->choice); break;
    case FL_EV_ERROR:
        printf("%s: ", ev->agent);
        quoted(ev->content, 160);
        break;
    case FL_EV_OUTPUT: quoted(ev->content, 400); break;
    case FL_EV_DONE: break;
    }
    putchar('\n');
}

static void print_trace(const fl_case *c, const fl_trace *tr) {
    printf("case %s  seed %llu  traceparent %s\n", c->id, (unsigned long long)c->seed,
           c->traceparent);
    for (int i = 0; i < c->n_turns; i++) {
        printf("  turn %d: ", i + 1);
        quoted(c->turns[i], 400);
        putchar('\n');
    }
    for (int i = 0; i < tr->n_events; i++) print_event(&tr->events[i]);
    char how[256];
    printf("ended: %s (%zu bytes read)\n", fl_trace_describe_exit(tr, how, sizeof how), tr->bytes);
    if (tr->n_protocol) printf("protocol problems: %d, first: %s\n", tr->n_protocol, tr->protocol_msg);
    if (tr->err_len) { /* captured, not passed through: it belongs to this case's report */
        printf("stderr (%zu bytes", tr->err_len);
        if (tr->err_dropped) printf(", the last of %zu", tr->err_len + tr->err_dropped);
        printf("):\n");
        const char *p = tr->err, *end = tr->err + tr->err_len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            int n = (int)((nl ? nl : end) - p);
            printf("  | %.*s\n", n, p);
            p += n + (nl != NULL);
        }
    }
}

/* The trace's JSON report with the findings added as "findings": [{kind, mast, signature,
 * event, message}]. NULL when out of memory. */
static char *json_with_findings(const fl_case *c, const fl_trace *tr, const fl_findings *f) {
    char *js = fl_trace_report_json(c, tr);
    cJSON *root = js ? cJSON_Parse(js) : NULL, *arr = root ? cJSON_AddArrayToObject(root, "findings") : NULL;
    free(js);
    js = NULL;
    for (int i = 0; arr && i < f->n; i++) {
        cJSON *j = cJSON_CreateObject();
        if (!j) break;
        cJSON_AddItemToArray(arr, j);
        cJSON_AddStringToObject(j, "kind", fl_finding_kind_name(f->v[i].kind));
        if (f->v[i].mast) cJSON_AddStringToObject(j, "mast", f->v[i].mast);
        else cJSON_AddNullToObject(j, "mast");
        cJSON_AddStringToObject(j, "signature", f->v[i].signature);
        cJSON_AddNumberToObject(j, "event", f->v[i].event);
        cJSON_AddStringToObject(j, "message", f->v[i].message);
        if (f->v[i].stderr_group[0]) cJSON_AddStringToObject(j, "stderr_group", f->v[i].stderr_group);
    }
    if (arr) js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return js;
}

int cmd_agents_run(const cli_opts *o) {
    fl_err e = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    fl_case *c = NULL;
    fl_target *t = NULL;
    fl_trace *tr = NULL;
    fl_otlp_src *src = NULL; /* --otlp-listen / --otlp-file */
    fl_spec *spec = NULL;
    fl_findings f = {0};
    int rc = CLI_FAIL;
    if (o->set[F_spec] && fl_spec_load(o->spec, &spec, &e) != FL_OK) goto done;
    if (fl_file_read(o->case_file, &buf, &len, &e) != FL_OK ||
        fl_case_parse((const char *)buf, len, o->case_file, &c, &e) != FL_OK)
        goto done;
    if (!c->traceparent[0]) { /* a new trace id, not reproducible on purpose: it names this run */
        fl_rng r;
        fl_rng_seed(&r, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(fl_now() * 1e9));
        fl_case_new_trace(c, &r);
    }
    fl_target_opts to;
    fl_target_opts_default(&to);
    to.timeout_ms = (int)o->timeout_ms;
    to.fresh = o->fresh;
    to.mem_limit_mb = (int)o->mem_limit;
    to.keep_stderr = 1; /* the case's stderr (its last FL_TRACE_STDERR_MAX bytes) goes into the
                           report and --json's "stderr", and crash findings group by it */
    fl_http_opts ho;
    to.http = cli_http_target(o, &ho);
    fl_otlp_src_opts so = {.listen = o->set[F_otlp_listen] ? o->otlp_listen : NULL,
                           .file = o->set[F_otlp_file] ? o->otlp_file : NULL,
                           .grace_ms = (int)o->otlp_grace};
    if (fl_otlp_src_new(&so, &src, &e) != FL_OK) goto done; /* listening before the case runs */
    if (!(tr = fl_trace_new())) {
        fl_fail(&e, FL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (fl_target_new(o->trailing, &to, &t, &e) != FL_OK || fl_target_run(t, c, tr, &e) != FL_OK ||
        fl_otlp_src_collect(src, c, tr, &e) != FL_OK)
        goto done;
    if (fl_oracle_check(spec, c, tr, NULL, &f, &e) != FL_OK) goto done;
    if (o->run_json) {
        char *js = json_with_findings(c, tr, &f);
        if (!js) {
            fl_fail(&e, FL_ERR_NOMEM, "out of memory");
            goto done;
        }
        printf("%s\n", js);
        free(js);
    } else {
        print_trace(c, tr);
        fl_otlp_src_stats ss;
        fl_otlp_src_stats_get(src, &ss);
        if (src) printf("otlp: %ld span(s) merged into the case, %ld received\n", ss.merged, ss.spans);
        printf("findings: %d%s\n", f.n, spec ? "" : " (rule oracles without a spec; --spec adds its oracles)");
        for (int i = 0; i < f.n; i++)
            printf("  %s %s [%s] event %d: %s\n", fl_finding_kind_name(f.v[i].kind), f.v[i].signature,
                   f.v[i].mast ? f.v[i].mast : "-", f.v[i].event, f.v[i].message);
    }
    fflush(stdout);
    if (f.n) {
        fprintf(stderr, "flare: %d finding%s; first: %s: %s\n", f.n, f.n == 1 ? "" : "s",
                fl_finding_kind_name(f.v[0].kind), f.v[0].message);
        rc = CLI_FAIL;
        fl_findings_free(&f);
        goto out;
    }
    rc = CLI_OK;
done:
    if (rc != CLI_OK) rc = cli_fail(&e);
out:
    fl_findings_free(&f);
    fl_spec_free(spec);
    fl_target_free(t);
    fl_otlp_src_free(src);
    fl_trace_free(tr);
    fl_case_free(c);
    free(buf);
    return rc;
}
