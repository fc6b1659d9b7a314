/* safetensors_write.c: the safetensors writer (tensors and metadata,
 * copied when added), the JSON header it emits, saving it crash-safely
 * (io/file.h), and a store saved as a checkpoint.
 *
 * Invariant: a writer holds only what validated: each add either succeeds
 * whole or leaves the writer as it was, so whatever is saved is a file
 * that ag_safetensors_load accepts. */
#include "io/safetensors.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "io/file.h"
#include "io/json.h"

typedef struct w_tensor {
    char *name;
    const char *dtype;
    int ndim;
    int shape[AG_MAX_DIMS];
    size_t nbytes;
    unsigned char *bytes; /* little-endian, owned */
} w_tensor;

struct ag_safetensors_writer {
    w_tensor *t;
    int count, cap;
    char **meta; /* key0, value0, key1, ... (owned) */
    int nmeta, mcap; /* pairs */
    char err[256];   /* why the last failed add failed, "" if none has */
};

const char *ag_safetensors_writer_error(const ag_safetensors_writer *w)
{
    return w ? w->err : "safetensors writer is NULL";
}

/* The reason of a failed add, kept on w (when there is one); returns st. */
static ag_status fail(ag_safetensors_writer *w, ag_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static ag_status fail(ag_safetensors_writer *w, ag_status st, const char *fmt, ...)
{
    if (!w) return st;
    va_list ap;
    va_start(ap, fmt);
    ag__verrf(w->err, sizeof w->err, st, fmt, ap);
    va_end(ap);
    return st;
}

ag_safetensors_writer *ag_safetensors_writer_new(void) { return ag__calloc(1, sizeof(ag_safetensors_writer)); }

void ag_safetensors_writer_free(ag_safetensors_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->count; i++) {
        ag__free(w->t[i].name);
        ag__free(w->t[i].bytes);
    }
    for (int i = 0; i < 2 * w->nmeta; i++) ag__free(w->meta[i]);
    ag__free(w->t);
    ag__free(w->meta);
    ag__free(w);
}

/* arr with room for count + 1 elements of elem bytes (arr itself, or a larger
 * copy, with *cap updated); NULL when out of memory (arr untouched). */
static void *reserve(void *arr, int *cap, int count, size_t elem)
{
    if (count < *cap) return arr;
    if (*cap > INT_MAX / 4) return NULL;
    int ncap = *cap ? 2 * *cap : 8;
    void *n = ag__calloc((size_t)ncap, elem);
    if (!n) return NULL;
    if (count) memcpy(n, arr, (size_t)count * elem);
    ag__free(arr);
    *cap = ncap;
    return n;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ag__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int valid_utf8(const char *s)
{
    size_t n = strlen(s);
    return ag__utf8_check((const unsigned char *)s, n) == n;
}

/* The name and shape of a new tensor of dsize-byte elements, checked:
 * *numel gets its element count. */
static ag_status check_new_tensor(ag_safetensors_writer *w, const char *name, int dsize, int ndim,
                                  const int *shape, const void *data, size_t *numel)
{
    ag__shown sh;
    if (!w) return AG_ERR_ARG;
    if (!name) return fail(w, AG_ERR_ARG, "add: the name is NULL");
    if (!valid_utf8(name)) return fail(w, AG_ERR_ARG, "tensor '%s': the name is not UTF-8", ag__st_show(name, &sh));
    if (strcmp(name, "__metadata__") == 0) return fail(w, AG_ERR_ARG, "tensor '__metadata__': the name is reserved");
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim && !shape))
        return fail(w, AG_ERR_ARG, "tensor '%s': %d axes%s (at most %d)", ag__st_show(name, &sh), ndim,
                    ndim > 0 && !shape ? " and a NULL shape" : "", AG_MAX_DIMS);
    *numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && *numel > SIZE_MAX / (size_t)dsize / (size_t)shape[i]))
            return fail(w, AG_ERR_ARG, "tensor '%s': axis %d of size %d is %s", ag__st_show(name, &sh), i, shape[i],
                        shape[i] < 0 ? "negative" : "too large");
        *numel *= (size_t)shape[i];
    }
    if (*numel && !data) return fail(w, AG_ERR_ARG, "tensor '%s': the data is NULL", ag__st_show(name, &sh));
    for (int i = 0; i < w->count; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return fail(w, AG_ERR_ARG, "tensor '%s': the name is given twice", ag__st_show(name, &sh));
    return AG_OK;
}

/* A new entry for a tensor of dsize-byte elements; its bytes to be filled. */
static ag_status add_entry(ag_safetensors_writer *w, const char *name, const char *dtype, int dsize, int ndim,
                           const int *shape, const void *data, w_tensor **out)
{
    size_t numel = 0;
    ag_status st = check_new_tensor(w, name, dsize, ndim, shape, data, &numel);
    if (st) return st;
    ag__shown sh;
    w_tensor *arr = reserve(w->t, &w->cap, w->count, sizeof *w->t);
    if (!arr) return fail(w, AG_ERR_NOMEM, "tensor '%s': out of memory", ag__st_show(name, &sh));
    w->t = arr;
    w_tensor e = {0};
    e.name = dup_str(name);
    e.nbytes = numel * (size_t)dsize;
    e.bytes = ag__malloc(e.nbytes);
    if (!e.name || !e.bytes) {
        ag__free(e.name);
        ag__free(e.bytes);
        return fail(w, AG_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", ag__st_show(name, &sh), e.nbytes);
    }
    e.dtype = dtype;
    e.ndim = ndim;
    for (int i = 0; i < ndim; i++) e.shape[i] = shape[i];
    w->t[w->count] = e;
    *out = &w->t[w->count++];
    return AG_OK;
}

ag_status ag_safetensors_add(ag_safetensors_writer *w, const char *name, const char *dtype, int ndim, const int *shape,
                    const ag_real *data)
{
    if (!dtype) dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    int f64 = strcmp(dtype, "F64") == 0;
    if (!f64 && strcmp(dtype, "F32") != 0) {
        ag__shown sh;
        return fail(w, AG_ERR_ARG, "tensor '%s': dtype %s, F32 or F64 expected", name ? ag__st_show(name, &sh) : "(null)",
                    dtype);
    }
    w_tensor *e;
    ag_status st = add_entry(w, name, f64 ? "F64" : "F32", f64 ? 8 : 4, ndim, shape, data, &e);
    if (st) return st;
    size_t n = e->nbytes / (f64 ? 8 : 4);
    for (size_t i = 0; i < n; i++) {
        if (f64) {
            double x = (double)data[i];
            uint64_t b;
            memcpy(&b, &x, 8);
            ag__put_u64(e->bytes + 8 * i, b);
        } else {
            float x = (float)data[i];
            uint32_t b;
            memcpy(&b, &x, 4);
            ag__put_u32(e->bytes + 4 * i, b);
        }
    }
    return AG_OK;
}

ag_status ag_safetensors_add_int(ag_safetensors_writer *w, const char *name, int ndim, const int *shape, const int *data)
{
    w_tensor *e;
    ag_status st = add_entry(w, name, "I64", 8, ndim, shape, data, &e);
    if (st) return st;
    for (size_t i = 0; i < e->nbytes / 8; i++) ag__put_u64(e->bytes + 8 * i, (uint64_t)(int64_t)data[i]);
    return AG_OK;
}

ag_status ag_safetensors_add_meta(ag_safetensors_writer *w, const char *key, const char *value)
{
    ag__shown sh;
    if (!w) return AG_ERR_ARG;
    if (!key || !value) return fail(w, AG_ERR_ARG, "metadata: the %s is NULL", key ? "value" : "key");
    if (!valid_utf8(key)) return fail(w, AG_ERR_ARG, "key '%s' is not UTF-8", ag__st_show(key, &sh));
    if (!valid_utf8(value)) return fail(w, AG_ERR_ARG, "key '%s': the value is not UTF-8", ag__st_show(key, &sh));
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta[2 * i], key) == 0)
            return fail(w, AG_ERR_ARG, "key '%s' is given twice", ag__st_show(key, &sh));
    /* mcap counts pairs; the array holds 2 * mcap strings */
    if (w->nmeta == w->mcap) {
        int cap = w->mcap;
        char **n = reserve(w->meta, &cap, w->nmeta, 2 * sizeof *w->meta);
        if (!n) return fail(w, AG_ERR_NOMEM, "key '%s': out of memory", ag__st_show(key, &sh));
        w->meta = n;
        w->mcap = cap;
    }
    char *k = dup_str(key), *v = dup_str(value);
    if (!k || !v) {
        ag__free(k);
        ag__free(v);
        return fail(w, AG_ERR_NOMEM, "key '%s': out of memory", ag__st_show(key, &sh));
    }
    w->meta[2 * w->nmeta] = k;
    w->meta[2 * w->nmeta + 1] = v;
    w->nmeta++;
    return AG_OK;
}

/* ---- the header ---------------------------------------------------------------- */

/* Appends to buf, or only counts when buf is NULL (a first pass sizes it). */
typedef struct sink {
    char *buf;
    size_t len;
} sink;

static void put(sink *s, const char *p, size_t n)
{
    if (s->buf) memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void put_str(sink *s, const char *p) { put(s, p, strlen(p)); }

/* A JSON string literal: quote, backslash and control characters escaped;
 * other bytes (valid UTF-8, checked when added) as they are. */
static void put_json_string(sink *s, const char *str)
{
    put(s, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': put(s, "\\\"", 2); break;
        case '\\': put(s, "\\\\", 2); break;
        case '\n': put(s, "\\n", 2); break;
        case '\r': put(s, "\\r", 2); break;
        case '\t': put(s, "\\t", 2); break;
        case '\b': put(s, "\\b", 2); break;
        case '\f': put(s, "\\f", 2); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                put(s, esc, 6);
            } else {
                put(s, (const char *)p, 1);
            }
        }
    }
    put(s, "\"", 1);
}

/* {"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}
 * with tensors in insertion order, their data laid out in the same order. */
static void put_header(const ag_safetensors_writer *w, sink *s)
{
    char num[64];
    put(s, "{", 1);
    int first = 1;
    if (w->nmeta) {
        put_str(s, "\"__metadata__\":{");
        for (int i = 0; i < w->nmeta; i++) {
            if (i) put(s, ",", 1);
            put_json_string(s, w->meta[2 * i]);
            put(s, ":", 1);
            put_json_string(s, w->meta[2 * i + 1]);
        }
        put(s, "}", 1);
        first = 0;
    }
    uint64_t offset = 0;
    for (int i = 0; i < w->count; i++) {
        const w_tensor *t = &w->t[i];
        if (!first) put(s, ",", 1);
        first = 0;
        put_json_string(s, t->name);
        put_str(s, ":{\"dtype\":\"");
        put_str(s, t->dtype);
        put_str(s, "\",\"shape\":[");
        for (int k = 0; k < t->ndim; k++) {
            snprintf(num, sizeof num, "%s%d", k ? "," : "", t->shape[k]);
            put_str(s, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset,
                 offset + (uint64_t)t->nbytes);
        put_str(s, num);
        offset += t->nbytes;
    }
    put(s, "}", 1);
}

/* ---- writing the file -------------------------------------------------------- */

ag_status ag_safetensors_save(const ag_safetensors_writer *w, const char *path, char *err, size_t errlen)
{
    if (!w || !path || !*path) return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_save: writer or path is NULL or empty");

    /* 8-byte length, then the header padded with spaces to a multiple of 8
     * (as the reference writer does: the data then starts 8-aligned) */
    sink s = {NULL, 0};
    put_header(w, &s);
    size_t hlen = s.len, padded = (hlen + 7) / 8 * 8;
    if (padded > ST_MAX_HEADER)
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: header of %zu bytes exceeds the limit of %u bytes", path,
                        padded, ST_MAX_HEADER);
    unsigned char *head = ag__malloc(8 + padded);
    ag__bytes *pieces = ag__calloc((size_t)w->count + 1, sizeof *pieces);
    ag_status st = AG_OK;
    if (!head || !pieces) {
        st = ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory preparing the header", path);
        goto out;
    }
    ag__put_u64(head, (uint64_t)padded);
    s = (sink){(char *)head + 8, 0};
    put_header(w, &s);
    memset(head + 8 + hlen, ' ', padded - hlen);
    /* the file: the header, then each tensor's bytes in the order added */
    pieces[0] = (ag__bytes){head, 8 + padded};
    for (int i = 0; i < w->count; i++) pieces[i + 1] = (ag__bytes){w->t[i].bytes, w->t[i].nbytes};
    st = ag__file_save(NULL, path, pieces, w->count + 1, err, errlen);
out:
    ag__free(head);
    ag__free(pieces);
    return st;
}

/* ---- a store as a checkpoint ------------------------------------------------------ */

ag_status ag_store_save(const ag_store *s, const char *path, const char *const *meta_kv, int n_meta,
                        char *err, size_t errlen)
{
    if (!s || !path) return ag__errf(err, errlen, AG_ERR_ARG, "ag_store_save: store or path is NULL");
    if (n_meta < 0 || (n_meta > 0 && !meta_kv))
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %d metadata pairs given with %s", path, n_meta,
                        meta_kv ? "a key/value array" : "no key/value array");
    ag_safetensors_writer *w = ag_safetensors_writer_new();
    if (!w) return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory", path);
    const char *dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    ag_status st = AG_OK;
    for (int i = 0; !st && i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        st = ag_safetensors_add(w, t->name, dtype, t->ndim, t->shape, t->data);
    }
    int pair = 0;
    for (; !st && pair < n_meta; pair++) st = ag_safetensors_add_meta(w, meta_kv[2 * pair], meta_kv[2 * pair + 1]);
    if (st && pair) ag__errf(err, errlen, st, "%s: metadata pair %d: %s", path, pair - 1, w->err);
    else if (st) ag__errf(err, errlen, st, "%s: %s", path, w->err);
    else st = ag_safetensors_save(w, path, err, errlen);
    ag_safetensors_writer_free(w);
    return st;
}
