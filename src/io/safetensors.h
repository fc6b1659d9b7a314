/* safetensors.h: what the three parts of the safetensors code share,
 * private to src/io/: the format's limits, a parsed file (struct ag_safetensors),
 * little-endian bytes, and names made fit for a message.
 *
 * The format (huggingface/safetensors):
 *
 *   [8 bytes]  N, the header length, a little-endian u64
 *   [N bytes]  a JSON object, UTF-8, often padded with trailing spaces:
 *              {"__metadata__": {"k": "v", ...},
 *               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
 *   [rest]     the data buffer; tensor `name` is bytes [b, e) of it, row-major,
 *              little-endian.
 *
 * The parts:
 *   safetensors_validate.c  the header, checked against the data's size
 *   safetensors_read.c      loading a file or buffer, queries, values, a store
 *   safetensors_write.c     the writer, the header it emits, saving, a store
 * Values are decoded from little-endian bytes with memcpy, never through a
 * cast pointer (the data buffer need not be aligned). */
#ifndef AG_IO_SAFETENSORS_H
#define AG_IO_SAFETENSORS_H

#include "attograd_io.h"
#include "core/alloc.h"

#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE float and double expected");

#define ST_MAX_HEADER 100000000u       /* the reference's MAX_HEADER_SIZE */
#define ST_MAX_RANK 64                 /* axes a file may give a tensor */
#define ST_MAX_DIM (UINT64_C(1) << 53) /* larger sizes are surely corrupt */

/* One tensor of a parsed file. */
typedef struct ag__st_tensor {
    const char *name;    /* in the header's string pool */
    const char *dtype;   /* "F32", ... (static strings) */
    int dsize;           /* bytes per element */
    int ndim;
    int64_t *shape;      /* into ag_safetensors.shapes */
    size_t numel;
    uint64_t begin, end; /* byte range in the data buffer */
} ag__st_tensor;

struct ag_safetensors {
    unsigned char *owned;      /* the bytes the data buffer lives in */
    const unsigned char *data; /* the data buffer */
    size_t data_len;
    char *pool;                /* every string of the header */
    ag__st_tensor *t;          /* in header order */
    int count;
    uint32_t *by_name;         /* tensor indices sorted by name */
    int64_t *shapes;
    const char **meta;         /* key0, value0, key1, ... */
    int nmeta;
};

/* The 8-byte header length *n of a file of len bytes that starts with
 * first8: at most ST_MAX_HEADER, and no more than the bytes after it.
 * AG_ERR_FORMAT with "WHAT: ..." in err otherwise. */
ag_status ag__st_header_length(const char *what, uint64_t len, const unsigned char first8[8], uint64_t *n,
                               char *err, size_t errlen);
/* Check the header hdr[0..n) of a file whose data buffer has data_len
 * bytes, and fill f with it (everything but f->data and f->owned); every
 * rejection names WHAT (the path), the tensor and the offending values.
 * On failure f may hold blocks that ag_safetensors_free releases. */
ag_status ag__st_validate(const char *what, const unsigned char *hdr, size_t n, size_t data_len, ag_safetensors *f,
                          char *err, size_t errlen);

/* ---- little-endian bytes ------------------------------------------------ */

static inline uint32_t ag__get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ag__get_u64(const unsigned char *p)
{
    return (uint64_t)ag__get_u32(p) | (uint64_t)ag__get_u32(p + 4) << 32;
}
static inline void ag__put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void ag__put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline double ag__get_f64(const unsigned char *p)
{
    uint64_t b = ag__get_u64(p);
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}
static inline float ag__get_f32(const unsigned char *p)
{
    uint32_t b = ag__get_u32(p);
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* ---- messages ----------------------------------------------------------- */

/* A name from a file, fit for a message: at most ~48 bytes (cut on a UTF-8
 * character boundary, "..." appended) with control characters as '?'. */
typedef struct ag__shown {
    char s[64];
} ag__shown;
const char *ag__st_show(const char *name, ag__shown *out);
/* "[2, 3]" for an int64 shape; long shapes end in ", ...]". */
const char *ag__st_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);

#endif /* AG_IO_SAFETENSORS_H */
