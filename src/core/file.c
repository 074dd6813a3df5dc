/* Whole-file reads (with transparent gunzip for *.gz) and atomic writes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "flare/flare.h"

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static fl_status read_gz(const char *path, uint8_t **buf, size_t *len, fl_err *e) {
    gzFile f = gzopen(path, "rb");
    if (!f) return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    uint8_t *p = malloc(cap);
    if (!p) {
        gzclose(f);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            uint8_t *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                gzclose(f);
                return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory", path);
            }
            p = q;
        }
        unsigned want = (unsigned)((cap - n) > (1u << 30) ? (1u << 30) : (cap - n));
        int got = gzread(f, p + n, want);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            fl_fail(e, FL_ERR_FORMAT, "%s: corrupted gzip data: %s", path, msg);
            free(p);
            gzclose(f);
            return FL_ERR_FORMAT;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    /* gzread returns 0 both at a clean end and at a truncated stream; gzclose tells. */
    int rc = gzclose(f);
    if (rc != Z_OK) {
        free(p);
        return fl_fail(e, FL_ERR_FORMAT, "%s: truncated or corrupted gzip stream", path);
    }
    *buf = p;
    *len = n;
    return FL_OK;
}

fl_status fl_file_read(const char *path, uint8_t **buf, size_t *len, fl_err *e) {
    *buf = NULL;
    *len = 0;
    if (ends_with(path, ".gz")) return read_gz(path, buf, len, e);
    FILE *f = fopen(path, "rb");
    if (!f) return fl_fail(e, FL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fl_fail(e, FL_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        fclose(f);
        return fl_fail(e, FL_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, n);
    }
    if (fread(p, 1, n, f) != n) {
        free(p);
        fclose(f);
        return fl_fail(e, FL_ERR_IO, "%s: read failed", path);
    }
    fclose(f);
    *buf = p;
    *len = n;
    return FL_OK;
}

fl_status fl_file_map(const char *path, fl_mapped *f, fl_err *e) {
    memset(f, 0, sizeof *f);
    int fd = ends_with(path, ".gz") ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        /* MAP_POPULATE: the pages are mapped in one go rather than one fault each */
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        close(fd);
        if (p != MAP_FAILED) {
            f->data = p;
            f->len = (size_t)st.st_size;
            f->mapped = 1;
            return FL_OK;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    uint8_t *buf; /* not mappable: read it (and its errors are the read's) */
    fl_status s = fl_file_read(path, &buf, &f->len, e);
    f->data = buf;
    return s;
}

void fl_file_unmap(fl_mapped *f) {
    if (f->mapped) munmap((void *)f->data, f->len);
    else free((void *)f->data);
    memset(f, 0, sizeof *f);
}

fl_status fl_file_parse(const char *path, fl_parse_fn parse, void *out, fl_err *e) {
    uint8_t *buf;
    size_t len;
    fl_status st = fl_file_read(path, &buf, &len, e);
    if (st != FL_OK) return st;
    st = parse(buf, len, path, out, e);
    free(buf);
    return st;
}

static int durable = 1;
void fl_file_durable(int on) { durable = on; }

fl_status fl_file_check_writable(const char *path, fl_err *e) {
    struct stat st;
    if (!*path) return fl_fail(e, FL_ERR_ARG, "empty file name");
    size_t n = strlen(path);
    if (path[n - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return fl_fail(e, FL_ERR_IO, "%s is a directory", path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir)
        return fl_fail(e, FL_ERR_ARG, "%s: path too long", path);
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            return fl_fail(e, FL_ERR_IO, "%s: parent folder %s does not exist", path, dir);
        return fl_fail(e, FL_ERR_IO, "%s: parent folder %s: %s", path, dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) return fl_fail(e, FL_ERR_IO, "%s: %s is not a folder", path, dir);
    if (access(dir, W_OK) != 0)
        return fl_fail(e, FL_ERR_IO, "%s: folder %s is not writable", path, dir);
    return FL_OK;
}

fl_status fl_file_write_atomic(const char *path, const void *buf, size_t len, fl_err *e) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return fl_fail(e, FL_ERR_ARG, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { /* the temporary file is ours: the reason is told about path */
        int err = errno;
        fl_status st = fl_file_check_writable(path, e);
        if (st != FL_OK) return st;
        return fl_fail(e, FL_ERR_IO, "%s: cannot create: %s", path, strerror(err));
    }
    const uint8_t *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            close(fd);
            unlink(tmp);
            return fl_fail(e, FL_ERR_IO, "%s: write failed: %s", path, strerror(err));
        }
        p += w;
        left -= (size_t)w;
    }
    if ((durable && fsync(fd) != 0) || close(fd) != 0) {
        int err = errno;
        unlink(tmp);
        return fl_fail(e, FL_ERR_IO, "%s: cannot flush: %s", path, strerror(err));
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        if (err == EISDIR) return fl_fail(e, FL_ERR_IO, "%s is a directory", path);
        return fl_fail(e, FL_ERR_IO, "%s: cannot rename into place: %s", path, strerror(err));
    }
    return FL_OK;
}

fl_status fl_mkdirs(const char *path, fl_err *e) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return fl_fail(e, FL_ERR_ARG, "%s: bad folder name", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return fl_fail(e, FL_ERR_IO, "%s: cannot create folder: %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return fl_fail(e, FL_ERR_IO, "%s: exists and is not a folder", path);
    return FL_OK;
}

fl_status fl_path_join(char *buf, size_t n, const char *dir, const char *rel, fl_err *e) {
    int k = snprintf(buf, n, "%s/%s", dir, rel);
    if (k < 0 || (size_t)k >= n) return fl_fail(e, FL_ERR_ARG, "%s/%s: path too long", dir, rel);
    return FL_OK;
}

int fl_dir_has_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *de;
    int any = 0;
    while (!any && (de = readdir(d))) any = de->d_name[0] != '.';
    closedir(d);
    return any;
}
