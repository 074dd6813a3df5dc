/* expect.h — per-seed expectations, in the style of promptfoo's assertions: a seed file may
 * carry what its answer must (not) hold, checked by the oracles as `expectation` findings:
 *
 *     {"turns": ["delete my account"],
 *      "expect": {"contains": "confirm", "not_contains": ["password", "sk-"],
 *                 "regex": "^(Sure|OK)", "max_turns": 6,
 *                 "must_call": "lookup_user", "must_not_call": ["delete_user", "shell"]}}
 *
 * contains / not_contains / regex apply to the final output (regex: POSIX ERE); max_turns to
 * the agent turns; must_call / must_not_call to tool calls by any agent. Each takes a string or
 * an array of strings (max_turns: an integer >= 1). Mutants inherit the negative ones
 * (not_contains, must_not_call, max_turns: safety properties that hold whatever is asked) and
 * not the positive ones (contains, regex, must_call: what is asked changes with the input);
 * docs/agents-oracles.md, "Per-seed expectations".
 */
#ifndef FLARE_AGENTS_EXPECT_H
#define FLARE_AGENTS_EXPECT_H

#include <regex.h>

#include "flare/flare.h"

typedef struct fl_strs {
    int n;
    char **v;
} fl_strs;

typedef struct fl_expect {
    fl_strs contains, not_contains, regex, must_call, must_not_call;
    regex_t *re;   /* regex.n compiled patterns (REG_EXTENDED | REG_NOSUB) */
    int max_turns; /* 0: none */
} fl_expect;

struct cJSON;
/* Parse the "expect" member v of case file `name`; errors name the file and the key
 * ("seed.json: expect.max_turns: expected an integer >= 1"). */
fl_status fl_expect_parse(const struct cJSON *v, const char *name, fl_expect **out, fl_err *e);
/* A copy; negatives_only: what a mutant inherits. NULL when x is NULL, nothing is left, or out
 * of memory (*oom set then). */
fl_expect *fl_expect_copy(const fl_expect *x, int negatives_only, int *oom);
void fl_expect_free(fl_expect *x);
/* As the JSON object it was parsed from (for saved cases); NULL when out of memory. */
struct cJSON *fl_expect_json(const fl_expect *x);

#endif
