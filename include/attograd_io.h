/* attograd_io.h: safetensors checkpoints (read, validate, write atomically).
 * Included by attograd.h.
 *
 *   ag_safetensors *f;
 *   char err[256];
 *   if (ag_safetensors_load("model.safetensors", &f, err, sizeof err) != AG_OK ||
 *       ag_store_load(store, f, err, sizeof err) != AG_OK)
 *       fprintf(stderr, "%s\n", err);   // "model.safetensors: tensor 'w': ..."
 *   ag_safetensors_free(f);
 *
 * Errors (docs/errors.md): opening, parsing and saving act on a file, so
 * their reason goes to the caller's err buffer (err may be NULL; always
 * NUL-terminated); a writer is an object, so an add's reason sticks to it
 * (ag_safetensors_writer_error).  The names before 0.2, ag_st_* (ag_st,
 * ag_st_load, ag_st_writer, ...), still work: see the end of this file. */
#ifndef ATTOGRAD_IO_H
#define ATTOGRAD_IO_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading ------------------------------------------------------------ */

/* A parsed, validated safetensors file, held in memory.  The format: 8 bytes
 * little-endian header length N, N bytes of JSON header
 *   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the byte buffer that data_offsets index (relative to its start). */
typedef struct ag_safetensors ag_safetensors;

/* Read and validate path (or a buffer of len bytes).  path must be a
 * regular file: a FIFO, device or directory is refused without blocking.
 * The 8-byte header length is checked against the file's size, and the
 * header against the data's size, before the data is read: memory is
 * bounded by what the header declares.  On failure returns a
 * status (AG_ERR_IO, AG_ERR_FORMAT, AG_ERR_NOMEM), sets *out to NULL and
 * writes a message naming the file and what is wrong into err, e.g.
 *   "model.safetensors: tensor 'w': data_offsets [0, 12] hold 12 bytes, but
 *    shape [2, 2] of F32 needs 16".
 * Accepted: a header of at most 100,000,000 bytes of UTF-8 JSON (whitespace
 * around it allowed), an object whose members are __metadata__ (an object of
 * string -> string) and tensors {"dtype", "shape", "data_offsets"} and
 * nothing else; dtypes BOOL U8 I8 I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64;
 * shapes of at most 64 integers in [0, 2^53]; byte ranges that, sorted,
 * tile the data buffer exactly (no gap, overlap or trailing byte); no name
 * twice.  ag_safetensors_parse copies what it keeps: buf may be freed
 * afterwards. */
ag_status ag_safetensors_load(const char *path, ag_safetensors **out, char *err, size_t errlen);
ag_status ag_safetensors_parse(const void *buf, size_t len, ag_safetensors **out, char *err, size_t errlen);
void ag_safetensors_free(ag_safetensors *f);

int ag_safetensors_count(const ag_safetensors *f);                  /* tensors, __metadata__ aside */
const char *ag_safetensors_name(const ag_safetensors *f, int i);    /* in header order */
int ag_safetensors_find(const ag_safetensors *f, const char *name); /* index, or -1 */
const char *ag_safetensors_dtype(const ag_safetensors *f, int i);   /* "F32", "F64", "I64", ... */
int ag_safetensors_ndim(const ag_safetensors *f, int i);
const int64_t *ag_safetensors_shape(const ag_safetensors *f, int i);
size_t ag_safetensors_numel(const ag_safetensors *f, int i);
const void *ag_safetensors_bytes(const ag_safetensors *f, int i);   /* raw little-endian data */
/* Value of key in __metadata__, or NULL. */
const char *ag_safetensors_meta(const ag_safetensors *f, const char *key);
int ag_safetensors_meta_count(const ag_safetensors *f);
const char *ag_safetensors_meta_key(const ag_safetensors *f, int i);

/* Copy tensor `name` (F32 or F64) into dst as ag_real; n must equal its
 * element count.  Messages name the tensor and the mismatch: AG_ERR_FORMAT
 * for a missing tensor or another dtype, AG_ERR_SHAPE for a count or shape
 * that differs ("tensor 'w': shape [3, 2] in file, [2, 3] expected"). */
ag_status ag_safetensors_read(const ag_safetensors *f, const char *name, ag_real *dst, size_t n, char *err,
                              size_t errlen);
/* Same, into t, whose shape must equal the stored one exactly. */
ag_status ag_safetensors_read_tensor(const ag_safetensors *f, const char *name, ag_tensor *t, char *err,
                                     size_t errlen);
/* Tensor `name` of dtype I64 or I32 into dst (n ints); a value outside the
 * range of int is an AG_ERR_FORMAT error. */
ag_status ag_safetensors_read_int(const ag_safetensors *f, const char *name, int *dst, size_t n, char *err,
                                  size_t errlen);

/* ---- writing ------------------------------------------------------------ */

typedef struct ag_safetensors_writer ag_safetensors_writer;
ag_safetensors_writer *ag_safetensors_writer_new(void); /* NULL when out of memory */
void ag_safetensors_writer_free(ag_safetensors_writer *w);
/* The writer copies what it is given.  Each add returns AG_ERR_ARG for a
 * name given twice, a name that is not UTF-8 or is "__metadata__", a shape of
 * more than AG_MAX_DIMS axes or a negative size, NULL data for a non-empty
 * tensor; AG_ERR_NOMEM when out of memory.  On error the writer is unchanged
 * but for its message (ag_safetensors_writer_error).  Tensors are written
 * in the order added.
 *
 * Add a tensor from ag_real data, stored as dtype "F32" or "F64" (NULL:
 * ag_real's own width). */
ag_status ag_safetensors_add(ag_safetensors_writer *w, const char *name, const char *dtype, int ndim,
                             const int *shape, const ag_real *data);
/* Add a tensor of int data, stored as "I64". */
ag_status ag_safetensors_add_int(ag_safetensors_writer *w, const char *name, int ndim, const int *shape,
                                 const int *data);
/* A __metadata__ pair; a key given twice, or a key or value that is not
 * UTF-8, is AG_ERR_ARG. */
ag_status ag_safetensors_add_meta(ag_safetensors_writer *w, const char *key, const char *value);
/* Why the last failed add on w failed ("tensor 'w': name given twice"),
 * "" if none has.  Owned by w. */
const char *ag_safetensors_writer_error(const ag_safetensors_writer *w);
/* Write the file crash-safely: path must be missing, a regular file or a
 * symbolic link (a device, FIFO or directory is refused and left alone; a
 * link is replaced by the new file, its target is not touched).  A new
 * temporary file "<path>.tmp.<pid>.<16 hex digits>" is created beside it
 * with O_EXCL, written fully (short writes and EINTR handled), fsync'd,
 * closed (checked), renamed over path, and the directory fsync'd.  On any
 * failure path is left as it was and the temporary file is removed (only
 * ever one this call created); messages name path and give strerror.  (Only
 * a failure to sync the directory comes after the rename: it is reported as
 * AG_ERR_IO, path then holds the new file.)  Temporaries of killed runs are
 * never removed by a later save: docs/errors.md says how to clean them.
 * The header is padded with spaces to a multiple of 8 bytes, as the
 * reference writer does. */
ag_status ag_safetensors_save(const ag_safetensors_writer *w, const char *path, char *err, size_t errlen);

/* ---- a store as a checkpoint --------------------------------------------- */

/* Every parameter of s under its name, as F32 (F64 when ag_real is double),
 * plus the n_meta key/value pairs in __metadata__. */
ag_status ag_store_save(const ag_store *s, const char *path, const char *const *meta_kv,
                        int n_meta, char *err, size_t errlen);
/* Fill every parameter of s from the tensor of the same name in f; a
 * missing tensor, a shape or dtype that differs is an error naming it, and
 * then no parameter is changed.  F32 and F64 are both accepted (converted
 * to ag_real); tensors of f that s does not have are ignored.  A value that
 * is NaN or infinite as ag_real is AG_ERR_NUMERIC ("tensor 'w': element 3
 * is nan (weights must be finite)"): a model's weights must be finite.
 * (ag_safetensors_read and friends return stored values as they are.) */
ag_status ag_store_load(ag_store *s, const ag_safetensors *f, char *err, size_t errlen);

/* ---- deprecated names ------------------------------------------------------
 *
 * The names before 0.2 (CHANGELOG.md), kept so that code written against
 * them compiles unchanged.  Define AG_NO_DEPRECATED to hide them. */
/* ---- files: the library's reader and crash-safe writer ----------------------
 *
 * What checkpoints and pictures use, for a program's own files (data, JSON
 * reports).  Reading takes only a regular file: a FIFO, a device or a
 * directory is refused at once (never a blocking open), and the size is
 * known before anything is allocated.  Writing replaces path with the
 * whole new content or leaves the old one, whatever happens: a temporary
 * "<path>.tmp.<pid>.<random>" made with O_EXCL beside it, written,
 * synced, renamed over path, the directory synced; a device or FIFO at
 * path is refused, a symbolic link is replaced (its target untouched), and
 * no file this call did not create is ever removed (docs/errors.md). */

/* All of the file at path in *out (len bytes, then a NUL: text is a
 * string); free it with ag_file_free.  A pipe or FIFO at path ("/dev/stdin",
 * bash's <(...)) is read to its end as a stream.  AG_ERR_IO or
 * AG_ERR_NOMEM, with the reason naming path in err. */
ag_status ag_file_read(const char *path, char **out, size_t *len, char *err, size_t errlen);
void ag_file_free(char *p);
/* Replace path with len bytes of data, crash-safely as above. */
ag_status ag_file_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* The most bytes any input may hold (a file, a pipe, a checkpoint): a
 * larger one is refused with AG_ERR_IO, a stream as soon as it passes it.
 * 4 GiB, or the environment's AG_INPUT_LIMIT (bytes) when the library
 * first asks; ag_set_input_limit(0) goes back to that. */
void ag_set_input_limit(size_t bytes);
size_t ag_get_input_limit(void);

#ifndef AG_NO_DEPRECATED
typedef ag_safetensors ag_st;
typedef ag_safetensors_writer ag_st_writer;
#define ag_st_load ag_safetensors_load
#define ag_st_parse ag_safetensors_parse
#define ag_st_free ag_safetensors_free
#define ag_st_count ag_safetensors_count
#define ag_st_name ag_safetensors_name
#define ag_st_find ag_safetensors_find
#define ag_st_dtype ag_safetensors_dtype
#define ag_st_ndim ag_safetensors_ndim
#define ag_st_shape ag_safetensors_shape
#define ag_st_numel ag_safetensors_numel
#define ag_st_bytes ag_safetensors_bytes
#define ag_st_meta ag_safetensors_meta
#define ag_st_meta_count ag_safetensors_meta_count
#define ag_st_meta_key ag_safetensors_meta_key
#define ag_st_read ag_safetensors_read
#define ag_st_read_tensor ag_safetensors_read_tensor
#define ag_st_read_int ag_safetensors_read_int
#define ag_st_writer_new ag_safetensors_writer_new
#define ag_st_writer_free ag_safetensors_writer_free
#define ag_st_add ag_safetensors_add
#define ag_st_add_int ag_safetensors_add_int
#define ag_st_add_meta ag_safetensors_add_meta
#define ag_st_save ag_safetensors_save
#endif

#ifdef __cplusplus
}
#endif
#endif
