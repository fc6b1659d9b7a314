/* tests/test_file_api.c: the public file reader and writer (attograd_io.h):
 * a round trip, and files that are not regular refused at once and left
 * as they were. */
#include "common.h"
#include "tmpdir.h"

#include <string.h>
#include <sys/stat.h>

Test(file_api, write_then_read_gives_the_bytes_and_a_nul)
{
    char err[256], *dir = make_tmpdir("file_api"), *path = join(dir, "r.json");
    cr_assert_eq(ag_file_write(path, "old", 3, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_file_write(path, "{\"a\": 1}\n", 9, err, sizeof err), AG_OK, "%s", err);
    char *got;
    size_t len;
    cr_assert_eq(ag_file_read(path, &got, &len, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(len, 9);
    cr_assert_str_eq(got, "{\"a\": 1}\n"); /* NUL-terminated */
    ag_file_free(got);
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "no temporary is left beside it");
    free(path);
    rm_dir(dir);
}

/* A FIFO that no writer opened reads at once as an empty stream (the
 * timeout fails the test if it blocks); a write to it is refused. */
Test(file_api, a_fifo_reads_as_a_stream_and_is_never_written, .timeout = 10)
{
    char err[256], *dir = make_tmpdir("file_api"), *path = join(dir, "f.fifo");
    cr_assert_eq(mkfifo(path, 0600), 0);
    char *got = NULL;
    size_t len = 7;
    cr_assert_eq(ag_file_read(path, &got, &len, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(got, "");
    ag_file_free(got);
    cr_assert_neq(ag_file_write(path, "x", 1, err, sizeof err), AG_OK);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    free(path);
    rm_dir(dir);
}

Test(file_api, null_arguments_are_errors)
{
    char err[256], *got;
    size_t len;
    cr_assert_eq(ag_file_read(NULL, &got, &len, err, sizeof err), AG_ERR_ARG);
    cr_assert_str_eq(err, "file_read: path is NULL");
    cr_assert_eq(ag_file_write("x", NULL, 3, err, sizeof err), AG_ERR_ARG);
    cr_assert_str_eq(err, "file_write: data is NULL");
    ag_file_free(NULL);
}
