/* attograd_io.h: safetensors checkpoints (read, validate, write atomically)
 * and the library's file reader and crash-safe writer.  Errors of a load or
 * save go to the caller's err (errlen bytes, always NUL-terminated, may be
 * NULL); a writer keeps its add's (ag_safetensors_writer_error). */
#ifndef ATTOGRAD_IO_H
#define ATTOGRAD_IO_H

#include "attograd_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading ------------------------------------------------------------ */

/* A parsed, validated safetensors file, held in memory. */
typedef struct ag_safetensors ag_safetensors;

/* Read and validate the regular file path (or len bytes of buf, copied) into
 * *out, freed with ag_safetensors_free.  AG_ERR_IO, AG_ERR_FORMAT or
 * AG_ERR_NOMEM, *out NULL and err naming the file and the fault.  What is
 * accepted: docs/design.md. */
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

/* Tensor `name` (F32 or F64) into dst (n values) as ag_real; AG_ERR_FORMAT
 * for a missing tensor or other dtype, AG_ERR_SHAPE for another count. */
ag_status ag_safetensors_read(const ag_safetensors *f, const char *name, ag_real *dst, size_t n, char *err,
                              size_t errlen);
/* Same, into t, whose shape must equal the stored one exactly. */
ag_status ag_safetensors_read_tensor(const ag_safetensors *f, const char *name, ag_tensor *t, char *err,
                                     size_t errlen);
/* Tensor `name` (I64 or I32) into dst (n ints); a value beyond int is
 * AG_ERR_FORMAT. */
ag_status ag_safetensors_read_int(const ag_safetensors *f, const char *name, int *dst, size_t n, char *err,
                                  size_t errlen);

/* ---- writing ------------------------------------------------------------ */

typedef struct ag_safetensors_writer ag_safetensors_writer;
ag_safetensors_writer *ag_safetensors_writer_new(void); /* NULL when out of memory */
void ag_safetensors_writer_free(ag_safetensors_writer *w);
/* Adds copy their input; tensors are written in the order added.  AG_ERR_ARG
 * for a repeated, non-UTF-8 or "__metadata__" name, a bad shape or NULL data;
 * the writer is then unchanged but for its message.  dtype "F32", "F64" or
 * NULL (ag_real's width). */
ag_status ag_safetensors_add(ag_safetensors_writer *w, const char *name, const char *dtype, int ndim,
                             const int *shape, const ag_real *data);
/* Add a tensor of int data, stored as "I64". */
ag_status ag_safetensors_add_int(ag_safetensors_writer *w, const char *name, int ndim, const int *shape,
                                 const int *data);
/* A __metadata__ pair; a repeated key or non-UTF-8 text is AG_ERR_ARG. */
ag_status ag_safetensors_add_meta(ag_safetensors_writer *w, const char *key, const char *value);
/* Why the last failed add on w failed, or ""; owned by w. */
const char *ag_safetensors_writer_error(const ag_safetensors_writer *w);
/* Write path crash-safely, as ag_file_write: all of it or the old file.
 * AG_ERR_IO with path and strerror in err. */
ag_status ag_safetensors_save(const ag_safetensors_writer *w, const char *path, char *err, size_t errlen);

/* ---- a store as a checkpoint --------------------------------------------- */

/* Every parameter of s under its name as F32 (F64 in double), and n_meta
 * key/value pairs (meta_kv: 2 n_meta strings) as __metadata__. */
ag_status ag_store_save(const ag_store *s, const char *path, const char *const *meta_kv,
                        int n_meta, char *err, size_t errlen);
/* Every parameter of s from f's tensor of that name (F32 or F64), or none:
 * a missing tensor or other shape is an error naming it, a non-finite value
 * AG_ERR_NUMERIC.  Tensors s lacks are ignored. */
ag_status ag_store_load(ag_store *s, const ag_safetensors *f, char *err, size_t errlen);

/* ---- files: the library's reader and crash-safe writer ------------------ */

/* All of the file at path in *out (len bytes, then a NUL), freed with
 * ag_file_free; a pipe or FIFO ("/dev/stdin", bash's <(...)) is read to its
 * end as a stream.  AG_ERR_IO or AG_ERR_NOMEM, err naming path. */
ag_status ag_file_read(const char *path, char **out, size_t *len, char *err, size_t errlen);
void ag_file_free(char *p);
/* Replace path with len bytes of data, or leave it as it was (a temporary
 * file, synced and renamed over it; docs/errors.md).  AG_ERR_IO as above. */
ag_status ag_file_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* The most bytes any input may hold (a file, a pipe, a checkpoint);
 * larger is AG_ERR_IO.  4 GiB, or the environment's AG_INPUT_LIMIT (bytes)
 * at first use; ag_set_input_limit(0) goes back to that. */
void ag_set_input_limit(size_t bytes);
size_t ag_get_input_limit(void);

#ifdef __cplusplus
}
#endif
#endif
