/* safetensors.c: read, validate and write safetensors checkpoints.
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
 * The reader trusts nothing: a file is accepted only when every check of the
 * reference implementation passes (and a few more), and each rejection has
 * its own message naming the file, the tensor and the offending values.
 * In particular the tensors' byte ranges, sorted by start, must tile the
 * data buffer exactly: no gap, no overlap, no trailing byte.  Values are
 * decoded from little-endian bytes with memcpy, never through a cast
 * pointer (the data buffer need not be aligned).
 *
 * The writer copies what it is given, so the caller's buffers may change
 * after ag_st_add; ag_st_save writes a temporary file beside the target and
 * renames it over the target only once it is complete and synced, so a
 * crash or an error never leaves a half-written checkpoint behind. */
#include "attograd.h"
#include "core/alloc.h"

#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file.h"
#include "io/json.h"

_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE float and double expected");

#define ST_MAX_HEADER 100000000u    /* the reference's MAX_HEADER_SIZE */
#define ST_MAX_RANK 64              /* axes a file may give a tensor */
#define ST_MAX_DIM (UINT64_C(1) << 53) /* larger sizes are surely corrupt */

static const struct {
    const char *name;
    int size; /* bytes per element */
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
    {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};

/* ---- little-endian bytes --------------------------------------------------- */

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static double get_f64(const unsigned char *p)
{
    uint64_t b = get_u64(p);
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static float get_f32(const unsigned char *p)
{
    uint32_t b = get_u32(p);
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* ---- messages ----------------------------------------------------------------- */

#if defined(__GNUC__)
#define AG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define AG_PRINTF(a, b)
#endif

/* A name from a file, fit for a message: at most ~48 bytes (cut on a UTF-8
 * character boundary, "..." appended) with control characters as '?'. */
typedef struct shown {
    char s[64];
} shown;

static const char *show(const char *name, shown *out)
{
    size_t n = strlen(name), cut = n;
    if (n > 48) {
        cut = 48;
        while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80) cut--;
    }
    for (size_t i = 0; i < cut; i++) {
        unsigned char c = (unsigned char)name[i];
        out->s[i] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
    }
    strcpy(out->s + cut, cut < n ? "..." : "");
    return out->s;
}

/* "[2, 3]" for an int64 shape; long shapes end in ", ...]". */
static const char *shape_str64(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim; i++) {
        int n = snprintf(buf + at, len - at, "%s%" PRId64, i ? ", " : "[", shape[i]);
        if (n < 0 || (size_t)n >= len - at || at + (size_t)n > len - 8) {
            snprintf(buf + at, len - at, at ? ", ...]" : "[...]");
            return buf;
        }
        at += (size_t)n;
    }
    snprintf(buf + at, len - at, ndim ? "]" : "[]");
    return buf;
}

/* ---- sorting index arrays (heap sort: no recursion, no allocation) ---------- */

typedef int (*cmp_fn)(const void *ctx, uint32_t a, uint32_t b);

static void sift_down(uint32_t *a, size_t root, size_t n, cmp_fn cmp, const void *ctx)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cmp(ctx, a[child], a[child + 1]) < 0) child++;
        if (cmp(ctx, a[root], a[child]) >= 0) return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void heap_sort(uint32_t *a, size_t n, cmp_fn cmp, const void *ctx)
{
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n, cmp, ctx);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end, cmp, ctx);
    }
}

/* ============================================================================
 * Reading
 * ========================================================================== */

typedef struct st_tensor {
    const char *name;  /* in the header's string pool */
    const char *dtype; /* from dtypes[] */
    int dsize;
    int ndim;
    int64_t *shape;    /* into ag_st.shapes */
    size_t numel;
    uint64_t begin, end; /* byte range in the data buffer */
} st_tensor;

struct ag_st {
    unsigned char *owned;      /* the bytes the data buffer lives in */
    const unsigned char *data; /* the data buffer */
    size_t data_len;
    char *pool;                /* every string of the header */
    st_tensor *t;              /* in header order */
    int count;
    uint32_t *by_name;         /* tensor indices sorted by name */
    int64_t *shapes;
    const char **meta;         /* key0, value0, key1, ... */
    int nmeta;
};

/* What validation needs at hand to report an error. */
typedef struct vctx {
    const char *what;        /* the path, or "safetensors buffer" */
    const char *hdr;         /* header text (for quoting numbers) */
    const ag__json *j;
    char *err;
    size_t errlen;
} vctx;

AG_PRINTF(2, 3)
static ag_status bad(const vctx *c, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        int n = snprintf(c->err, c->errlen, "%s: ", c->what);
        if (n >= 0 && (size_t)n < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            ag__verrf(c->err + n, c->errlen - (size_t)n, AG_ERR_FORMAT, fmt, ap);
            va_end(ap);
        }
    }
    return AG_ERR_FORMAT;
}

static ag_status oom(const vctx *c)
{
    return ag__errf(c->err, c->errlen, AG_ERR_NOMEM, "%s: out of memory", c->what);
}

static const char *type_name(int type)
{
    switch (type) {
    case AG__JSON_NULL: return "null";
    case AG__JSON_FALSE: return "false";
    case AG__JSON_TRUE: return "true";
    case AG__JSON_NUMBER: return "a number";
    case AG__JSON_STRING: return "a string";
    case AG__JSON_ARRAY: return "an array";
    default: return "an object";
    }
}

static const ag__json_node *node(const vctx *c, uint32_t i) { return &c->j->nodes[i]; }
static const char *key_of(const vctx *c, uint32_t i) { return c->j->pool + c->j->nodes[i].key; }

/* Keys and strings may hold a NUL (from \u0000); C names cannot. */
static int key_has_nul(const vctx *c, uint32_t i)
{
    return strlen(key_of(c, i)) != c->j->nodes[i].key_len;
}

static int cmp_key(const void *ctx, uint32_t a, uint32_t b)
{
    const vctx *c = ctx;
    return strcmp(key_of(c, a), key_of(c, b));
}

/* Element i of field (shape, data_offsets) of tensor tname as an integer in
 * [0, 2^53]. */
static ag_status get_uint(const vctx *c, const char *tname, const char *field, uint32_t i,
                          uint32_t idx, uint64_t *v)
{
    const ag__json_node *n = node(c, idx);
    shown s;
    if (n->type != AG__JSON_NUMBER)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %s, not an integer", show(tname, &s), field, i,
                   type_name(n->type));
    int len = n->str_len > 24 ? 24 : (int)n->str_len;
    const char *more = n->str_len > 24 ? "..." : "";
    if (!n->is_int)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, not an integer", show(tname, &s), field,
                   i, len, c->hdr + n->str, more);
    if (n->neg && (n->u || n->overflow))
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, negative", show(tname, &s), field, i,
                   len, c->hdr + n->str, more);
    if (n->overflow || n->u > ST_MAX_DIM)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, larger than 2^53", show(tname, &s),
                   field, i, len, c->hdr + n->str, more);
    *v = n->u;
    return AG_OK;
}

/* Check entry `idx` (a member of the top-level object) and fill *t, except
 * t->shape; its shape node goes to *shape_idx. */
static ag_status check_entry(const vctx *c, uint32_t idx, size_t data_len, st_tensor *t,
                             uint32_t *shape_idx)
{
    const char *name = key_of(c, idx);
    const ag__json_node *e = node(c, idx);
    shown s, s2;
    char buf[128];
    t->name = name;
    if (e->type != AG__JSON_OBJECT)
        return bad(c, "tensor '%s': entry is %s, not an object", show(name, &s), type_name(e->type));

    /* exactly the keys dtype, shape, data_offsets, each once */
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    uint32_t at[3] = {0, 0, 0};
    for (uint32_t m = e->first; m; m = node(c, m)->next) {
        int k = 0;
        while (k < 3 && (strcmp(key_of(c, m), keys[k]) != 0 || key_has_nul(c, m))) k++;
        if (k == 3)
            return bad(c, "tensor '%s': unexpected key '%s' (allowed: dtype, shape, data_offsets)",
                       show(name, &s), show(key_of(c, m), &s2));
        if (at[k]) return bad(c, "tensor '%s': key '%s' appears twice", show(name, &s), keys[k]);
        at[k] = m;
    }
    for (int k = 0; k < 3; k++)
        if (!at[k]) return bad(c, "tensor '%s': missing key '%s'", show(name, &s), keys[k]);

    /* dtype */
    const ag__json_node *d = node(c, at[0]);
    if (d->type != AG__JSON_STRING)
        return bad(c, "tensor '%s': dtype is %s, not a string", show(name, &s), type_name(d->type));
    const char *dname = c->j->pool + d->str;
    t->dtype = NULL;
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        if (strcmp(dname, dtypes[k].name) == 0 && strlen(dname) == d->str_len) {
            t->dtype = dtypes[k].name;
            t->dsize = dtypes[k].size;
        }
    if (!t->dtype) return bad(c, "tensor '%s': unknown dtype '%s'", show(name, &s), show(dname, &s2));

    /* shape: at most ST_MAX_RANK integers; count x size must not overflow */
    const ag__json_node *sh = node(c, at[1]);
    if (sh->type != AG__JSON_ARRAY)
        return bad(c, "tensor '%s': shape is %s, not an array", show(name, &s), type_name(sh->type));
    if (sh->count > ST_MAX_RANK)
        return bad(c, "tensor '%s': shape has %" PRIu32 " axes, more than %d", show(name, &s),
                   sh->count, ST_MAX_RANK);
    int64_t dims[ST_MAX_RANK];
    uint64_t numel = 1;
    int overflow = 0;
    uint32_t i = 0;
    for (uint32_t m = sh->first; m; m = node(c, m)->next, i++) {
        uint64_t v;
        ag_status st = get_uint(c, name, "shape", i, m, &v);
        if (st) return st;
        dims[i] = (int64_t)v;
        if (v && numel > UINT64_MAX / v) overflow = 1;
        numel *= v;
    }
    t->ndim = (int)sh->count;
    *shape_idx = at[1];
    if (overflow || numel > SIZE_MAX)
        return bad(c, "tensor '%s': shape %s has too many elements (the count overflows)",
                   show(name, &s), shape_str64(t->ndim, dims, buf, sizeof buf));
    if (numel > SIZE_MAX / (size_t)t->dsize)
        return bad(c, "tensor '%s': shape %s of %s is too large (its byte size overflows)",
                   show(name, &s), shape_str64(t->ndim, dims, buf, sizeof buf), t->dtype);
    t->numel = (size_t)numel;
    uint64_t nbytes = numel * (uint64_t)t->dsize;

    /* data_offsets: [begin, end], end - begin == the byte size, inside the buffer */
    const ag__json_node *o = node(c, at[2]);
    if (o->type != AG__JSON_ARRAY)
        return bad(c, "tensor '%s': data_offsets is %s, not an array of 2 integers", show(name, &s),
                   type_name(o->type));
    if (o->count != 2)
        return bad(c, "tensor '%s': data_offsets has %" PRIu32 " element%s, not 2", show(name, &s), o->count,
                   o->count == 1 ? "" : "s");
    ag_status st = get_uint(c, name, "data_offsets", 0, o->first, &t->begin);
    if (!st) st = get_uint(c, name, "data_offsets", 1, node(c, o->first)->next, &t->end);
    if (st) return st;
    if (t->end < t->begin)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "]: the end is before the beginning",
                   show(name, &s), t->begin, t->end);
    if (t->end - t->begin != nbytes)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                      " bytes, but shape %s of %s needs %" PRIu64,
                   show(name, &s), t->begin, t->end, t->end - t->begin,
                   shape_str64(t->ndim, dims, buf, sizeof buf), t->dtype, nbytes);
    if (t->end > data_len)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                      "] run past the end of the data buffer (%zu bytes)",
                   show(name, &s), t->begin, t->end, data_len);
    return AG_OK;
}

/* __metadata__: an object of string -> string, each key once. */
static ag_status check_meta(const vctx *c, uint32_t idx, ag_st *f)
{
    const ag__json_node *m = node(c, idx);
    shown s;
    if (m->type != AG__JSON_OBJECT)
        return bad(c, "__metadata__ is %s, not an object of strings", type_name(m->type));
    f->meta = ag__calloc(2 * (size_t)m->count + 1, sizeof *f->meta);
    uint32_t *order = ag__calloc((size_t)m->count + 1, sizeof *order);
    if (!f->meta || !order) {
        ag__free(order);
        return oom(c);
    }
    ag_status st = AG_OK;
    uint32_t n = 0;
    for (uint32_t k = m->first; k; k = node(c, k)->next) {
        const ag__json_node *v = node(c, k);
        if (key_has_nul(c, k)) {
            st = bad(c, "__metadata__: a key contains a NUL character (\\u0000)");
            goto done;
        }
        if (v->type != AG__JSON_STRING) {
            st = bad(c, "__metadata__ key '%s': value is %s, not a string", show(key_of(c, k), &s),
                     type_name(v->type));
            goto done;
        }
        const char *val = c->j->pool + v->str;
        if (strlen(val) != v->str_len) {
            st = bad(c, "__metadata__ key '%s': value contains a NUL character (\\u0000)",
                     show(key_of(c, k), &s));
            goto done;
        }
        f->meta[2 * n] = key_of(c, k);
        f->meta[2 * n + 1] = val;
        order[n++] = k;
    }
    heap_sort(order, n, cmp_key, c);
    for (uint32_t i = 1; i < n; i++)
        if (cmp_key(c, order[i - 1], order[i]) == 0) {
            st = bad(c, "__metadata__ has key '%s' twice", show(key_of(c, order[i]), &s));
            goto done;
        }
    f->nmeta = (int)n;
done:
    ag__free(order);
    return st;
}

static int cmp_range(const void *ctx, uint32_t a, uint32_t b)
{
    const st_tensor *t = ctx;
    if (t[a].begin != t[b].begin) return t[a].begin < t[b].begin ? -1 : 1;
    if (t[a].end != t[b].end) return t[a].end < t[b].end ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int cmp_name(const void *ctx, uint32_t a, uint32_t b)
{
    const st_tensor *t = ctx;
    return strcmp(t[a].name, t[b].name);
}

/* The byte ranges, sorted by start, must tile [0, data_len) exactly. */
static ag_status check_tiling(const vctx *c, ag_st *f, uint32_t *order)
{
    shown s, s2;
    for (int i = 0; i < f->count; i++) order[i] = (uint32_t)i;
    heap_sort(order, (size_t)f->count, cmp_range, f->t);
    uint64_t covered = 0; /* bytes [0, covered) belong to tensors so far */
    const st_tensor *prev = NULL;
    for (int i = 0; i < f->count; i++) {
        const st_tensor *t = &f->t[order[i]];
        if (t->begin > covered)
            return bad(c, "data buffer bytes [%" PRIu64 ", %" PRIu64
                          ") belong to no tensor (a gap before tensor '%s')",
                       covered, t->begin, show(t->name, &s));
        if (t->begin < covered)
            return bad(c, "tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor '%s' [%" PRIu64
                          ", %" PRIu64 "]",
                       show(t->name, &s), t->begin, t->end, show(prev->name, &s2), prev->begin, prev->end);
        covered = t->end;
        if (t->end > t->begin) prev = t;
    }
    if (covered < f->data_len)
        return bad(c, "%" PRIu64 " trailing bytes after the last tensor (the data buffer has %zu bytes, "
                      "the tensors cover %" PRIu64 ")",
                   (uint64_t)f->data_len - covered, f->data_len, covered);
    return AG_OK;
}

/* The 8-byte header length n of a file of len bytes: at most
 * ST_MAX_HEADER, and no more than the bytes that follow it.  Checked before
 * anything is allocated, so a lying length costs nothing. */
static ag_status check_header_length(const vctx *c, uint64_t len, const unsigned char first8[8], uint64_t *n)
{
    if (len < 8)
        return bad(c, "file is %" PRIu64 " bytes, shorter than the 8-byte header length", len);
    *n = get_u64(first8);
    if (*n > ST_MAX_HEADER)
        return bad(c, "header length %" PRIu64 " exceeds the limit of %u bytes", *n, ST_MAX_HEADER);
    if (*n > len - 8)
        return bad(c, "header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes follow the "
                      "length field)", *n, len - 8);
    return AG_OK;
}

/* Validate the header hdr[0..n) of a file whose data buffer has data_len
 * bytes into f (everything but f->data). */
static ag_status validate(const vctx *c0, const unsigned char *hdr, size_t n, size_t data_len, ag_st *f)
{
    vctx c = *c0;
    size_t at = ag__utf8_check(hdr, n);
    if (at != n)
        return bad(&c, "header is not valid UTF-8 (byte %zu of the header is 0x%02x)", at, hdr[at]);
    f->data_len = data_len;

    ag__json j;
    char jerr[160];
    ag_status st = ag__json_parse((const char *)hdr, n, &j, jerr, sizeof jerr);
    if (st == AG_ERR_NOMEM) return oom(&c);
    if (st) return bad(&c, "header is not valid JSON: %s", jerr);
    c.j = &j;
    c.hdr = (const char *)hdr;

    uint32_t *order = NULL, *shape_at = NULL;
    shown s;
    const ag__json_node *root = &j.nodes[0];
    if (root->type != AG__JSON_OBJECT) {
        st = bad(&c, "header is %s, not a JSON object", type_name(root->type));
        goto done;
    }

    /* top-level keys: no NUL, each once; __metadata__ aside, each a tensor */
    order = ag__calloc((size_t)root->count + 1, sizeof *order);
    if (!order) {
        st = oom(&c);
        goto done;
    }
    uint32_t nkeys = 0, meta_at = 0;
    for (uint32_t k = root->first; k; k = j.nodes[k].next) {
        if (key_has_nul(&c, k)) {
            st = bad(&c, "a tensor name contains a NUL character (\\u0000)");
            goto done;
        }
        if (strcmp(key_of(&c, k), "__metadata__") == 0) meta_at = k;
        order[nkeys++] = k;
    }
    heap_sort(order, nkeys, cmp_key, &c);
    for (uint32_t i = 1; i < nkeys; i++)
        if (cmp_key(&c, order[i - 1], order[i]) == 0) {
            const char *dup = key_of(&c, order[i]);
            st = strcmp(dup, "__metadata__") == 0 ? bad(&c, "__metadata__ appears twice")
                                                  : bad(&c, "duplicate tensor name '%s'", show(dup, &s));
            goto done;
        }
    if (nkeys - (meta_at != 0) > INT_MAX) {
        st = bad(&c, "too many tensors");
        goto done;
    }

    /* each tensor entry, in header order */
    int count = (int)(nkeys - (meta_at != 0));
    f->t = ag__calloc((size_t)count + 1, sizeof *f->t);
    shape_at = ag__calloc((size_t)count + 1, sizeof *shape_at);
    if (!f->t || !shape_at) {
        st = oom(&c);
        goto done;
    }
    size_t total_rank = 0;
    for (uint32_t k = root->first; k; k = j.nodes[k].next) {
        if (k == meta_at) continue;
        st = check_entry(&c, k, f->data_len, &f->t[f->count], &shape_at[f->count]);
        if (st) goto done;
        total_rank += (size_t)f->t[f->count].ndim;
        f->count++;
    }
    if (meta_at && (st = check_meta(&c, meta_at, f))) goto done;
    if ((st = check_tiling(&c, f, order))) goto done;

    /* keep the shapes, the strings and a by-name index */
    f->shapes = ag__calloc(total_rank + 1, sizeof *f->shapes);
    f->by_name = ag__calloc((size_t)count + 1, sizeof *f->by_name);
    if (!f->shapes || !f->by_name) {
        st = oom(&c);
        goto done;
    }
    int64_t *dst = f->shapes;
    for (int i = 0; i < count; i++) {
        f->t[i].shape = dst;
        for (uint32_t m = j.nodes[shape_at[i]].first; m; m = j.nodes[m].next) *dst++ = (int64_t)j.nodes[m].u;
        f->by_name[i] = (uint32_t)i;
    }
    heap_sort(f->by_name, (size_t)count, cmp_name, f->t);
    f->pool = j.pool;
    j.pool = NULL;
done:
    ag__free(order);
    ag__free(shape_at);
    ag__json_free(&j);
    return st;
}

void ag_st_free(ag_st *f)
{
    if (!f) return;
    ag__free(f->owned);
    ag__free(f->pool);
    ag__free(f->t);
    ag__free(f->by_name);
    ag__free(f->shapes);
    ag__free(f->meta);
    ag__free(f);
}

ag_status ag_st_parse(const void *buf, size_t len, ag_st **out, char *err, size_t errlen)
{
    if (!out || (!buf && len))
        return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_parse: %s is NULL", out ? "buf" : "out");
    *out = NULL;
    vctx c = {"safetensors buffer", NULL, NULL, err, errlen};
    const unsigned char *bytes = buf;
    uint64_t n;
    ag_status st = check_header_length(&c, len, bytes, &n);
    if (st) return st;
    ag_st *f = ag__calloc(1, sizeof *f);
    if (!f) return oom(&c);
    st = validate(&c, bytes + 8, (size_t)n, len - 8 - (size_t)n, f);
    if (!st) { /* keep a copy of the data: buf belongs to the caller */
        f->owned = ag__malloc(f->data_len);
        if (!f->owned) st = oom(&c);
        else {
            if (f->data_len) memcpy(f->owned, bytes + 8 + n, f->data_len);
            f->data = f->owned;
        }
    }
    if (st) {
        ag_st_free(f);
        return st;
    }
    *out = f;
    return AG_OK;
}

ag_status ag_st_load(const char *path, ag_st **out, char *err, size_t errlen)
{
    if (!out || !path)
        return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_load: %s is NULL", out ? "path" : "out");
    *out = NULL;
    vctx c = {path, NULL, NULL, err, errlen};
    ag__file fh;
    ag_status st = ag__file_open(&fh, path, err, errlen);
    if (st) return st;
    /* the length field, checked against the file's size before any allocation */
    unsigned char first8[8] = {0};
    uint64_t n = 0;
    if (fh.size >= 8) st = ag__file_read_exact(&fh, first8, 8, err, errlen);
    if (!st) st = check_header_length(&c, fh.size, first8, &n);
    if (!st && fh.size - 8 - n >= SIZE_MAX)
        st = ag__errf(err, errlen, AG_ERR_NOMEM, "%s: %" PRIu64 " bytes of data do not fit in memory", path,
                      fh.size - 8 - n);
    /* the header, validated against the data's size before the data is read */
    unsigned char *hdr = st ? NULL : ag__malloc((size_t)n + 1);
    ag_st *f = st ? NULL : ag__calloc(1, sizeof *f);
    if (!st && (!hdr || !f)) st = oom(&c);
    if (!st) st = ag__file_read_exact(&fh, hdr, (size_t)n, err, errlen);
    if (!st) st = validate(&c, hdr, (size_t)n, (size_t)(fh.size - 8 - n), f);
    ag__free(hdr);
    /* the data: as many bytes as the tensors declared in the header take */
    if (!st && !(f->owned = ag__malloc(f->data_len))) st = oom(&c);
    if (!st) st = ag__file_read_exact(&fh, f->owned, f->data_len, err, errlen);
    ag__file_close(&fh);
    if (st) {
        ag_st_free(f);
        return st;
    }
    f->data = f->owned;
    *out = f;
    return AG_OK;
}

/* ---- queries ---------------------------------------------------------------- */

static const st_tensor *at(const ag_st *f, int i)
{
    return (f && i >= 0 && i < f->count) ? &f->t[i] : NULL;
}

int ag_st_count(const ag_st *f) { return f ? f->count : 0; }
const char *ag_st_name(const ag_st *f, int i) { return at(f, i) ? at(f, i)->name : NULL; }
const char *ag_st_dtype(const ag_st *f, int i) { return at(f, i) ? at(f, i)->dtype : NULL; }
int ag_st_ndim(const ag_st *f, int i) { return at(f, i) ? at(f, i)->ndim : -1; }
const int64_t *ag_st_shape(const ag_st *f, int i) { return at(f, i) ? at(f, i)->shape : NULL; }
size_t ag_st_numel(const ag_st *f, int i) { return at(f, i) ? at(f, i)->numel : 0; }

const void *ag_st_bytes(const ag_st *f, int i)
{
    return at(f, i) ? f->data + at(f, i)->begin : NULL;
}

int ag_st_find(const ag_st *f, const char *name)
{
    if (!f || !name) return -1;
    size_t lo = 0, hi = (size_t)f->count; /* binary search in by_name */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t[f->by_name[mid]].name, name);
        if (c == 0) return (int)f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

const char *ag_st_meta(const ag_st *f, const char *key)
{
    for (int i = 0; f && key && i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

int ag_st_meta_count(const ag_st *f) { return f ? f->nmeta : 0; }

const char *ag_st_meta_key(const ag_st *f, int i)
{
    return (f && i >= 0 && i < f->nmeta) ? f->meta[2 * i] : NULL;
}

/* ---- reading values ----------------------------------------------------------- */

/* Tensor `name` as a float tensor, or an error. */
static ag_status find_real(const ag_st *f, const char *name, int *idx, char *err, size_t errlen)
{
    shown s;
    if (!f || !name) return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_read: file or name is NULL");
    *idx = ag_st_find(f, name);
    if (*idx < 0) return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': not in the file", show(name, &s));
    const char *d = f->t[*idx].dtype;
    if (strcmp(d, "F32") != 0 && strcmp(d, "F64") != 0)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': dtype %s in file, F32 or F64 expected",
                    show(name, &s), d);
    return AG_OK;
}

/* Decode n elements of an F32 or F64 tensor. */
static void decode_real(const ag_st *f, const st_tensor *t, ag_real *dst, size_t n)
{
    const unsigned char *p = f->data + t->begin;
    if (t->dsize == 4)
        for (size_t i = 0; i < n; i++) dst[i] = (ag_real)get_f32(p + 4 * i);
    else /* F64 into float rounds (IEEE: overflow gives +-inf) */
        for (size_t i = 0; i < n; i++) dst[i] = (ag_real)get_f64(p + 8 * i);
}

ag_status ag_st_read(const ag_st *f, const char *name, ag_real *dst, size_t n, char *err, size_t errlen)
{
    int i;
    shown s;
    ag_status st = find_real(f, name, &i, err, errlen);
    if (st) return st;
    if (f->t[i].numel != n)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': %zu elements in file, %zu expected",
                    show(name, &s), f->t[i].numel, n);
    if (!dst && n) return ag__errf(err, errlen, AG_ERR_ARG, "tensor '%s': dst is NULL", show(name, &s));
    decode_real(f, &f->t[i], dst, n);
    return AG_OK;
}

/* The stored shape of tensor i equals the ndim/shape given. */
static int same_shape(const st_tensor *t, int ndim, const int *shape)
{
    if (t->ndim != ndim) return 0;
    for (int k = 0; k < ndim; k++)
        if (t->shape[k] != (int64_t)shape[k]) return 0;
    return 1;
}

static ag_status shape_mismatch(const st_tensor *t, int ndim, const int *shape, char *err, size_t errlen)
{
    char a[128], b[128];
    shown s;
    return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': shape %s in file, %s expected", show(t->name, &s),
                shape_str64(t->ndim, t->shape, a, sizeof a), ag_shape_str_n(ndim, shape, b, sizeof b));
}

ag_status ag_st_read_tensor(const ag_st *f, const char *name, ag_tensor *t, char *err, size_t errlen)
{
    int i;
    if (!t) return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_read_tensor: tensor is NULL");
    ag_status st = find_real(f, name, &i, err, errlen);
    if (st) return st;
    if (!same_shape(&f->t[i], t->ndim, t->shape)) return shape_mismatch(&f->t[i], t->ndim, t->shape, err, errlen);
    decode_real(f, &f->t[i], t->data, t->size);
    return AG_OK;
}

ag_status ag_st_read_int(const ag_st *f, const char *name, int *dst, size_t n, char *err, size_t errlen)
{
    shown s;
    if (!f || !name) return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_read_int: file or name is NULL");
    int i = ag_st_find(f, name);
    if (i < 0) return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': not in the file", show(name, &s));
    const st_tensor *t = &f->t[i];
    if (strcmp(t->dtype, "I64") != 0 && strcmp(t->dtype, "I32") != 0)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': dtype %s in file, I64 or I32 expected",
                    show(name, &s), t->dtype);
    if (t->numel != n)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': %zu elements in file, %zu expected",
                    show(name, &s), t->numel, n);
    if (!dst && n) return ag__errf(err, errlen, AG_ERR_ARG, "tensor '%s': dst is NULL", show(name, &s));
    const unsigned char *p = f->data + t->begin;
    for (size_t k = 0; k < n; k++) {
        int64_t v = t->dsize == 8 ? (int64_t)get_u64(p + 8 * k) : (int64_t)(int32_t)get_u32(p + 4 * k);
        if (v < INT_MIN || v > INT_MAX)
            return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': element %zu is %" PRId64 ", outside the range of int",
                        show(name, &s), k, v);
        dst[k] = (int)v;
    }
    return AG_OK;
}

/* ============================================================================
 * Writing
 * ========================================================================== */

typedef struct w_tensor {
    char *name;
    const char *dtype;
    int ndim;
    int shape[AG_MAX_DIMS];
    size_t nbytes;
    unsigned char *bytes; /* little-endian, owned */
} w_tensor;

struct ag_st_writer {
    w_tensor *t;
    int count, cap;
    char **meta; /* key0, value0, key1, ... (owned) */
    int nmeta, mcap; /* pairs */
};

ag_st_writer *ag_st_writer_new(void) { return ag__calloc(1, sizeof(ag_st_writer)); }

void ag_st_writer_free(ag_st_writer *w)
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

/* A new entry for a tensor of dsize-byte elements; its bytes to be filled. */
static ag_status add_entry(ag_st_writer *w, const char *name, const char *dtype, int dsize, int ndim,
                           const int *shape, const void *data, w_tensor **out)
{
    if (!w || !name || !valid_utf8(name) || strcmp(name, "__metadata__") == 0) return AG_ERR_ARG;
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim && !shape)) return AG_ERR_ARG;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return AG_ERR_ARG;
        if (shape[i] && numel > SIZE_MAX / (size_t)dsize / (size_t)shape[i]) return AG_ERR_ARG;
        numel *= (size_t)shape[i];
    }
    if (numel && !data) return AG_ERR_ARG;
    for (int i = 0; i < w->count; i++)
        if (strcmp(w->t[i].name, name) == 0) return AG_ERR_ARG;
    w_tensor *arr = reserve(w->t, &w->cap, w->count, sizeof *w->t);
    if (!arr) return AG_ERR_NOMEM;
    w->t = arr;
    w_tensor e = {0};
    e.name = dup_str(name);
    e.nbytes = numel * (size_t)dsize;
    e.bytes = ag__malloc(e.nbytes);
    if (!e.name || !e.bytes) {
        ag__free(e.name);
        ag__free(e.bytes);
        return AG_ERR_NOMEM;
    }
    e.dtype = dtype;
    e.ndim = ndim;
    for (int i = 0; i < ndim; i++) e.shape[i] = shape[i];
    w->t[w->count] = e;
    *out = &w->t[w->count++];
    return AG_OK;
}

ag_status ag_st_add(ag_st_writer *w, const char *name, const char *dtype, int ndim, const int *shape,
                    const ag_real *data)
{
    if (!dtype) dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    int f64 = strcmp(dtype, "F64") == 0;
    if (!f64 && strcmp(dtype, "F32") != 0) return AG_ERR_ARG;
    w_tensor *e;
    ag_status st = add_entry(w, name, f64 ? "F64" : "F32", f64 ? 8 : 4, ndim, shape, data, &e);
    if (st) return st;
    size_t n = e->nbytes / (f64 ? 8 : 4);
    for (size_t i = 0; i < n; i++) {
        if (f64) {
            double x = (double)data[i];
            uint64_t b;
            memcpy(&b, &x, 8);
            put_u64(e->bytes + 8 * i, b);
        } else {
            float x = (float)data[i];
            uint32_t b;
            memcpy(&b, &x, 4);
            put_u32(e->bytes + 4 * i, b);
        }
    }
    return AG_OK;
}

ag_status ag_st_add_int(ag_st_writer *w, const char *name, int ndim, const int *shape, const int *data)
{
    w_tensor *e;
    ag_status st = add_entry(w, name, "I64", 8, ndim, shape, data, &e);
    if (st) return st;
    for (size_t i = 0; i < e->nbytes / 8; i++) put_u64(e->bytes + 8 * i, (uint64_t)(int64_t)data[i]);
    return AG_OK;
}

ag_status ag_st_add_meta(ag_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value || !valid_utf8(key) || !valid_utf8(value)) return AG_ERR_ARG;
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta[2 * i], key) == 0) return AG_ERR_ARG;
    /* mcap counts pairs; the array holds 2 * mcap strings */
    if (w->nmeta == w->mcap) {
        int cap = w->mcap;
        char **n = reserve(w->meta, &cap, w->nmeta, 2 * sizeof *w->meta);
        if (!n) return AG_ERR_NOMEM;
        w->meta = n;
        w->mcap = cap;
    }
    char *k = dup_str(key), *v = dup_str(value);
    if (!k || !v) {
        ag__free(k);
        ag__free(v);
        return AG_ERR_NOMEM;
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
static void put_header(const ag_st_writer *w, sink *s)
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

ag_status ag_st_save(const ag_st_writer *w, const char *path, char *err, size_t errlen)
{
    if (!w || !path || !*path) return ag__errf(err, errlen, AG_ERR_ARG, "ag_st_save: writer or path is NULL or empty");

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
    put_u64(head, (uint64_t)padded);
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

/* ============================================================================
 * A store as a checkpoint
 * ========================================================================== */

ag_status ag_store_save(const ag_store *s, const char *path, const char *const *meta_kv, int n_meta,
                        char *err, size_t errlen)
{
    shown sh;
    if (!s || !path) return ag__errf(err, errlen, AG_ERR_ARG, "ag_store_save: store or path is NULL");
    if (n_meta < 0 || (n_meta > 0 && !meta_kv))
        return ag__errf(err, errlen, AG_ERR_ARG, "%s: %d metadata pairs given with %s", path, n_meta,
                    meta_kv ? "a key/value array" : "no key/value array");
    ag_st_writer *w = ag_st_writer_new();
    if (!w) return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory", path);
    const char *dtype = sizeof(ag_real) == 8 ? "F64" : "F32";
    ag_status st = AG_OK;
    for (int i = 0; !st && i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        st = ag_st_add(w, t->name, dtype, t->ndim, t->shape, t->data);
        if (st == AG_ERR_NOMEM) ag__errf(err, errlen, st, "%s: out of memory adding parameter '%s'", path, show(t->name, &sh));
        else if (st) ag__errf(err, errlen, st, "%s: parameter '%s': name is not valid UTF-8 or is reserved", path, show(t->name, &sh));
    }
    for (int i = 0; !st && i < n_meta; i++) {
        const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
        st = ag_st_add_meta(w, k, v);
        if (st == AG_ERR_NOMEM) ag__errf(err, errlen, st, "%s: out of memory adding metadata", path);
        else if (st)
            ag__errf(err, errlen, st, "%s: metadata pair %d: key '%s' is NULL, repeated or not valid UTF-8 (or its value is)",
                 path, i, k ? show(k, &sh) : "(null)");
    }
    if (!st) st = ag_st_save(w, path, err, errlen);
    ag_st_writer_free(w);
    return st;
}

/* A weight that is NaN or infinite once read as ag_real (an F64 value past
 * float's range counts: it would load as inf) is an error naming the
 * tensor: a model with one would run and print nonsense with status OK. */
static ag_status check_finite(const ag_st *f, const st_tensor *t, char *err, size_t errlen)
{
    const unsigned char *p = f->data + t->begin;
    for (size_t i = 0; i < t->numel; i++) {
        double v = t->dsize == 4 ? (double)get_f32(p + 4 * i) : get_f64(p + 8 * i);
        if (isfinite((ag_real)v)) continue;
        shown s;
        char what[48];
        if (isfinite(v)) snprintf(what, sizeof what, "%g, beyond the range of %s", v, sizeof(ag_real) == 4 ? "float" : "double");
        else snprintf(what, sizeof what, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return ag__errf(err, errlen, AG_ERR_NUMERIC, "tensor '%s': element %zu is %s (weights must be finite)",
                        show(t->name, &s), i, what);
    }
    return AG_OK;
}

ag_status ag_store_load(ag_store *s, const ag_st *f, char *err, size_t errlen)
{
    if (!s || !f) return ag__errf(err, errlen, AG_ERR_ARG, "ag_store_load: store or file is NULL");
    /* check everything first: a failure must leave every parameter as it was */
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        int k;
        ag_status st = find_real(f, t->name, &k, err, errlen);
        if (st) return st;
        if (!same_shape(&f->t[k], t->ndim, t->shape)) return shape_mismatch(&f->t[k], t->ndim, t->shape, err, errlen);
        if ((st = check_finite(f, &f->t[k], err, errlen))) return st;
    }
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        decode_real(f, &f->t[ag_st_find(f, t->name)], t->data, t->size);
    }
    return AG_OK;
}
