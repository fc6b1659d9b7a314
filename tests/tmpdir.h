/* tests/tmpdir.h: temporary directories and whole files, for the tests that
 * write files (checkpoints, pictures).  Each helper fails the test when the
 * system call under it fails. */
#ifndef AG_TESTS_TMPDIR_H
#define AG_TESTS_TMPDIR_H

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* A fresh directory /tmp/ag_<tag>_XXXXXX; rm_dir removes and frees it. */
static inline char *make_tmpdir(const char *tag)
{
    char tmpl[64];
    snprintf(tmpl, sizeof tmpl, "/tmp/ag_%s_XXXXXX", tag);
    cr_assert_not_null(mkdtemp(tmpl), "mkdtemp %s: %s", tmpl, strerror(errno));
    char *dir = strdup(tmpl);
    cr_assert_not_null(dir);
    return dir;
}

/* "<dir>/<name>" (free it). */
static inline char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    cr_assert_not_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Entries of dir other than . and .., and (when tmp_out is not NULL) the
 * name of one whose name holds ".tmp." (a save's temporary file), or "". */
static inline int count_entries(const char *dir, char *tmp_out, size_t len)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    if (tmp_out) tmp_out[0] = '\0';
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        if (tmp_out && strstr(e->d_name, ".tmp.")) snprintf(tmp_out, len, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* Remove dir and what is in it (files, and empty directories), and free
 * the string. */
static inline void rm_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = join(dir, e->d_name);
            if (unlink(p) != 0) rmdir(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static inline void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(b, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* The whole file, with a NUL after its last byte so that a text file is a
 * string (free it); *len gets its length when len is not NULL. */
static inline void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    cr_assert_not_null(b);
    for (size_t r; (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            b = realloc(b, cap *= 2);
            cr_assert_not_null(b);
        }
    }
    cr_assert(!ferror(f), "reading %s: %s", path, strerror(errno));
    fclose(f);
    b[n] = '\0'; /* n < cap: the loop grows b whenever it is full */
    if (len) *len = n;
    return b;
}

/* The file at path holds exactly the n bytes at want. */
static inline int file_equals(const char *path, const void *want, size_t n)
{
    size_t len;
    unsigned char *got = read_file(path, &len);
    int same = len == n && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

#endif
