/* file.c: reading regular files without blocking, and replacing a file
 * crash-safely (the steps and their guarantees are in file.h).
 *
 * Invariant: the only file this code ever removes is a temporary it has
 * just created itself with O_EXCL; the only path it replaces is one that
 * held nothing, a regular file or a symbolic link. */
#include "io/file.h"
#include "attograd_io.h"

#include "core/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What kind of thing a stat describes, for "not a regular file (...)". */
static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a regular file";
}

/* ============================================================================
 * Reading
 * ========================================================================== */

/* ---- the input limit --------------------------------------------------- */

enum { DEFAULT_LIMIT_GIB = 4 };
static _Atomic size_t input_limit; /* 0: not read from the environment yet */

static size_t limit_from_environment(void)
{
    const char *v = getenv("AG_INPUT_LIMIT");
    char *end;
    errno = 0;
    unsigned long long n = v ? strtoull(v, &end, 10) : 0;
    if (v && *v && !*end && errno == 0 && n > 0) return n < SIZE_MAX ? (size_t)n : SIZE_MAX - 1;
    uint64_t d = (uint64_t)DEFAULT_LIMIT_GIB << 30;
    return d < SIZE_MAX ? (size_t)d : SIZE_MAX - 1;
}

void ag_set_input_limit(size_t bytes)
{
    atomic_store(&input_limit, bytes ? (bytes < SIZE_MAX ? bytes : SIZE_MAX - 1) : limit_from_environment());
}

size_t ag_get_input_limit(void)
{
    size_t n = atomic_load(&input_limit);
    if (!n) atomic_store(&input_limit, n = limit_from_environment());
    return n;
}

static ag_status over_limit(const char *path, const char *what, size_t limit, char *err, size_t errlen)
{
    return ag__errf(err, errlen, AG_ERR_IO, "%s: %s more than the input limit of %zu bytes (AG_INPUT_LIMIT): "
                    "refused", path, what, limit);
}

ag_status ag__file_open(ag__file *f, const char *path, char *err, size_t errlen)
{
    *f = (ag__file){-1, 0, path, 0};
    int fd;
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO with no writer: no wait */
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return ag__errf(err, errlen, AG_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ag__errf(err, errlen, AG_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (S_ISFIFO(sb.st_mode)) {
        /* a pipe: from now on a read waits for its writer, and a FIFO that
         * no writer opened reads as empty, so nothing hangs */
        int fl = fcntl(fd, F_GETFL);
        if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
            int e = errno;
            close(fd);
            return ag__errf(err, errlen, AG_ERR_IO, "%s: %s", path, strerror(e));
        }
        *f = (ag__file){fd, 0, path, 1};
        return AG_OK;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        if (S_ISDIR(sb.st_mode)) return ag__errf(err, errlen, AG_ERR_IO, "%s: %s", path, strerror(EISDIR));
        return ag__errf(err, errlen, AG_ERR_IO, "%s: not a regular file or a pipe (%s): refused", path,
                        kind_of(sb.st_mode));
    }
    f->size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    if (f->size > ag_get_input_limit()) {
        close(fd);
        char what[64];
        snprintf(what, sizeof what, "%llu bytes,", (unsigned long long)f->size);
        return over_limit(path, what, ag_get_input_limit(), err, errlen);
    }
    f->fd = fd;
    return AG_OK;
}

ag_status ag__file_read_exact(ag__file *f, void *buf, size_t n, char *err, size_t errlen)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        size_t chunk = n - got > ((size_t)1 << 30) ? (size_t)1 << 30 : n - got;
        ssize_t r = read(f->fd, p + got, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ag__errf(err, errlen, AG_ERR_IO, "%s: read failed: %s", f->path, strerror(errno));
        if (r == 0)
            return ag__errf(err, errlen, AG_ERR_IO, "%s: the file ended after %zu of %zu bytes (it changed while "
                            "being read)", f->path, got, n);
        got += (size_t)r;
    }
    return AG_OK;
}

void ag__file_close(ag__file *f)
{
    if (f->fd >= 0) close(f->fd); /* read-only: nothing to lose */
    f->fd = -1;
}

/* A stream to its end: the buffer doubles from 64 KiB up to the limit and a
 * byte, and the first byte past the limit stops the read (the writer may
 * never stop: /dev/zero through cat). */
static ag_status read_stream(ag__file *f, char **out, size_t *len, char *err, size_t errlen)
{
    size_t limit = ag_get_input_limit(), cap = 0, n = 0; /* n <= limit < SIZE_MAX - 1 */
    char *buf = NULL;
    for (;;) {
        if (n + 1 >= cap) { /* room for a byte and the NUL: grow */
            size_t want = !cap ? (size_t)1 << 16 : cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * cap;
            if (want > limit + 2) want = limit + 2;
            char *p = ag__malloc(want);
            if (!p) {
                ag__free(buf);
                return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory after %zu bytes", f->path, n);
            }
            if (n) memcpy(p, buf, n);
            ag__free(buf);
            buf = p, cap = want;
        }
        ssize_t r = read(f->fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (n += (size_t)r) > limit) {
            int e = errno;
            if (r == 0) break;
            ag__free(buf);
            if (r < 0) return ag__errf(err, errlen, AG_ERR_IO, "%s: read failed: %s", f->path, strerror(e));
            return over_limit(f->path, "the stream holds", limit, err, errlen);
        }
    }
    buf[n] = '\0';
    *out = buf, *len = n;
    return AG_OK;
}

ag_status ag__file_read_rest(ag__file *f, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL, *len = 0;
    if (f->stream) return read_stream(f, out, len, err, errlen);
    off_t at = lseek(f->fd, 0, SEEK_CUR);
    uint64_t left = at > 0 && (uint64_t)at < f->size ? f->size - (uint64_t)at : at > 0 ? 0 : f->size;
    if (left >= SIZE_MAX)
        return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: %llu bytes do not fit in memory", f->path,
                        (unsigned long long)left);
    size_t n = (size_t)left;
    char *buf = ag__malloc(n + 1);
    ag_status st = AG_OK;
    if (!buf) st = ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory for %zu bytes", f->path, n + 1);
    if (!st) st = ag__file_read_exact(f, buf, n, err, errlen);
    if (st) {
        ag__free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf, *len = n;
    return AG_OK;
}

ag_status ag__file_read(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL, *len = 0;
    ag__file f;
    ag_status st = ag__file_open(&f, path, err, errlen);
    if (!st) st = ag__file_read_rest(&f, out, len, err, errlen);
    ag__file_close(&f);
    return st;
}

/* ============================================================================
 * Writing
 * ========================================================================== */

/* What a save needs at hand to report an error. */
typedef struct saving {
    const char *what, *path;
    char *err;
    size_t errlen;
} saving;

/* "WHAT: " (when there is one), then the message; returns st. */
static ag_status fail(const saving *s, ag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static ag_status fail(const saving *s, ag_status st, const char *fmt, ...)
{
    size_t at = 0;
    if (s->what && s->err && s->errlen) {
        ag__errf(s->err, s->errlen, st, "%s: ", s->what);
        at = strlen(s->err);
    }
    va_list ap;
    va_start(ap, fmt);
    if (s->err && at < s->errlen) ag__verrf(s->err + at, s->errlen - at, st, fmt, ap);
    va_end(ap);
    return st;
}

/* Step 1: path holds nothing, a regular file or a symbolic link. */
static ag_status check_target(const saving *s)
{
    struct stat sb;
    if (lstat(s->path, &sb) != 0) {
        if (errno == ENOENT) return AG_OK; /* a new file (a missing directory fails at step 2) */
        return fail(s, AG_ERR_IO, "%s: cannot write: %s", s->path, strerror(errno));
    }
    if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) return AG_OK;
    return fail(s, AG_ERR_IO, "%s: cannot write: it is %s, not a regular file (it is left as it is)", s->path,
                   kind_of(sb.st_mode));
}

/* 64 random bits: the kernel's (WASI's getentropy under WebAssembly), or
 * (where getrandom is unavailable) the clock, a counter and an address
 * mixed by splitmix64.  Uniqueness does not rest on them: O_EXCL refuses a
 * name that exists. */
static uint64_t random_bits(void)
{
    uint64_t x;
#ifdef __wasi__
    if (getentropy(&x, sizeof x) == 0) return x;
#else
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x) return x;
#endif
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    x ^= atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15u ^ (uint64_t)(uintptr_t)&ts;
    x += 0x9E3779B97F4A7C15u;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
    return x ^ (x >> 31);
}

/* Step 2: a new temporary beside path, named into tmp (tmplen bytes);
 * the fd, or -1 (error reported). */
static int create_temp(const saving *s, char *tmp, size_t tmplen)
{
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(tmp, tmplen, "%s.tmp.%ld.%016llx", s->path, (long)getpid(), (unsigned long long)random_bits());
        int fd;
        do fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        while (fd < 0 && errno == EINTR);
        if (fd >= 0) return fd;
        if (errno != EEXIST) break; /* (EEXIST: someone else's file, never ours to touch: draw again) */
    }
    fail(s, AG_ERR_IO, "%s: cannot create the temporary file '%s': %s", s->path, tmp, strerror(errno));
    return -1;
}

/* All n bytes, through short writes and EINTR; -1 with errno set on error. */
static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        ssize_t r = write(fd, p, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) {
            errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Step 3: the pieces into fd, synced, and fd closed (also on failure). */
static ag_status write_temp(const saving *s, int fd, const char *tmp, const ag__bytes *pieces, int n)
{
    for (int i = 0; i < n; i++)
        if (pieces[i].n && write_all(fd, pieces[i].p, pieces[i].n) != 0) {
            int e = errno;
            close(fd);
            return fail(s, AG_ERR_IO, "%s: writing '%s' failed: %s", s->path, tmp, strerror(e));
        }
    int r;
    do r = fsync(fd);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        int e = errno;
        close(fd);
        return fail(s, AG_ERR_IO, "%s: fsync of '%s' failed: %s", s->path, tmp, strerror(e));
    }
    /* after fsync, EINTR from close loses nothing (and the fd is gone) */
    if (close(fd) != 0 && errno != EINTR)
        return fail(s, AG_ERR_IO, "%s: closing '%s' failed: %s", s->path, tmp, strerror(errno));
    return AG_OK;
}

/* Step 5: fsync the directory holding path ("." when path has no '/'), so
 * that the rename in it is durable. */
static ag_status sync_dir(const saving *s, char *dir)
{
    const char *slash = strrchr(s->path, '/');
    size_t n = !slash ? 0 : slash == s->path ? 1 : (size_t)(slash - s->path);
    if (n) memcpy(dir, s->path, n);
    else dir[n++] = '.';
    dir[n] = '\0';
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? -1 : 0;
    while (fd >= 0 && (r = fsync(fd)) != 0 && errno == EINTR) {}
    /* some file systems cannot sync a directory: nothing more to do there */
    if (r != 0 && (errno == EINVAL || errno == ENOTSUP)) r = 0;
    int e = errno;
    if (fd >= 0) close(fd);
    if (r == 0) return AG_OK;
    return fail(s, AG_ERR_IO, "%s: written and renamed, but syncing its directory '%s' failed: %s (the new file may "
                   "not survive a crash)", s->path, dir, strerror(e));
}

ag_status ag__file_save(const char *what, const char *path, const ag__bytes *pieces, int n, char *err,
                        size_t errlen)
{
    saving s = {what, path, err, errlen};
    if (!path || !*path) return fail(&s, AG_ERR_ARG, "the output path is NULL or empty");
    if (n < 0 || (n && !pieces))
        return fail(&s, AG_ERR_ARG, "%s: %d pieces to write at %p", path, n, (const void *)pieces);
    /* every allocation first: once the temporary exists, only I/O can fail */
    size_t tmplen = strlen(path) + 48;
    char *tmp = ag__malloc(tmplen), *dir = ag__malloc(strlen(path) + 2);
    ag_status st = !tmp || !dir ? fail(&s, AG_ERR_NOMEM, "%s: out of memory", path) : check_target(&s);
    int fd = st ? -1 : create_temp(&s, tmp, tmplen);
    if (!st && fd < 0) st = AG_ERR_IO;
    if (!st && (st = write_temp(&s, fd, tmp, pieces, n))) unlink(tmp); /* ours: made with O_EXCL */
    if (!st && rename(tmp, path) != 0) {
        st = fail(&s, AG_ERR_IO, "%s: renaming '%s' over it failed: %s", path, tmp, strerror(errno));
        unlink(tmp);
    }
    if (!st) st = sync_dir(&s, dir);
    ag__free(tmp);
    ag__free(dir);
    return st;
}

/* ============================================================================
 * The public face (attograd_io.h)
 * ========================================================================== */

ag_status ag_file_read(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    if (!path || !out || !len) return ag__errf(err, errlen, AG_ERR_ARG, "file_read: %s is NULL",
                                               !path ? "path" : !out ? "out" : "len");
    return ag__file_read(path, out, len, err, errlen);
}

void ag_file_free(char *p) { ag__free(p); }

ag_status ag_file_write(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    if (!path || (!data && len)) return ag__errf(err, errlen, AG_ERR_ARG, "file_write: %s is NULL",
                                                 !path ? "path" : "data");
    ag__bytes piece = {data, len};
    return ag__file_save(NULL, path, &piece, 1, err, errlen);
}

