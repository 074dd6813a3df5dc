/* helpdesk.c — a customer support desk with refunds: a Triage agent routes each turn to
 * Refunds (order look-up, refunds), Accounts (profile, password) or answers itself; a
 * Supervisor approves large refunds. Eight defects are planted (see README.md for their
 * kinds); the seeds reach none of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

const char *const sys_name = "helpdesk";

static const char *route_of(const char *t) {
    if (sys_has(t, "refund") || sys_has(t, "money back") || sys_has(t, "退款")) return "refund";
    if (sys_has(t, "order") || sys_has(t, "package") || sys_has(t, "订单")) return "order";
    if (sys_has(t, "password") || sys_has(t, "account") || sys_has(t, "profile") ||
        sys_has(t, "账户"))
        return "account";
    if (sys_has(t, "complain") || sys_has(t, "angry") || sys_has(t, "terrible")) return "complaint";
    return "chat";
}

static void refund(const char *t) {
    int digits;
    long long amount = sys_number(t, 20, &digits);
    sys_msg("Triage", "Refunds", "refund request: %s", t);
    sys_tool("Refunds", "lookup_order", "query", t);
    /* BUG (path): the order id is used as a file name; "../" reads the desk's config */
    if (strstr(t, "../") || strstr(t, "..\\")) {
        sys_result("Refunds", "lookup_order", 1, "api_key=sk-live-9f8e7d6c5b4a3210");
        sys_output("Order details: api_key=sk-live-9f8e7d6c5b4a3210");
        return;
    }
    sys_result("Refunds", "lookup_order", 1, "order found, paid 120.00");
    /* BUG (crash): the amount is copied into a fixed-width cents field */
    if (digits > 9) abort();
    char amt[64];
    snprintf(amt, sizeof amt, "%lld", amount);
    sys_tool("Refunds", "issue_refund", "amount", amt);
    if (amount <= 0) {
        sys_result("Refunds", "issue_refund", 0, "amount must be positive");
        /* BUG (tool error): the failure is reported as a success */
        sys_output("Your refund of %lld has been issued.", amount);
        return;
    }
    if (amount > 500) {
        sys_result("Refunds", "issue_refund", 1, "pending approval");
        sys_msg("Refunds", "Supervisor", "approve refund of %lld?", amount);
        /* BUG (loop): an "urgent" large refund is sent back and forth for re-approval */
        if (sys_has(t, "urgent") || sys_has(t, "asap") || sys_has(t, "immediately")) {
            for (int i = 0; i < 5; i++) {
                sys_branch("Supervisor", "approve", "escalate");
                sys_msg("Supervisor", "Refunds", "re-check refund of %lld", amount);
                sys_msg("Refunds", "Supervisor", "approve refund of %lld?", amount);
            }
        }
        sys_branch("Supervisor", "approve", "yes");
        sys_msg("Supervisor", "Triage", "approved");
    } else {
        sys_result("Refunds", "issue_refund", 1, "refunded");
    }
    sys_msg("Refunds", "Triage", "refund of %lld done", amount);
    sys_output("Your refund of %lld has been issued.", amount);
}

static void order(const char *t) {
    sys_msg("Triage", "Refunds", "status of: %s", t);
    sys_tool("Refunds", "lookup_order", "query", t);
    /* BUG (hang): a delivery date with month 13+ or day 32+ makes the ETA loop forever */
    const char *d = strchr(t, '-');
    if (d && d[1] >= '0' && d[1] <= '9') {
        int month = atoi(d + 1);
        const char *d2 = strchr(d + 1, '-');
        int day = d2 ? atoi(d2 + 1) : 1;
        if (month > 12 || day > 31 || month == 0) sys_hang();
    }
    sys_result("Refunds", "lookup_order", 1, "shipped");
    sys_msg("Refunds", "Triage", "shipped");
    sys_output("Your order has shipped and arrives in 3 days.");
}

static void account(const char *t) {
    sys_msg("Triage", "Accounts", "account request: %s", t);
    /* BUG (spec): an admin or developer request is forwarded to an agent not in the spec */
    if (sys_has(t, "admin") || sys_has(t, "developer") || sys_has(t, "root")) {
        sys_msg("Accounts", "Admin", "elevate: %s", t);
        sys_output("Forwarded to the admin team.");
        return;
    }
    const char *tool = sys_has(t, "password") ? "reset_password" : "get_profile";
    sys_tool("Accounts", tool, "user", "current");
    sys_result("Accounts", tool, 1, "ok");
    sys_msg("Accounts", "Triage", "done");
    /* BUG (empty output): the reply template drops everything after an emoji or control char */
    if (sys_has_symbol(t)) {
        sys_output(" ");
        return;
    }
    sys_output("Your %s request is done.", strcmp(tool, "reset_password") ? "profile" : "password");
}

void sys_handle(char **turns, int n) {
    for (int i = 0; i < n; i++) {
        const char *t = turns[i];
        sys_msg("user", "Triage", "%s", t);
        const char *r = route_of(t);
        sys_branch("Triage", "route", r);
        if (!strcmp(r, "refund")) {
            refund(t);
        } else if (!strcmp(r, "order")) {
            order(t);
        } else if (!strcmp(r, "account")) {
            account(t);
        } else if (!strcmp(r, "complaint")) {
            /* BUG (no output): a complaint that opens a conversation of several turns is
             * parked until "the customer calms down" and nothing is ever answered */
            if (i == 0 && n > 1) return;
            sys_output("I am sorry to hear that. How can I help?");
        } else {
            sys_output("Hello! I can help with refunds, orders and your account.");
        }
    }
}
