/* tests/test_streams.c: inputs read from pipes (bash's <(...), stdin):
 * read to their end, then checked exactly as a file of the same bytes; a
 * stream past the input limit is refused as soon as it passes it. */
#include "common.h"
#include "tmpdir.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

/* A child writes len bytes of data into a pipe and exits; the read end's
 * path ("/dev/fd/N") goes to path.  Returns the child's pid. */
static pid_t pipe_of(const void *data, size_t len, char *path, size_t pathlen, int *rd)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        signal(SIGPIPE, SIG_DFL);
        for (size_t at = 0; at < len;) {
            ssize_t w = write(fd[1], (const char *)data + at, len - at);
            if (w <= 0) _exit(1);
            at += (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    snprintf(path, pathlen, "/dev/fd/%d", fd[0]);
    *rd = fd[0];
    return pid;
}

static void done_with(pid_t pid, int rd)
{
    close(rd);
    waitpid(pid, NULL, 0);
}

/* the bytes of a small checkpoint: w [3, 2] */
static char *checkpoint_bytes(size_t *len)
{
    char err[256], *dir = make_tmpdir("streams"), *path = join(dir, "m.safetensors");
    const ag_real v[6] = {1, -2, 3.5, 4, 0.25, -6};
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    cr_assert_eq(ag_safetensors_add(w, "w", NULL, AG_SHAPE(3, 2), v), AG_OK);
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);
    char *bytes;
    cr_assert_eq(ag_file_read(path, &bytes, len, err, sizeof err), AG_OK, "%s", err);
    free(path);
    rm_dir(dir);
    return bytes;
}

Test(streams, a_checkpoint_through_a_pipe, .timeout = 20)
{
    size_t len;
    char *bytes = checkpoint_bytes(&len), path[64], err[512];
    int rd;
    pid_t pid = pipe_of(bytes, len, path, sizeof path, &rd);
    ag_safetensors *f = NULL;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    done_with(pid, rd);
    ag_real got[6];
    cr_assert_eq(ag_safetensors_read(f, "w", got, 6, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(got[2], (ag_real)3.5);
    cr_assert_eq(got[5], (ag_real)-6);
    ag_safetensors_free(f);

    /* cut short, or garbage: refused as the same bytes in a file are, naming the pipe */
    size_t cuts[2] = {len / 2, 5};
    for (int k = 0; k < 2; k++) {
        pid = pipe_of(bytes, cuts[k], path, sizeof path, &rd);
        f = (ag_safetensors *)1;
        cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_ERR_FORMAT, "cut at %zu: %s", cuts[k], err);
        cr_assert_null(f);
        cr_assert(strstr(err, path), "%s", err);
        done_with(pid, rd);
    }
    char garbage[300];
    memset(garbage, 'x', sizeof garbage);
    pid = pipe_of(garbage, sizeof garbage, path, sizeof path, &rd);
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_ERR_FORMAT, "%s", err);
    cr_assert(strstr(err, path) && strstr(err, "header"), "%s", err);
    done_with(pid, rd);
    ag_file_free(bytes);
}

/* A stream longer than the pipe's buffer is read to its end. */
Test(streams, a_long_stream_is_read_to_its_end, .timeout = 20)
{
    size_t n = 300000;
    char *data = malloc(n), path[64], err[256], *got;
    cr_assert_not_null(data);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + i % 26);
    int rd;
    pid_t pid = pipe_of(data, n, path, sizeof path, &rd);
    size_t len;
    cr_assert_eq(ag_file_read(path, &got, &len, err, sizeof err), AG_OK, "%s", err);
    done_with(pid, rd);
    cr_assert_eq(len, n);
    cr_assert_eq(memcmp(got, data, n), 0);
    cr_assert_eq(got[n], '\0');
    ag_file_free(got);
    free(data);
}

/* Past the input limit: a stream is refused once it passes it (its writer
 * may never stop), a file by its size; the limit's default is back after
 * ag_set_input_limit(0). */
Test(streams, the_input_limit, .timeout = 20)
{
    size_t dflt = ag_get_input_limit();
    cr_assert_geq(dflt, (size_t)1 << 30);
    ag_set_input_limit(1000);
    cr_assert_eq(ag_get_input_limit(), 1000);
    char data[5000], path[64], err[256], *got = (char *)1;
    memset(data, 'y', sizeof data);
    size_t len;
    int rd;
    pid_t pid = pipe_of(data, 1000, path, sizeof path, &rd); /* at the limit: fine */
    cr_assert_eq(ag_file_read(path, &got, &len, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(len, 1000);
    ag_file_free(got);
    done_with(pid, rd);
    pid = pipe_of(data, 1001, path, sizeof path, &rd);
    cr_assert_eq(ag_file_read(path, &got, &len, err, sizeof err), AG_ERR_IO);
    cr_assert_null(got);
    cr_assert(strstr(err, path) && strstr(err, "more than the input limit of 1000 bytes"), "%s", err);
    done_with(pid, rd);

    char *dir = make_tmpdir("streams"), *file = join(dir, "big");
    cr_assert_eq(ag_file_write(file, data, sizeof data, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors *f = (ag_safetensors *)1;
    cr_assert_eq(ag_safetensors_load(file, &f, err, sizeof err), AG_ERR_IO);
    cr_assert(strstr(err, "5000 bytes, more than the input limit of 1000 bytes"), "%s", err);
    cr_assert_null(f);
    ag_set_input_limit(0);
    cr_assert_eq(ag_get_input_limit(), dflt);
    free(file);
    rm_dir(dir);
}
