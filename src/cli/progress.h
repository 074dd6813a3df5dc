/* progress.h — a one-line progress bar for long-running commands (training, fuzzing).
 *
 * On a terminal the bar is redrawn in place with \r, at most ~10 times a second:
 *
 *     epoch 2/5 [########............]  41% loss 0.4123 acc 0.861  8123 img/s ETA 0:12
 *
 * When stderr is not a terminal (a log file, CI) nothing is drawn while work is under way:
 * the caller prints one summary line per unit of work instead, so logs stay readable.
 * FLARE_PROGRESS=tty / plain in the environment forces either mode (for tests and for
 * terminals that isatty() misjudges).
 *
 *     cli_progress p;
 *     progress_start(&p, stderr, "epoch 1/5", n_images, "img");
 *     for (...) progress_update(&p, done, "loss 0.41 acc 0.86");
 *     progress_clear(&p);              // erase the bar; the line is free for a summary
 */
#ifndef FLARE_CLI_PROGRESS_H
#define FLARE_CLI_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct cli_progress {
    FILE *out;
    int live;          /* drawing a bar (terminal and not quiet) */
    int drawn;         /* a bar is on screen now */
    int width;         /* terminal columns */
    char label[64];
    const char *unit;  /* "img": the rate reads "img/s" */
    int64_t total;     /* 0: unknown (no %, no ETA) */
    int64_t done;
    double t0, last_draw;
} cli_progress;

/* 1 when progress bars should be drawn on f: FLARE_PROGRESS, else isatty(fileno(f)). */
int cli_isatty(FILE *f);
/* Columns of the terminal behind f (80 when unknown). */
int cli_term_width(FILE *f);

/* Begin a bar. quiet (or not a terminal) makes every call below draw nothing. */
void progress_start(cli_progress *p, FILE *out, const char *label, int64_t total,
                    const char *unit, int quiet);
/* done of total units finished; extra (may be NULL) is shown after the percentage. */
void progress_update(cli_progress *p, int64_t done, const char *extra);
/* Erase the bar so that the caller can print a normal line. */
void progress_clear(cli_progress *p);
/* Seconds since progress_start; done / elapsed. */
double progress_elapsed(const cli_progress *p);
double progress_rate(const cli_progress *p);
/* "1:02:03" / "2:03" into buf; returns buf. */
const char *cli_fmt_duration(double seconds, char *buf, size_t n);

#endif
