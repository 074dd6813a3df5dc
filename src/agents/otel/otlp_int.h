/* otlp_int.h — what the span mapping (otlp_map.c) reads out of attribute values
 * (otlp_value.c): message text, tool arguments by MIME type, results without their framework
 * wrappers, answers out of graph states, failures that are not control flow. Every returned
 * string is malloc'd (NULL: out of memory, or "not that shape" where said). */
#ifndef FLARE_AGENTS_OTEL_OTLP_INT_H
#define FLARE_AGENTS_OTEL_OTLP_INT_H

#include "flare/agents/otlp.h"

char *otlp_message_text(const char *v);
char *otlp_json_text(const char *v, const char *mime);
char *otlp_json_string(const char *v);                /* NULL: not a JSON string literal */
char *otlp_unwrap_result(const char *v, int *failed); /* NULL: no wrapper, use v */
char *otlp_state_answer(const char *v);               /* NULL: not a graph state */
int otlp_is_error(const fl_otlp_span *s);
const char *otlp_error_text(const fl_otlp_span *s);

#endif
