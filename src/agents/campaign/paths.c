/* A growable, sortable list of paths and the folder walk that fills it: the seeds of -i and
 * the queue (campaign_seeds.c), saved cases (campaign_saved.c). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/campaign/campaign_int.h"

int camp_paths_add(camp_paths *l, const char *p) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    return (l->v[l->n] = strdup(p)) ? (l->n++, 0) : -1;
}

void camp_paths_free(camp_paths *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void camp_paths_sort(camp_paths *l) {
    if (l->n > 1) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_str);
}

static fl_status walk(const char *dir, camp_paths *l, int levels,
                      int (*keep)(const char *name, int is_dir), fl_err *e) {
    DIR *d = opendir(dir);
    if (!d) return fl_fail(e, FL_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    struct dirent *de;
    fl_status st = FL_OK;
    while (st == FL_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        struct stat sb;
        if (stat(p, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && levels > 0 && (!keep || keep(de->d_name, 1)))
            st = walk(p, l, levels - 1, keep, e);
        else if (S_ISREG(sb.st_mode) && (!keep || keep(de->d_name, 0)) && camp_paths_add(l, p) < 0)
            st = fl_fail(e, FL_ERR_NOMEM, "out of memory");
    }
    closedir(d);
    return st;
}

fl_status camp_paths_list(const char *dir, camp_paths *l, int levels,
                          int (*keep)(const char *name, int is_dir), fl_err *e) {
    fl_status st = walk(dir, l, levels, keep, e);
    if (!st) camp_paths_sort(l);
    return st;
}
