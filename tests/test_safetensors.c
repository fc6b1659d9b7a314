/* tests/test_safetensors.c: checkpoints: the reader's checks (a generated
 * corpus of corrupt files, each with its own message), round trips, the
 * store as a checkpoint, crash-safe saving, and allocation failures. */
#define _DEFAULT_SOURCE /* mknod, makedev: a device node for the save tests */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "common.h"
#include "failing_alloc.h"
#include "st_corpus.h"
#include "tmpdir.h"

/* A file of bytes: 8-byte little-endian header length, header, data. */
static unsigned char *file_of(const char *header, const unsigned char *data, size_t dlen, size_t *len)
{
    size_t n = strlen(header);
    *len = 8 + n + dlen;
    unsigned char *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    if (dlen) memcpy(b + 8 + n, data, dlen);
    return b;
}

/* ---- every allocation of op may fail ----------------------------------------- */

/* Run op with its k-th allocation failing, k = 0, 1, ... until it runs
 * without a failure.  Each failing run must report AG_ERR_NOMEM, free all it
 * allocated, and pass check (when given).  Returns the failures seen. */
typedef ag_status (*sweep_op)(void *ctx, char *err, size_t errlen);
static int alloc_sweep(const char *what, sweep_op op, void *ctx, void (*check)(void *ctx))
{
    int failures = 0;
    for (long k = 0; k < 100000; k++) {
        char err[512] = "";
        long live = oom.live;
        oom_arm(k, 0);
        ag_status st = op(ctx, err, sizeof err);
        long failed = oom.failed;
        oom_arm(-1, 0);
        if (!failed) {
            cr_assert_eq(st, AG_OK, "%s: with no failure: %s", what, err);
            cr_assert_eq(oom.live, live, "%s: %ld blocks leaked on success", what, oom.live - live);
            break;
        }
        failures++;
        cr_assert_eq(st, AG_ERR_NOMEM, "%s: allocation %ld failed but status is %s (%s)", what, k,
                     ag_status_name(st), err);
        cr_assert_eq(oom.live, live, "%s: allocation %ld failed and %ld blocks leaked", what, k, oom.live - live);
        if (check) check(ctx);
    }
    cr_assert_gt(failures, 0, "%s: no allocation to fail", what);
    return failures;
}

/* ---- the corpus: every corrupt file is rejected with its own message ----------- */

Test(safetensors, corpus_of_corrupt_files_is_rejected_with_specific_messages)
{
    cr_assert_geq(ST_CORPUS_BAD_COUNT, 25);
    for (size_t i = 0; i < ST_CORPUS_BAD_COUNT; i++) {
        const st_corpus_case *c = &st_corpus_bad[i];
        size_t len;
        unsigned char *bytes = st_corpus_build(c, &len);
        ag_safetensors *f = (ag_safetensors *)1;
        char err[512] = "";
        ag_status st = ag_safetensors_parse(bytes, len, &f, err, sizeof err);
        cr_expect_eq(st, c->status, "case '%s': status %s, want %s (%s)", c->what, ag_status_name(st),
                     ag_status_name(c->status), err);
        cr_expect_null(f, "case '%s': *out not NULL on failure", c->what);
        cr_expect(strncmp(err, "safetensors buffer: ", 20) == 0, "case '%s': message '%s' does not name the buffer",
                  c->what, err);
        cr_expect_not_null(strstr(err, c->message), "case '%s':\n  message: %s\n  missing: %s", c->what, err,
                           c->message);
        if (st == AG_OK) ag_safetensors_free(f);
        free(bytes);
    }
}

Test(safetensors, corpus_through_files_names_the_path)
{
    char *dir = make_tmpdir("st");
    char *path = join(dir, "bad.safetensors");
    for (size_t i = 0; i < ST_CORPUS_BAD_COUNT; i++) {
        const st_corpus_case *c = &st_corpus_bad[i];
        size_t len;
        unsigned char *bytes = st_corpus_build(c, &len);
        write_bytes(path, bytes, len);
        ag_safetensors *f = (ag_safetensors *)1;
        char err[512] = "";
        ag_status st = ag_safetensors_load(path, &f, err, sizeof err);
        cr_expect_eq(st, c->status, "case '%s': %s", c->what, err);
        cr_expect_null(f);
        cr_expect(strncmp(err, path, strlen(path)) == 0 && strncmp(err + strlen(path), ": ", 2) == 0,
                  "case '%s': message '%s' does not start with the path", c->what, err);
        cr_expect_not_null(strstr(err, c->message), "case '%s':\n  message: %s\n  missing: %s", c->what, err,
                           c->message);
        free(bytes);
    }
    free(path);
    rm_dir(dir);
}

Test(safetensors, corpus_of_valid_files_is_accepted)
{
    for (size_t i = 0; i < ST_CORPUS_GOOD_COUNT; i++) {
        const st_corpus_case *c = &st_corpus_good[i];
        size_t len;
        unsigned char *bytes = st_corpus_build(c, &len);
        ag_safetensors *f = NULL;
        char err[512] = "";
        ag_status st = ag_safetensors_parse(bytes, len, &f, err, sizeof err);
        cr_expect_eq(st, AG_OK, "case '%s': %s", c->what, err);
        if (st == AG_OK) {
            cr_expect_eq(ag_safetensors_count(f), c->count, "case '%s': %d tensors, want %d", c->what, ag_safetensors_count(f),
                         c->count);
            /* every tensor's bytes are the pattern at its offset */
            for (int t = 0; t < ag_safetensors_count(f); t++)
                cr_expect_eq(ag_safetensors_find(f, ag_safetensors_name(f, t)), t, "case '%s': tensor %d not found by name", c->what, t);
            ag_safetensors_free(f);
        }
        free(bytes);
    }
}

Test(safetensors, accepted_files_keep_header_order_dtypes_and_shapes)
{
    /* "tensors and keys in any order": b comes first in the header, a first in the data */
    size_t len;
    unsigned char *bytes = st_corpus_build(&st_corpus_good[6], &len);
    ag_safetensors *f;
    char err[256];
    cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_count(f), 2);
    cr_assert_str_eq(ag_safetensors_name(f, 0), "b");
    cr_assert_str_eq(ag_safetensors_name(f, 1), "a");
    cr_assert_str_eq(ag_safetensors_dtype(f, 0), "I32");
    cr_assert_str_eq(ag_safetensors_dtype(f, 1), "U16");
    cr_assert_eq(ag_safetensors_ndim(f, 1), 1);
    cr_assert_eq(ag_safetensors_shape(f, 1)[0], 2);
    cr_assert_eq(ag_safetensors_numel(f, 1), 2);
    /* data pattern i*7+1: a is bytes 0..3, b bytes 4..7 */
    const unsigned char *a = ag_safetensors_bytes(f, 1), *b = ag_safetensors_bytes(f, 0);
    cr_assert_eq(a[0], 1);
    cr_assert_eq(b[0], 4 * 7 + 1);
    cr_assert_eq(ag_safetensors_find(f, "a"), 1);
    cr_assert_eq(ag_safetensors_find(f, "c"), -1);
    cr_assert_null(ag_safetensors_name(f, 2));
    cr_assert_eq(ag_safetensors_meta_count(f), 0);
    ag_safetensors_free(f);
    free(bytes);

    /* rank 0, zero-size, 64 axes */
    bytes = st_corpus_build(&st_corpus_good[3], &len);
    cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_ndim(f, 0), 0);
    cr_assert_eq(ag_safetensors_numel(f, 0), 1);
    ag_safetensors_free(f);
    free(bytes);
    bytes = st_corpus_build(&st_corpus_good[5], &len);
    cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
    int z = ag_safetensors_find(f, "z");
    cr_assert_eq(ag_safetensors_numel(f, z), 0);
    cr_assert_eq(ag_safetensors_ndim(f, z), 2);
    cr_assert_eq(ag_safetensors_shape(f, z)[0], 3);
    cr_assert_eq(ag_safetensors_shape(f, z)[1], 0);
    ag_safetensors_free(f);
    free(bytes);
    bytes = st_corpus_build(&st_corpus_good[ST_CORPUS_GOOD_COUNT - 1], &len);
    cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_ndim(f, 0), 64);
    ag_safetensors_free(f);
    free(bytes);
}

Test(safetensors, header_strings_are_decoded)
{
    /* "metadata with escapes and unicode" */
    size_t len;
    unsigned char *bytes = st_corpus_build(&st_corpus_good[8], &len);
    ag_safetensors *f;
    char err[256];
    cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_meta_count(f), 2);
    cr_assert_str_eq(ag_safetensors_meta_key(f, 0), "q\"k");
    cr_assert_str_eq(ag_safetensors_meta(f, "q\"k"), "a\\b/\xc3\xa9\xf0\x9f\x98\x80\n"); /* é, U+1F600 */
    cr_assert_str_eq(ag_safetensors_meta(f, ""), "");
    cr_assert_null(ag_safetensors_meta(f, "missing"));
    ag_safetensors_free(f);
    free(bytes);
}

Test(safetensors, values_are_read_from_little_endian_bytes_at_any_alignment)
{
    /* bytes written by hand: F32 1.0, -2.5; F64 0.375; I32 -7, 123456; I64 2^32 */
    static const unsigned char data[] = {
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0,             /* f */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd8, 0x3f,             /* d */
        0xf9, 0xff, 0xff, 0xff, 0x40, 0xe2, 0x01, 0x00,             /* i */
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,             /* big */
    };
    /* an odd header length puts the data at an odd address in the file */
    const char *hdr = "{\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                      "\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                      "\"big\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[24,32]}} ";
    cr_assert_eq(strlen(hdr) % 2, 1, "the header length should be odd");
    size_t len;
    unsigned char *bytes = file_of(hdr, data, sizeof data, &len);
    char *dir = make_tmpdir("st"), *path = join(dir, "hand.safetensors");
    write_bytes(path, bytes, len);
    for (int via_file = 0; via_file < 2; via_file++) {
        ag_safetensors *f;
        char err[256];
        ag_status st = via_file ? ag_safetensors_load(path, &f, err, sizeof err) : ag_safetensors_parse(bytes, len, &f, err, sizeof err);
        cr_assert_eq(st, AG_OK, "%s", err);
        ag_real v[2];
        cr_assert_eq(ag_safetensors_read(f, "f", v, 2, err, sizeof err), AG_OK, "%s", err);
        cr_assert_eq(v[0], (ag_real)1.0);
        cr_assert_eq(v[1], (ag_real)-2.5);
        cr_assert_eq(ag_safetensors_read(f, "d", v, 1, err, sizeof err), AG_OK, "%s", err);
        cr_assert_eq(v[0], (ag_real)0.375);
        int iv[2];
        cr_assert_eq(ag_safetensors_read_int(f, "i", iv, 2, err, sizeof err), AG_OK, "%s", err);
        cr_assert_eq(iv[0], -7);
        cr_assert_eq(iv[1], 123456);
        cr_assert_eq(ag_safetensors_read_int(f, "big", iv, 1, err, sizeof err), AG_ERR_FORMAT);
        cr_assert_str_eq(err, "tensor 'big': element 0 is 4294967296, outside the range of int");
        ag_safetensors_free(f);
    }
    free(bytes);
    free(path);
    rm_dir(dir);
}

/* ---- writing and reading back ---------------------------------------------------- */

Test(safetensors, round_trip_of_tensors_and_metadata)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "rt.safetensors");
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    cr_assert_not_null(w);
    const ag_real wv[6] = {0.5, -1.25, 3, 1024, -0.0078125, 7};
    const ag_real bv[3] = {(ag_real)0.1, -2.5, (ag_real)1e10};
    const ag_real sv = 42.5;
    const int ids[4] = {0, -1, INT_MAX, INT_MIN};
    const char *uni = "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x99\x82"; /* héllo ✓ 🙂 */
    cr_assert_eq(ag_safetensors_add(w, "layer.w", "F32", AG_SHAPE(3, 2), wv), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "layer.b", "F64", AG_SHAPE(3), bv), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "scalar", "F32", 0, NULL, &sv), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "empty", "F32", AG_SHAPE(0, 4), NULL), AG_OK);
    cr_assert_eq(ag_safetensors_add_int(w, "ids", AG_SHAPE(4), ids), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "quote\"key", "back\\slash"), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "unicode", uni), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "controls", "a\nb\tc\x01" "d\x7f"), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "empty", ""), AG_OK);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);

    /* the layout: header padded with spaces to a multiple of 8, then the data */
    size_t len;
    unsigned char *raw = read_file(path, &len);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)raw[i] << (8 * i);
    cr_assert_eq(n % 8, 0, "header length %llu is not a multiple of 8", (unsigned long long)n);
    cr_assert_eq(len, 8 + n + 24 + 24 + 4 + 0 + 32);
    size_t end = 8 + (size_t)n;
    while (raw[end - 1] == ' ') end--;
    cr_assert_eq(raw[end - 1], '}', "the header is padded with spaces only");
    cr_assert_lt(8 + n - end, 8, "at most 7 bytes of padding");
    /* 0.5f little-endian: 00 00 00 3f */
    cr_assert(raw[8 + n] == 0 && raw[8 + n + 1] == 0 && raw[8 + n + 2] == 0 && raw[8 + n + 3] == 0x3f);
    free(raw);

    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_count(f), 5);
    const char *names[5] = {"layer.w", "layer.b", "scalar", "empty", "ids"};
    const char *dtypes[5] = {"F32", "F64", "F32", "F32", "I64"};
    const int ndims[5] = {2, 1, 0, 2, 1};
    const size_t numels[5] = {6, 3, 1, 0, 4};
    for (int i = 0; i < 5; i++) {
        cr_assert_str_eq(ag_safetensors_name(f, i), names[i]);
        cr_assert_str_eq(ag_safetensors_dtype(f, i), dtypes[i]);
        cr_assert_eq(ag_safetensors_ndim(f, i), ndims[i]);
        cr_assert_eq(ag_safetensors_numel(f, i), numels[i]);
        cr_assert_eq(ag_safetensors_find(f, names[i]), i);
    }
    cr_assert_eq(ag_safetensors_shape(f, 0)[0], 3);
    cr_assert_eq(ag_safetensors_shape(f, 0)[1], 2);
    cr_assert_eq(ag_safetensors_shape(f, 3)[0], 0);
    cr_assert_eq(ag_safetensors_shape(f, 3)[1], 4);

    ag_real got[6];
    cr_assert_eq(ag_safetensors_read(f, "layer.w", got, 6, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 6; i++) cr_assert_eq(got[i], wv[i], "layer.w[%d]", i);
    cr_assert_eq(ag_safetensors_read(f, "layer.b", got, 3, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 3; i++) cr_assert_eq(got[i], bv[i], "layer.b[%d]", i);
    cr_assert_eq(ag_safetensors_read(f, "scalar", got, 1, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(got[0], sv);
    cr_assert_eq(ag_safetensors_read(f, "empty", got, 0, err, sizeof err), AG_OK, "%s", err);
    int gi[4];
    cr_assert_eq(ag_safetensors_read_int(f, "ids", gi, 4, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 4; i++) cr_assert_eq(gi[i], ids[i]);

    ag_graph *g = ag_graph_new();
    ag_tensor *t = ag_tensor_new(g, AG_SHAPE(3, 2));
    cr_assert_eq(ag_safetensors_read_tensor(f, "layer.w", t, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 6; i++) cr_assert_eq(t->data[i], wv[i]);
    ag_tensor *s = ag_tensor_new(g, 0, NULL);
    cr_assert_eq(ag_safetensors_read_tensor(f, "scalar", s, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(s->data[0], sv);
    ag_graph_free(g);

    cr_assert_eq(ag_safetensors_meta_count(f), 4);
    cr_assert_str_eq(ag_safetensors_meta_key(f, 0), "quote\"key");
    cr_assert_str_eq(ag_safetensors_meta(f, "quote\"key"), "back\\slash");
    cr_assert_str_eq(ag_safetensors_meta(f, "unicode"), uni);
    cr_assert_str_eq(ag_safetensors_meta(f, "controls"), "a\nb\tc\x01" "d\x7f");
    cr_assert_str_eq(ag_safetensors_meta(f, "empty"), "");
    ag_safetensors_free(f);
    free(path);
    rm_dir(dir);
}

Test(safetensors, empty_writer_saves_a_valid_empty_file)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "empty.safetensors");
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    char err[256];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);
    static const unsigned char want[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    cr_assert(file_equals(path, want, sizeof want));
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_count(f), 0);
    ag_safetensors_free(f);
    free(path);
    rm_dir(dir);
}

/* A file with w [3, 2] F32, s [] F32 and n [2] I64, parsed. */
static ag_safetensors *small_file(void)
{
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    const ag_real v[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(ag_safetensors_add(w, "w", "F32", AG_SHAPE(3, 2), v), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "s", "F32", 0, NULL, v), AG_OK);
    cr_assert_eq(ag_safetensors_add_int(w, "n", AG_SHAPE(2), ((const int[]){3, 4})), AG_OK);
    char *dir = make_tmpdir("st"), *path = join(dir, "small.safetensors");
    char err[256];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    free(path);
    rm_dir(dir);
    return f;
}

Test(safetensors, reads_that_do_not_fit_name_the_tensor_and_the_mismatch)
{
    ag_safetensors *f = small_file();
    char err[256];
    ag_real buf[8];
    int ib[8];
    ag_graph *g = ag_graph_new();

    ag_tensor *t = ag_tensor_new(g, AG_SHAPE(2, 3));
    cr_assert_eq(ag_safetensors_read_tensor(f, "w", t, err, sizeof err), AG_ERR_SHAPE);
    cr_assert_str_eq(err, "tensor 'w': shape [3, 2] in file, [2, 3] expected");
    t = ag_tensor_new(g, AG_SHAPE(1));
    cr_assert_eq(ag_safetensors_read_tensor(f, "s", t, err, sizeof err), AG_ERR_SHAPE);
    cr_assert_str_eq(err, "tensor 's': shape [] in file, [1] expected");
    cr_assert_eq(ag_safetensors_read_tensor(f, "n", t, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_str_eq(err, "tensor 'n': dtype I64 in file, F32 or F64 expected");

    cr_assert_eq(ag_safetensors_read(f, "w", buf, 5, err, sizeof err), AG_ERR_SHAPE);
    cr_assert_str_eq(err, "tensor 'w': 6 elements in file, 5 expected");
    cr_assert_eq(ag_safetensors_read(f, "n", buf, 2, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_str_eq(err, "tensor 'n': dtype I64 in file, F32 or F64 expected");
    cr_assert_eq(ag_safetensors_read(f, "nope", buf, 2, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_str_eq(err, "tensor 'nope': not in the file");

    cr_assert_eq(ag_safetensors_read_int(f, "w", ib, 6, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_str_eq(err, "tensor 'w': dtype F32 in file, I64 or I32 expected");
    cr_assert_eq(ag_safetensors_read_int(f, "n", ib, 3, err, sizeof err), AG_ERR_SHAPE);
    cr_assert_str_eq(err, "tensor 'n': 2 elements in file, 3 expected");
    cr_assert_eq(ag_safetensors_read_int(f, "n", ib, 2, err, sizeof err), AG_OK, "%s", err);
    cr_assert(ib[0] == 3 && ib[1] == 4);

    cr_assert_eq(ag_safetensors_read(NULL, "w", buf, 6, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_safetensors_read_tensor(f, "w", NULL, err, sizeof err), AG_ERR_ARG);
    /* a NULL or empty message buffer is allowed */
    cr_assert_eq(ag_safetensors_read(f, "nope", buf, 2, NULL, 0), AG_ERR_FORMAT);
    ag_graph_free(g);
    ag_safetensors_free(f);
}

Test(safetensors, load_of_a_missing_file_or_a_directory_fails_with_a_message)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "absent.safetensors");
    ag_safetensors *f = (ag_safetensors *)1;
    char err[512];
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_ERR_IO);
    cr_assert_null(f);
    cr_assert_not_null(strstr(err, path));
    cr_assert_not_null(strstr(err, "No such file or directory"), "%s", err);
    cr_assert_eq(ag_safetensors_load(dir, &f, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "Is a directory"), "%s", err);
    free(path);
    rm_dir(dir);
}

Test(safetensors, writer_rejects_bad_arguments)
{
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    const ag_real v[4] = {1, 2, 3, 4};
    cr_assert_eq(ag_safetensors_add(w, "a", "F32", AG_SHAPE(4), v), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "a", "F32", AG_SHAPE(4), v), AG_ERR_ARG, "duplicate name");
    cr_assert_str_eq(ag_safetensors_writer_error(w), "tensor 'a': the name is given twice");
    cr_assert_eq(ag_safetensors_add_int(w, "a", AG_SHAPE(1), (const int[]){1}), AG_ERR_ARG, "duplicate name (int)");
    cr_assert_eq(ag_safetensors_add(w, "b", "F16", AG_SHAPE(4), v), AG_ERR_ARG, "unsupported dtype");
    cr_assert_str_eq(ag_safetensors_writer_error(w), "tensor 'b': dtype F16, F32 or F64 expected");
    cr_assert_eq(ag_safetensors_add(w, "b", "F32", AG_SHAPE(-1), v), AG_ERR_ARG, "negative dimension");
    cr_assert_str_eq(ag_safetensors_writer_error(w), "tensor 'b': axis 0 of size -1 is negative");
    cr_assert_eq(ag_safetensors_add(w, "b", "F32", AG_MAX_DIMS + 1, (const int[8]){1, 1, 1, 1, 1, 1, 1, 1}, v), AG_ERR_ARG,
                 "too many axes");
    cr_assert_eq(ag_safetensors_add(w, "b", "F32", AG_SHAPE(4), NULL), AG_ERR_ARG, "no data");
    cr_assert_str_eq(ag_safetensors_writer_error(w), "tensor 'b': the data is NULL");
    cr_assert_eq(ag_safetensors_add(w, "__metadata__", "F32", AG_SHAPE(4), v), AG_ERR_ARG, "reserved name");
    cr_assert_eq(ag_safetensors_add(w, "bad\xff", "F32", AG_SHAPE(4), v), AG_ERR_ARG, "name not UTF-8");
    cr_assert_eq(ag_safetensors_add(w, NULL, "F32", AG_SHAPE(4), v), AG_ERR_ARG, "NULL name");
    cr_assert_eq(ag_safetensors_add_meta(w, "k", "v"), AG_OK);
    cr_assert_eq(ag_safetensors_add_meta(w, "k", "other"), AG_ERR_ARG, "duplicate metadata key");
    cr_assert_str_eq(ag_safetensors_writer_error(w), "key 'k' is given twice");
    cr_assert_eq(ag_safetensors_add_meta(w, "k2", "\xc0\xaf"), AG_ERR_ARG, "value not UTF-8");
    cr_assert_eq(ag_safetensors_add_meta(w, "k3", NULL), AG_ERR_ARG);
    /* a NULL dtype means ag_real's own */
    cr_assert_eq(ag_safetensors_add(w, "c", NULL, AG_SHAPE(4), v), AG_OK);

    /* the failed calls left nothing behind */
    char *dir = make_tmpdir("st"), *path = join(dir, "w.safetensors");
    char err[256];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_count(f), 2);
    cr_assert_str_eq(ag_safetensors_dtype(f, 1), sizeof(ag_real) == 8 ? "F64" : "F32");
    cr_assert_eq(ag_safetensors_meta_count(f), 1);
    cr_assert_str_eq(ag_safetensors_meta(f, "k"), "v");
    ag_safetensors_free(f);
    ag_safetensors_writer_free(w);
    free(path);
    rm_dir(dir);
}

/* ---- saving crash-safely ------------------------------------------------------------ */

/* A writer with one tensor of n values starting at first. */
static ag_safetensors_writer *writer_of(int n, ag_real first)
{
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    ag_real *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = first + (ag_real)i;
    cr_assert_eq(ag_safetensors_add(w, "x", "F32", 1, &n, v), AG_OK);
    free(v);
    return w;
}

Test(safetensors, save_into_a_missing_directory_fails_with_a_message)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "no/such/dir/x.safetensors");
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, path), "%s", err);
    cr_assert_not_null(strstr(err, "cannot create the temporary file"), "%s", err);
    cr_assert_not_null(strstr(err, "No such file or directory"), "%s", err);
    cr_assert_eq(count_entries(dir, NULL, 0), 0);
    ag_safetensors_writer_free(w);
    free(path);
    rm_dir(dir);
}

Test(safetensors, save_under_a_regular_file_fails_and_changes_nothing)
{
    char *dir = make_tmpdir("st"), *plain = join(dir, "plain"), *path = join(dir, "plain/x.safetensors");
    write_bytes(plain, "hello", 5);
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, path), "%s", err);
    cr_assert_not_null(strstr(err, "Not a directory"), "%s", err);
    cr_assert(file_equals(plain, (const unsigned char *)"hello", 5));
    cr_assert_eq(count_entries(dir, NULL, 0), 1);
    ag_safetensors_writer_free(w);
    free(plain);
    free(path);
    rm_dir(dir);
}

Test(safetensors, save_over_a_directory_fails_and_leaves_no_temporary_file)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "target");
    cr_assert_eq(mkdir(path, 0755), 0);
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "it is a directory, not a regular file"), "%s", err);
    cr_assert_not_null(strstr(err, path), "%s", err);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert(S_ISDIR(sb.st_mode), "the directory is still there");
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "the temporary file is gone");
    ag_safetensors_writer_free(w);
    free(path);
    rm_dir(dir);
}

Test(safetensors, save_replaces_an_existing_file_whole)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "ckpt.safetensors");
    char err[512];
    ag_safetensors_writer *old = writer_of(4, 100), *neu = writer_of(6, -3);
    cr_assert_eq(ag_safetensors_save(old, path, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_save(neu, path, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "no temporary file left");
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    ag_real v[6];
    cr_assert_eq(ag_safetensors_read(f, "x", v, 6, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 6; i++) cr_assert_eq(v[i], (ag_real)(i - 3));
    ag_safetensors_free(f);
    ag_safetensors_writer_free(old);
    ag_safetensors_writer_free(neu);
    free(path);
    rm_dir(dir);
}

Test(safetensors, a_failed_write_leaves_the_old_file_intact)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "ckpt.safetensors");
    char err[512];
    ag_safetensors_writer *old = writer_of(4, 100), *big = writer_of(4096, 0);
    cr_assert_eq(ag_safetensors_save(old, path, err, sizeof err), AG_OK, "%s", err);
    size_t old_len;
    unsigned char *old_bytes = read_file(path, &old_len);

    /* files may not grow past 1 KiB: the write of 16 KiB fails with EFBIG */
    struct rlimit saved, small;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small = saved;
    small.rlim_cur = 1024;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    ag_status st = ag_safetensors_save(big, path, err, sizeof err);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);

    cr_assert_eq(st, AG_ERR_IO, "%s", err);
    cr_assert_not_null(strstr(err, "writing"), "%s", err);
    cr_assert_not_null(strstr(err, "File too large"), "%s", err);
    cr_assert_not_null(strstr(err, path), "%s", err);
    cr_assert(file_equals(path, old_bytes, old_len), "the old checkpoint is intact");
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "the temporary file is gone");
    free(old_bytes);
    ag_safetensors_writer_free(old);
    ag_safetensors_writer_free(big);
    free(path);
    rm_dir(dir);
}

/* ---- the store as a checkpoint ---------------------------------------------------- */

/* enc.w [2, 3], enc.b [3], scale [] filled with base + 0.25 i. */
static ag_store *store_of(double base)
{
    ag_store *s = ag_store_new();
    cr_assert_not_null(ag_param(s, "enc.w", AG_SHAPE(2, 3)));
    cr_assert_not_null(ag_param(s, "enc.b", AG_SHAPE(3)));
    cr_assert_not_null(ag_param(s, "scale", 0, NULL));
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        for (size_t k = 0; k < t->size; k++) t->data[k] = (ag_real)(base + 0.25 * (double)(k + 10 * (size_t)i));
    }
    return s;
}

/* Every parameter of a equals the one of b. */
static int store_equal(const ag_store *a, const ag_store *b)
{
    if (ag_store_count(a) != ag_store_count(b)) return 0;
    for (int i = 0; i < ag_store_count(a); i++) {
        const ag_tensor *x = ag_store_at(a, i), *y = ag_store_find(b, x->name);
        if (!y || x->size != y->size || memcmp(x->data, y->data, x->size * sizeof(ag_real)) != 0) return 0;
    }
    return 1;
}

Test(safetensors, store_save_and_load_round_trip)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "model.safetensors");
    ag_store *s = store_of(1.5), *t = store_of(-7);
    const char *meta[] = {"step", "100", "note", "a \"quoted\" \\ value"};
    char err[512];
    cr_assert_eq(ag_store_save(s, path, meta, 2, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_count(f), 3);
    cr_assert_str_eq(ag_safetensors_dtype(f, 0), sizeof(ag_real) == 8 ? "F64" : "F32");
    cr_assert_str_eq(ag_safetensors_meta(f, "step"), "100");
    cr_assert_str_eq(ag_safetensors_meta(f, "note"), "a \"quoted\" \\ value");
    cr_assert(!store_equal(s, t));
    cr_assert_eq(ag_store_load(t, f, err, sizeof err), AG_OK, "%s", err);
    cr_assert(store_equal(s, t), "loaded parameters equal the saved ones");
    ag_safetensors_free(f);
    ag_store_free(s);
    ag_store_free(t);
    free(path);
    rm_dir(dir);
}

Test(safetensors, store_load_converts_the_other_float_width)
{
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    const ag_real v[3] = {(ag_real)0.1, (ag_real)-2.75, (ag_real)1e-3};
    /* the width ag_real is not */
    const char *other = sizeof(ag_real) == 8 ? "F32" : "F64";
    cr_assert_eq(ag_safetensors_add(w, "b", other, AG_SHAPE(3), v), AG_OK);
    char *dir = make_tmpdir("st"), *path = join(dir, "other.safetensors");
    char err[256];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    ag_store *s = ag_store_new();
    ag_tensor *b = ag_param(s, "b", AG_SHAPE(3));
    cr_assert_eq(ag_store_load(s, f, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < 3; i++) /* F32 <-> F64: float's rounding, nothing more */
        cr_assert_eq(b->data[i], (ag_real)(float)v[i], "b[%d] = %.17g, want %.17g", i, (double)b->data[i],
                     (double)(float)v[i]);
    ag_store_free(s);
    ag_safetensors_free(f);
    ag_safetensors_writer_free(w);
    free(path);
    rm_dir(dir);
}

/* Load f into a store of base values; it must fail with status and msg, and
 * change no parameter. */
static void expect_load_fails(ag_store *s, const ag_safetensors *f, ag_status status, const char *msg)
{
    ag_store *before = store_of(0);
    for (int i = 0; i < ag_store_count(before); i++) { /* snapshot of s */
        ag_tensor *x = ag_store_find(s, ag_store_at(before, i)->name);
        if (x) memcpy(ag_store_at(before, i)->data, x->data, x->size * sizeof(ag_real));
    }
    char err[512];
    cr_assert_eq(ag_store_load(s, f, err, sizeof err), status, "%s", err);
    cr_assert_str_eq(err, msg);
    for (int i = 0; i < ag_store_count(before); i++) {
        const ag_tensor *x = ag_store_find(s, ag_store_at(before, i)->name), *y = ag_store_at(before, i);
        if (x && x->size == y->size)
            cr_assert(memcmp(x->data, y->data, x->size * sizeof(ag_real)) == 0, "parameter '%s' changed", x->name);
    }
    ag_store_free(before);
}

Test(safetensors, store_load_failures_change_no_parameter)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "model.safetensors");
    ag_store *saved = store_of(3);
    char err[512];
    cr_assert_eq(ag_store_save(saved, path, NULL, 0, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);

    /* a parameter the file lacks, after ones it has */
    ag_store *s = store_of(-1);
    cr_assert_not_null(ag_param(s, "extra", AG_SHAPE(2)));
    expect_load_fails(s, f, AG_ERR_FORMAT, "tensor 'extra': not in the file");
    ag_store_free(s);

    /* a shape that differs, in the last parameter */
    s = ag_store_new();
    ag_param(s, "enc.w", AG_SHAPE(2, 3));
    ag_param(s, "enc.b", AG_SHAPE(3));
    ag_param(s, "scale", AG_SHAPE(1));
    expect_load_fails(s, f, AG_ERR_SHAPE, "tensor 'scale': shape [] in file, [1] expected");
    ag_store_free(s);
    ag_safetensors_free(f);

    /* a dtype that is not a float */
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    const ag_real v[6] = {0};
    cr_assert_eq(ag_safetensors_add(w, "enc.w", NULL, AG_SHAPE(2, 3), v), AG_OK);
    cr_assert_eq(ag_safetensors_add(w, "scale", NULL, 0, NULL, v), AG_OK);
    cr_assert_eq(ag_safetensors_add_int(w, "enc.b", AG_SHAPE(3), (const int[]){1, 2, 3}), AG_OK);
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_writer_free(w);
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    s = store_of(5);
    expect_load_fails(s, f, AG_ERR_FORMAT, "tensor 'enc.b': dtype I64 in file, F32 or F64 expected");
    ag_store_free(s);
    ag_safetensors_free(f);

    ag_store_free(saved);
    free(path);
    rm_dir(dir);
}

Test(safetensors, store_save_rejects_bad_metadata)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "model.safetensors");
    ag_store *s = store_of(0);
    const char *meta[] = {"k", "1", "k", "2"};
    char err[512];
    cr_assert_eq(ag_store_save(s, path, meta, 2, err, sizeof err), AG_ERR_ARG);
    cr_assert_not_null(strstr(err, "metadata pair 1: key 'k' is given twice"), "%s", err);
    cr_assert_eq(ag_store_save(s, path, NULL, 1, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(count_entries(dir, NULL, 0), 0, "nothing written");
    ag_store_free(s);
    free(path);
    rm_dir(dir);
}

/* ---- every allocation may fail ------------------------------------------------------ */

typedef struct sweep_ctx {
    const unsigned char *bytes;
    size_t len;
    const char *path;
    const unsigned char *old; /* the file at path before a save */
    size_t old_len;
    const char *dir;
    ag_store *store;
} sweep_ctx;

static ag_status op_parse(void *p, char *err, size_t errlen)
{
    sweep_ctx *c = p;
    ag_safetensors *f = NULL;
    ag_status st = ag_safetensors_parse(c->bytes, c->len, &f, err, errlen);
    if (st == AG_OK) {
        cr_assert_eq(ag_safetensors_count(f), 3);
        cr_assert_str_eq(ag_safetensors_meta(f, "q\"k"), "a\\b/\xc3\xa9\xf0\x9f\x98\x80\n");
    } else {
        cr_assert_null(f);
    }
    ag_safetensors_free(f);
    return st;
}

static ag_status op_load(void *p, char *err, size_t errlen)
{
    sweep_ctx *c = p;
    ag_safetensors *f = NULL;
    ag_status st = ag_safetensors_load(c->path, &f, err, errlen);
    if (st == AG_OK) cr_assert_eq(ag_safetensors_count(f), 3);
    if (st == AG_ERR_NOMEM) cr_assert_not_null(strstr(err, "out of memory"), "%s", err);
    ag_safetensors_free(f);
    return st;
}

/* The writer built step by step, then saved over the old file. */
static ag_status op_save(void *p, char *err, size_t errlen)
{
    sweep_ctx *c = p;
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    if (!w) return AG_ERR_NOMEM;
    const ag_real v[12] = {1, 2, 3};
    ag_status st = AG_OK;
    char name[16];
    for (int i = 0; !st && i < 10; i++) { /* enough to make the arrays grow */
        snprintf(name, sizeof name, "t%d", i);
        st = ag_safetensors_add(w, name, "F32", AG_SHAPE(3, 4), v);
    }
    if (!st) st = ag_safetensors_add_int(w, "ids", AG_SHAPE(2), (const int[]){1, 2});
    for (int i = 0; !st && i < 10; i++) {
        snprintf(name, sizeof name, "k%d", i);
        st = ag_safetensors_add_meta(w, name, "value \"quoted\"");
    }
    if (!st) st = ag_safetensors_save(w, c->path, err, errlen);
    ag_safetensors_writer_free(w);
    return st;
}

static void check_old_file(void *p)
{
    sweep_ctx *c = p;
    cr_assert(file_equals(c->path, c->old, c->old_len), "a failed save changed the file");
    cr_assert_eq(count_entries(c->dir, NULL, 0), 1, "a failed save left a temporary file");
}

static ag_status op_store_save(void *p, char *err, size_t errlen)
{
    sweep_ctx *c = p;
    const char *meta[] = {"a", "1", "b", "2"};
    return ag_store_save(c->store, c->path, meta, 2, err, errlen);
}

static ag_status op_store_load(void *p, char *err, size_t errlen)
{
    sweep_ctx *c = p;
    ag_safetensors *f;
    ag_status st = ag_safetensors_load(c->path, &f, err, errlen);
    if (st) return st;
    st = ag_store_load(c->store, f, err, errlen);
    ag_safetensors_free(f);
    return st;
}

Test(safetensors, every_allocation_failure_is_reported_without_leaks)
{
    oom_install();
    char *dir = make_tmpdir("st"), *path = join(dir, "f.safetensors");
    /* a valid file with metadata and 3 tensors: the "zero-size tensor" case
     * with the metadata of the "escapes" case */
    const char *hdr = "{\"__metadata__\":{\"q\\\"k\":\"a\\\\b\\/\\u00e9\\ud83d\\ude00\\n\",\"\":\"\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"z\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                      "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
    static const unsigned char data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    sweep_ctx c = {0};
    unsigned char *bytes = file_of(hdr, data, sizeof data, &c.len);
    c.bytes = bytes;
    c.path = path;
    c.dir = dir;
    write_bytes(path, bytes, c.len);
    alloc_sweep("ag_safetensors_parse", op_parse, &c, NULL);
    alloc_sweep("ag_safetensors_load", op_load, &c, NULL);

    /* saves over the file: each failure leaves it as it was */
    c.old = bytes;
    c.old_len = c.len;
    alloc_sweep("ag_safetensors_save", op_save, &c, check_old_file);

    c.store = store_of(2);
    unsigned char *before = read_file(path, &c.old_len);
    c.old = before;
    alloc_sweep("ag_store_save", op_store_save, &c, check_old_file);
    free(before);
    ag_store *saved = c.store;
    c.store = store_of(-4);
    alloc_sweep("ag_store_load", op_store_load, &c, NULL);
    cr_assert(store_equal(saved, c.store));
    ag_store_free(saved);
    ag_store_free(c.store);
    cr_assert_eq(oom.live, 0, "%ld blocks still allocated", oom.live);
    ag_set_allocator(NULL);
    free(bytes);
    free(path);
    rm_dir(dir);
}

/* ---- paths that are not plain files ------------------------------------------------ */

/* A save aimed at something that is not a regular file refuses, names what
 * it is, and leaves it as it was: a FIFO here, a device below. */
Test(safetensors, save_refuses_a_fifo_or_a_device_and_leaves_it_alone)
{
    char *dir = make_tmpdir("st"), *fifo = join(dir, "pipe");
    cr_assert_eq(mkfifo(fifo, 0644), 0, "mkfifo: %s", strerror(errno));
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, fifo, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "it is a FIFO, not a regular file"), "%s", err);
    struct stat sb;
    cr_assert_eq(lstat(fifo, &sb), 0);
    cr_assert(S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "no temporary file left");
    /* /dev/full: refused before any temporary is made in /dev */
    cr_assert_eq(ag_safetensors_save(w, "/dev/full", err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "/dev/full: cannot write: it is a character device"), "%s", err);
    cr_assert_eq(stat("/dev/full", &sb), 0);
    cr_assert(S_ISCHR(sb.st_mode), "/dev/full is no longer a device");
    ag_safetensors_writer_free(w);
    free(fifo);
    rm_dir(dir);
}

/* As root a device node can be made in a scratch directory: a save there
 * must not replace it (with the old rename it did). */
Test(safetensors, save_refuses_a_device_node)
{
    if (geteuid() != 0) {
        cr_log_warn("not root: a device node cannot be made, the case is skipped");
        return;
    }
    char *dir = make_tmpdir("st"), *dev = join(dir, "full");
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        cr_log_warn("mknod: %s: the case is skipped", strerror(errno));
        free(dev);
        rm_dir(dir);
        return;
    }
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, dev, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "character device"), "%s", err);
    struct stat sb;
    cr_assert_eq(lstat(dev, &sb), 0);
    cr_assert(S_ISCHR(sb.st_mode), "the device node was replaced by a regular file");
    cr_assert_eq(count_entries(dir, NULL, 0), 1);
    ag_safetensors_writer_free(w);
    free(dev);
    rm_dir(dir);
}

/* A symbolic link at the path is replaced by the new file; the file it
 * pointed to is not touched (a save writes only in the directory named). */
Test(safetensors, save_replaces_a_symlink_and_not_its_target)
{
    char *dir = make_tmpdir("st"), *real = join(dir, "real"), *link = join(dir, "link"),
         *dangling = join(dir, "dangling");
    write_bytes(real, "precious", 8);
    cr_assert_eq(symlink("real", link), 0);
    cr_assert_eq(symlink("nowhere", dangling), 0);
    ag_safetensors_writer *w = writer_of(4, 7);
    char err[512];
    cr_assert_eq(ag_safetensors_save(w, link, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_safetensors_save(w, dangling, err, sizeof err), AG_OK, "%s", err);
    struct stat sb;
    for (int i = 0; i < 2; i++) {
        const char *p = i ? dangling : link;
        cr_assert_eq(lstat(p, &sb), 0);
        cr_assert(S_ISREG(sb.st_mode), "%s is still a link", p);
        ag_safetensors *f;
        cr_assert_eq(ag_safetensors_load(p, &f, err, sizeof err), AG_OK, "%s", err);
        ag_real v[4];
        cr_assert_eq(ag_safetensors_read(f, "x", v, 4, err, sizeof err), AG_OK, "%s", err);
        cr_assert_eq(v[3], (ag_real)10);
        ag_safetensors_free(f);
    }
    cr_assert(file_equals(real, "precious", 8), "the link's target changed");
    cr_assert_eq(count_entries(dir, NULL, 0), 3, "real, link, dangling and no temporary");
    ag_safetensors_writer_free(w);
    free(real);
    free(link);
    free(dangling);
    rm_dir(dir);
}

/* Another writer with our pid (another container, another NFS host) has
 * its temporary "<path>.tmp.<pid>" beside the target: a save must neither
 * delete nor reuse it. */
Test(safetensors, save_leaves_another_writers_temporary_alone)
{
    char *dir = make_tmpdir("st"), *path = join(dir, "model.safetensors");
    char theirs[512];
    snprintf(theirs, sizeof theirs, "%s.tmp.%ld", path, (long)getpid());
    write_bytes(theirs, "their half-written model", 24);
    ag_safetensors_writer *w = writer_of(4, 0);
    char err[512], tmp[256];
    cr_assert_eq(ag_safetensors_save(w, path, err, sizeof err), AG_OK, "%s", err);
    cr_assert(file_equals(theirs, "their half-written model", 24), "the other writer's file was touched");
    cr_assert_eq(count_entries(dir, tmp, sizeof tmp), 2, "ours renamed away, theirs kept");
    cr_assert_str_eq(tmp, strrchr(theirs, '/') + 1);
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    ag_safetensors_free(f);
    ag_safetensors_writer_free(w);
    free(path);
    rm_dir(dir);
}

/* A FIFO with no writer as a checkpoint: an empty stream, refused at once
 * as an empty file is, never a hang (the timeout fails the test if the open
 * blocks). */
Test(safetensors, load_of_a_fifo_without_writer_fails_without_blocking, .timeout = 10)
{
    char *dir = make_tmpdir("st"), *fifo = join(dir, "pipe");
    cr_assert_eq(mkfifo(fifo, 0644), 0, "mkfifo: %s", strerror(errno));
    ag_safetensors *f = (ag_safetensors *)1;
    char err[512];
    cr_assert_eq(ag_safetensors_load(fifo, &f, err, sizeof err), AG_ERR_FORMAT, "%s", err);
    cr_assert_null(f);
    cr_assert_not_null(strstr(err, fifo), "%s", err);
    free(fifo);
    rm_dir(dir);
}

/* ---- memory bounded by what the file holds ------------------------------------------ */

static size_t largest_request;
static void *note_alloc(size_t n, void *user)
{
    (void)user;
    if (n > largest_request) largest_request = n;
    return malloc(n);
}
static void note_release(void *p, void *user)
{
    (void)user;
    free(p);
}

/* A sparse file of `size` bytes that starts with the 8-byte length n and
 * then header (may be NULL). */
static void sparse_file(const char *path, uint64_t n, const char *header, off_t size)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(len, 1, 8, fp), 8u);
    if (header) cr_assert_eq(fwrite(header, 1, strlen(header), fp), strlen(header));
    cr_assert_eq(fclose(fp), 0);
    cr_assert_eq(truncate(path, size), 0, "truncate: %s", strerror(errno));
}

/* 64 MiB files whose header does not justify their size are rejected after
 * reading at most their header: no allocation near the file's size. */
Test(safetensors, load_checks_the_header_before_reading_the_data)
{
    const off_t big = (off_t)64 << 20;
    char *dir = make_tmpdir("st"), *path = join(dir, "sparse.safetensors");
    char err[512];
    ag_safetensors *f;
    ag_set_allocator(&(ag_allocator){note_alloc, note_release, NULL});

    /* a header length past the end of the file */
    sparse_file(path, (uint64_t)big, NULL, big);
    largest_request = 0;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_not_null(strstr(err, "runs past the end of the file"), "%s", err);
    cr_assert_lt(largest_request, (size_t)4096, "allocated %zu bytes for a header it refused", largest_request);

    /* a small honest header, then 64 MiB of zeros no tensor claims */
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    sparse_file(path, strlen(hdr), hdr, big);
    largest_request = 0;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_not_null(strstr(err, "trailing bytes after the last tensor"), "%s", err);
    cr_assert_lt(largest_request, (size_t)65536, "allocated %zu bytes for a file it refused", largest_request);
    ag_set_allocator(NULL);
    free(path);
    rm_dir(dir);
}

/* ---- weights that are not finite ---------------------------------------------------- */

/* A checkpoint whose tensor "layer.w" [2, 2] of dtype holds bad at element 2,
 * beside a good "a" [2]. */
static unsigned char *bad_weights(int f64, double bad, size_t *len)
{
    char hdr[256];
    int ws = f64 ? 8 : 4;
    snprintf(hdr, sizeof hdr,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"layer.w\":{\"dtype\":\"%s\",\"shape\":[2,2],\"data_offsets\":[8,%d]}}",
             f64 ? "F64" : "F32", 8 + 4 * ws);
    unsigned char data[40];
    const float one = 1;
    memcpy(data, &one, 4);
    memcpy(data + 4, &one, 4);
    for (int i = 0; i < 4; i++) {
        double v = i == 2 ? bad : 2;
        float fv = (float)v;
        memcpy(data + 8 + i * ws, f64 ? (const void *)&v : (const void *)&fv, (size_t)ws);
    }
    return file_of(hdr, data, (size_t)(8 + 4 * ws), len); /* little-endian hosts */
}

/* A checkpoint with a NaN, an inf, or (in float) an F64 value past float's
 * range is refused by ag_store_load with the tensor's name, and the store
 * keeps its old values. */
Test(safetensors, store_load_refuses_non_finite_weights_naming_the_tensor)
{
    const struct {
        int f64;
        double bad;
        const char *says; /* NULL: accepted */
    } cases[] = {
        {0, NAN, "element 2 is nan"},
        {0, -INFINITY, "element 2 is -inf"},
        {1, INFINITY, "element 2 is inf"},
        {1, 1e300, sizeof(ag_real) == 4 ? "element 2 is 1e+300, beyond the range of float" : NULL},
        {1, 1e30, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        unsigned char *bytes = bad_weights(cases[c].f64, cases[c].bad, &len);
        char err[512];
        ag_safetensors *f;
        cr_assert_eq(ag_safetensors_parse(bytes, len, &f, err, sizeof err), AG_OK, "%s", err);
        ag_store *s = ag_store_new();
        ag_tensor *a = ag_param(s, "a", AG_SHAPE(2)), *w = ag_param(s, "layer.w", AG_SHAPE(2, 2));
        for (int i = 0; i < 4; i++) w->data[i] = 5;
        a->data[0] = 5;
        ag_status st = ag_store_load(s, f, err, sizeof err);
        if (cases[c].says) {
            cr_assert_eq(st, AG_ERR_NUMERIC, "case %zu: %s", c, err);
            cr_assert_not_null(strstr(err, "tensor 'layer.w'"), "%s", err);
            cr_assert_not_null(strstr(err, cases[c].says), "%s", err);
            cr_assert(a->data[0] == 5 && w->data[0] == 5, "case %zu: the store changed", c);
        } else {
            cr_assert_eq(st, AG_OK, "case %zu: %s", c, err);
            cr_assert_eq(w->data[2], (ag_real)cases[c].bad);
        }
        ag_safetensors_free(f);
        ag_store_free(s);
        free(bytes);
    }
}
