/* llm_stub.h — a scriptable OpenAI-compatible server on loopback for the LLM tests: a thread
 * accepts connections on 127.0.0.1:<ephemeral port>, records each request (path, headers,
 * body) and answers with the next scripted reply, or the default one when the script is
 * empty. Replies can be slow, cut off mid-body, carry Retry-After, or be garbage.
 *
 *     stub *s = stub_start();
 *     stub_push(s, (stub_reply){.status = 429, .retry_after = 1});
 *     stub_push_chat(s, "{\"instructions\":[\"hi\"]}", 12);   // a 200 chat completion
 *     ... fl_llm with base_url = s->url ...
 *     assert_int_equal(stub_count(s), 2);
 *     stub_stop(s);
 */
#ifndef FLARE_LLM_STUB_H
#define FLARE_LLM_STUB_H

#include <pthread.h>

typedef struct stub_reply {
    int status;        /* HTTP status (0: 200) */
    char *body;        /* malloc'd; NULL: empty */
    int retry_after;   /* Retry-After seconds; 0: no header */
    int delay_ms;      /* wait before answering */
    int disconnect;    /* send half the body, then close (Content-Length says more) */
} stub_reply;

#define STUB_MAX 256

typedef struct stub {
    char url[64];
    int port, fd;
    pthread_t th;
    pthread_mutex_t mu;
    volatile int quit;
    stub_reply script[STUB_MAX];
    int n_script, next;
    stub_reply dflt;               /* used when the script is exhausted (body may be NULL: 500) */
    char *(*fn)(const char *body); /* or, when set, a 200 with fn(request body) (malloc'd) */
    int fn_delay_ms;               /* ... sent after this wait (a slow model) */
    int n_req;
    char *req_path[STUB_MAX], *req_head[STUB_MAX], *req_body[STUB_MAX];
} stub;

stub *stub_start(void);
void stub_stop(stub *s);
void stub_push(stub *s, stub_reply r);               /* takes r.body */
/* An OpenAI chat completion whose message content is `content`, usage total_tokens. */
char *stub_chat_body(const char *content, int tokens);
void stub_push_chat(stub *s, const char *content, int tokens);
void stub_set_default_chat(stub *s, const char *content, int tokens);
int stub_count(stub *s);
const char *stub_body(stub *s, int i);   /* request i's body (NULL when out of range) */
const char *stub_head(stub *s, int i);

/* A deterministic stand-in for a model, as s->fn: reads the generator's prompt the way a
 * model would (its "Target:" sentence, the descriptions under it, the example inputs) and
 * answers {"instructions": [...]} made of the target's words, with no knowledge of flare or of
 * the system under test beyond what the prompt says. Without a Target line it varies the
 * first example. Anything else (the judge) gets a "no anomaly" verdict. */
char *stub_model_gen(const char *body);

#endif
