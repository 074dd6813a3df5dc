/* sys.h — the shared request loop and event output of the example systems in
 * examples/systems/ (helpdesk, coder, pipeline). Each system defines sys_name and
 * sys_handle; this file's sys.c reads requests and writes the protocol's events
 * (docs/agents-protocol.md). */
#ifndef SYS_H
#define SYS_H

#include <stddef.h>

extern const char *const sys_name;
/* Answer one request: its user turns (cleaned to valid UTF-8) in order. Must emit at least
 * the events of the answer; sys.c emits "done". */
void sys_handle(char **turns, int n);

void sys_msg(const char *from, const char *to, const char *fmt, ...);
void sys_tool(const char *agent, const char *tool, const char *arg_name, const char *arg);
void sys_result(const char *agent, const char *tool, int ok, const char *content);
void sys_branch(const char *agent, const char *point, const char *choice);
void sys_output(const char *fmt, ...);
/* case-insensitive substring search */
int sys_has(const char *text, const char *word);
/* the first integer in text (a leading '-' kept), or fallback when none; *digits gets the
 * number of digits read */
long long sys_number(const char *text, long long fallback, int *digits);
/* 1 when text holds a code point outside ASCII that is not CJK (emoji, symbols, controls) */
int sys_has_symbol(const char *text);
/* 1 when text holds a CJK ideograph */
int sys_has_cjk(const char *text);
/* count of occurrences of c in text */
int sys_count(const char *text, char c);
void sys_hang(void);

#endif
