/* safetensors_validate.c: the header of a safetensors file, checked.
 *
 * The reader trusts nothing: a header is accepted only when every check of
 * the reference implementation passes (and a few more), and each rejection
 * has its own message naming the file, the tensor and the offending values.
 * In particular the tensors' byte ranges, sorted by start, must tile the
 * data buffer exactly: no gap, no overlap, no trailing byte.  Only the
 * data's size is needed, not its bytes, so a loader validates the header
 * before it reads (or allocates) the data.  Nothing here recurses: the JSON
 * parse is iterative, sorting is a heap sort. */
#include "io/safetensors.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "io/json.h"

static const struct {
    const char *name;
    int size; /* bytes per element */
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
    {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};

/* ---- names and shapes in messages ------------------------------------------ */

const char *ag__st_show(const char *name, ag__shown *out)
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

const char *ag__st_shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
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

/* ---- reporting ---------------------------------------------------------------- */

/* What validation needs at hand to report an error. */
typedef struct vctx {
    const char *what;        /* the path, or "safetensors buffer" */
    const char *hdr;         /* header text (for quoting numbers) */
    const ag__json *j;
    char *err;
    size_t errlen;
} vctx;

static ag_status bad(const vctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
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
    ag__shown s;
    if (n->type != AG__JSON_NUMBER)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %s, not an integer", ag__st_show(tname, &s), field, i,
                   type_name(n->type));
    int len = n->str_len > 24 ? 24 : (int)n->str_len;
    const char *more = n->str_len > 24 ? "..." : "";
    if (!n->is_int)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, not an integer", ag__st_show(tname, &s), field,
                   i, len, c->hdr + n->str, more);
    if (n->neg && (n->u || n->overflow))
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, negative", ag__st_show(tname, &s), field, i,
                   len, c->hdr + n->str, more);
    if (n->overflow || n->u > ST_MAX_DIM)
        return bad(c, "tensor '%s': %s[%" PRIu32 "] is %.*s%s, larger than 2^53", ag__st_show(tname, &s),
                   field, i, len, c->hdr + n->str, more);
    *v = n->u;
    return AG_OK;
}

/* __metadata__: an object of string -> string, each key once. */
static ag_status check_meta(const vctx *c, uint32_t idx, ag_safetensors *f)
{
    const ag__json_node *m = node(c, idx);
    ag__shown s;
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
            st = bad(c, "__metadata__ key '%s': value is %s, not a string", ag__st_show(key_of(c, k), &s),
                     type_name(v->type));
            goto done;
        }
        const char *val = c->j->pool + v->str;
        if (strlen(val) != v->str_len) {
            st = bad(c, "__metadata__ key '%s': value contains a NUL character (\\u0000)",
                     ag__st_show(key_of(c, k), &s));
            goto done;
        }
        f->meta[2 * n] = key_of(c, k);
        f->meta[2 * n + 1] = val;
        order[n++] = k;
    }
    heap_sort(order, n, cmp_key, c);
    for (uint32_t i = 1; i < n; i++)
        if (cmp_key(c, order[i - 1], order[i]) == 0) {
            st = bad(c, "__metadata__ has key '%s' twice", ag__st_show(key_of(c, order[i]), &s));
            goto done;
        }
    f->nmeta = (int)n;
done:
    ag__free(order);
    return st;
}

static int cmp_range(const void *ctx, uint32_t a, uint32_t b)
{
    const ag__st_tensor *t = ctx;
    if (t[a].begin != t[b].begin) return t[a].begin < t[b].begin ? -1 : 1;
    if (t[a].end != t[b].end) return t[a].end < t[b].end ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int cmp_name(const void *ctx, uint32_t a, uint32_t b)
{
    const ag__st_tensor *t = ctx;
    return strcmp(t[a].name, t[b].name);
}

/* The byte ranges, sorted by start, must tile [0, data_len) exactly. */
static ag_status check_tiling(const vctx *c, ag_safetensors *f, uint32_t *order)
{
    ag__shown s, s2;
    for (int i = 0; i < f->count; i++) order[i] = (uint32_t)i;
    heap_sort(order, (size_t)f->count, cmp_range, f->t);
    uint64_t covered = 0; /* bytes [0, covered) belong to tensors so far */
    const ag__st_tensor *prev = NULL;
    for (int i = 0; i < f->count; i++) {
        const ag__st_tensor *t = &f->t[order[i]];
        if (t->begin > covered)
            return bad(c, "data buffer bytes [%" PRIu64 ", %" PRIu64
                          ") belong to no tensor (a gap before tensor '%s')",
                       covered, t->begin, ag__st_show(t->name, &s));
        if (t->begin < covered)
            return bad(c, "tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor '%s' [%" PRIu64
                          ", %" PRIu64 "]",
                       ag__st_show(t->name, &s), t->begin, t->end, ag__st_show(prev->name, &s2), prev->begin, prev->end);
        covered = t->end;
        if (t->end > t->begin) prev = t;
    }
    if (covered < f->data_len)
        return bad(c, "%" PRIu64 " trailing bytes after the last tensor (the data buffer has %zu bytes, "
                      "the tensors cover %" PRIu64 ")",
                   (uint64_t)f->data_len - covered, f->data_len, covered);
    return AG_OK;
}

/* ---- one tensor entry ------------------------------------------------------------
 *
 * "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, checked
 * in four steps: the keys, the dtype, the shape, the byte range. */

/* Exactly the keys dtype, shape, data_offsets, each once: their nodes into
 * at[0], at[1], at[2]. */
static ag_status check_keys(const vctx *c, const char *name, const ag__json_node *e, uint32_t at[3])
{
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    ag__shown s, s2;
    if (e->type != AG__JSON_OBJECT)
        return bad(c, "tensor '%s': entry is %s, not an object", ag__st_show(name, &s), type_name(e->type));
    for (uint32_t m = e->first; m; m = node(c, m)->next) {
        int k = 0;
        while (k < 3 && (strcmp(key_of(c, m), keys[k]) != 0 || key_has_nul(c, m))) k++;
        if (k == 3)
            return bad(c, "tensor '%s': unexpected key '%s' (allowed: dtype, shape, data_offsets)",
                       ag__st_show(name, &s), ag__st_show(key_of(c, m), &s2));
        if (at[k]) return bad(c, "tensor '%s': key '%s' appears twice", ag__st_show(name, &s), keys[k]);
        at[k] = m;
    }
    for (int k = 0; k < 3; k++)
        if (!at[k]) return bad(c, "tensor '%s': missing key '%s'", ag__st_show(name, &s), keys[k]);
    return AG_OK;
}

/* One of the dtypes the format defines. */
static ag_status check_dtype(const vctx *c, const ag__json_node *d, ag__st_tensor *t)
{
    ag__shown s, s2;
    if (d->type != AG__JSON_STRING)
        return bad(c, "tensor '%s': dtype is %s, not a string", ag__st_show(t->name, &s), type_name(d->type));
    const char *dname = c->j->pool + d->str;
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        if (strcmp(dname, dtypes[k].name) == 0 && strlen(dname) == d->str_len) {
            t->dtype = dtypes[k].name;
            t->dsize = dtypes[k].size;
            return AG_OK;
        }
    return bad(c, "tensor '%s': unknown dtype '%s'", ag__st_show(t->name, &s), ag__st_show(dname, &s2));
}

/* At most ST_MAX_RANK integers, into dims; count x element size must not
 * overflow.  Sets t->ndim and t->numel. */
static ag_status check_shape(const vctx *c, const ag__json_node *sh, ag__st_tensor *t, int64_t *dims)
{
    ag__shown s;
    char buf[128];
    if (sh->type != AG__JSON_ARRAY)
        return bad(c, "tensor '%s': shape is %s, not an array", ag__st_show(t->name, &s), type_name(sh->type));
    if (sh->count > ST_MAX_RANK)
        return bad(c, "tensor '%s': shape has %" PRIu32 " axes, more than %d", ag__st_show(t->name, &s),
                   sh->count, ST_MAX_RANK);
    uint64_t numel = 1;
    int overflow = 0;
    uint32_t i = 0;
    for (uint32_t m = sh->first; m; m = node(c, m)->next, i++) {
        uint64_t v;
        ag_status st = get_uint(c, t->name, "shape", i, m, &v);
        if (st) return st;
        dims[i] = (int64_t)v;
        if (v && numel > UINT64_MAX / v) overflow = 1;
        numel *= v;
    }
    t->ndim = (int)sh->count;
    if (overflow || numel > SIZE_MAX)
        return bad(c, "tensor '%s': shape %s has too many elements (the count overflows)", ag__st_show(t->name, &s),
                   ag__st_shape_str(t->ndim, dims, buf, sizeof buf));
    if (numel > SIZE_MAX / (size_t)t->dsize)
        return bad(c, "tensor '%s': shape %s of %s is too large (its byte size overflows)",
                   ag__st_show(t->name, &s), ag__st_shape_str(t->ndim, dims, buf, sizeof buf), t->dtype);
    t->numel = (size_t)numel;
    return AG_OK;
}

/* [begin, end] with end - begin == the byte size, inside the data buffer. */
static ag_status check_offsets(const vctx *c, const ag__json_node *o, size_t data_len, ag__st_tensor *t,
                               const int64_t *dims)
{
    ag__shown s;
    char buf[128];
    if (o->type != AG__JSON_ARRAY)
        return bad(c, "tensor '%s': data_offsets is %s, not an array of 2 integers", ag__st_show(t->name, &s),
                   type_name(o->type));
    if (o->count != 2)
        return bad(c, "tensor '%s': data_offsets has %" PRIu32 " element%s, not 2", ag__st_show(t->name, &s),
                   o->count, o->count == 1 ? "" : "s");
    ag_status st = get_uint(c, t->name, "data_offsets", 0, o->first, &t->begin);
    if (!st) st = get_uint(c, t->name, "data_offsets", 1, node(c, o->first)->next, &t->end);
    if (st) return st;
    uint64_t nbytes = (uint64_t)t->numel * (uint64_t)t->dsize;
    if (t->end < t->begin)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "]: the end is before the beginning",
                   ag__st_show(t->name, &s), t->begin, t->end);
    if (t->end - t->begin != nbytes)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                      " bytes, but shape %s of %s needs %" PRIu64,
                   ag__st_show(t->name, &s), t->begin, t->end, t->end - t->begin,
                   ag__st_shape_str(t->ndim, dims, buf, sizeof buf), t->dtype, nbytes);
    if (t->end > data_len)
        return bad(c, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                      "] run past the end of the data buffer (%zu bytes)",
                   ag__st_show(t->name, &s), t->begin, t->end, data_len);
    return AG_OK;
}

/* Entry idx (a member of the top-level object) into *t, except t->shape;
 * its shape node goes to *shape_idx. */
static ag_status check_entry(const vctx *c, uint32_t idx, size_t data_len, ag__st_tensor *t,
                             uint32_t *shape_idx)
{
    uint32_t at[3] = {0, 0, 0}; /* dtype, shape, data_offsets */
    int64_t dims[ST_MAX_RANK];
    t->name = key_of(c, idx);
    ag_status st = check_keys(c, t->name, node(c, idx), at);
    if (!st) st = check_dtype(c, node(c, at[0]), t);
    if (!st) st = check_shape(c, node(c, at[1]), t, dims);
    if (!st) st = check_offsets(c, node(c, at[2]), data_len, t, dims);
    *shape_idx = at[1];
    return st;
}

/* ---- the whole header ----------------------------------------------------------- */

ag_status ag__st_header_length(const char *what, uint64_t len, const unsigned char first8[8], uint64_t *n,
                               char *err, size_t errlen)
{
    vctx c = {what, NULL, NULL, err, errlen};
    *n = 0;
    if (len < 8) return bad(&c, "file is %" PRIu64 " bytes, shorter than the 8-byte header length", len);
    *n = ag__get_u64(first8);
    if (*n > ST_MAX_HEADER)
        return bad(&c, "header length %" PRIu64 " exceeds the limit of %u bytes", *n, ST_MAX_HEADER);
    if (*n > len - 8)
        return bad(&c, "header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes follow the "
                       "length field)", *n, len - 8);
    return AG_OK;
}

/* The top-level keys: none with a NUL, none twice.  order gets the key
 * nodes (root->count of them), *meta_at the node of __metadata__ (or 0). */
static ag_status check_top_keys(const vctx *c, const ag__json_node *root, uint32_t *order, uint32_t *meta_at)
{
    ag__shown s;
    uint32_t nkeys = 0;
    *meta_at = 0;
    for (uint32_t k = root->first; k; k = node(c, k)->next) {
        if (key_has_nul(c, k)) return bad(c, "a tensor name contains a NUL character (\\u0000)");
        if (strcmp(key_of(c, k), "__metadata__") == 0) *meta_at = k;
        order[nkeys++] = k;
    }
    heap_sort(order, nkeys, cmp_key, c);
    for (uint32_t i = 1; i < nkeys; i++)
        if (cmp_key(c, order[i - 1], order[i]) == 0) {
            const char *dup = key_of(c, order[i]);
            return strcmp(dup, "__metadata__") == 0 ? bad(c, "__metadata__ appears twice")
                                                    : bad(c, "duplicate tensor name '%s'", ag__st_show(dup, &s));
        }
    if (nkeys - (*meta_at != 0) > INT_MAX) return bad(c, "too many tensors");
    return AG_OK;
}

/* Every tensor entry, in header order, into f->t; shape_at[i] gets tensor
 * i's shape node. */
static ag_status check_tensors(const vctx *c, const ag__json_node *root, uint32_t meta_at, ag_safetensors *f,
                               uint32_t *shape_at)
{
    for (uint32_t k = root->first; k; k = node(c, k)->next) {
        if (k == meta_at) continue;
        ag_status st = check_entry(c, k, f->data_len, &f->t[f->count], &shape_at[f->count]);
        if (st) return st;
        f->count++;
    }
    return AG_OK;
}

/* Keep what the queries need once the JSON is gone: the shapes, the
 * strings (the pool moves from the parse into f) and a by-name index. */
static ag_status keep_index(const vctx *c, ag__json *j, ag_safetensors *f, const uint32_t *shape_at)
{
    size_t total_rank = 0;
    for (int i = 0; i < f->count; i++) total_rank += (size_t)f->t[i].ndim;
    f->shapes = ag__calloc(total_rank + 1, sizeof *f->shapes);
    f->by_name = ag__calloc((size_t)f->count + 1, sizeof *f->by_name);
    if (!f->shapes || !f->by_name) return oom(c);
    int64_t *dst = f->shapes;
    for (int i = 0; i < f->count; i++) {
        f->t[i].shape = dst;
        for (uint32_t m = j->nodes[shape_at[i]].first; m; m = j->nodes[m].next) *dst++ = (int64_t)j->nodes[m].u;
        f->by_name[i] = (uint32_t)i;
    }
    heap_sort(f->by_name, (size_t)f->count, cmp_name, f->t);
    f->pool = j->pool;
    j->pool = NULL;
    return AG_OK;
}

/* The parsed header j, checked into f as a list of named steps. */
static ag_status check_header(const vctx *c, ag__json *j, ag_safetensors *f)
{
    const ag__json_node *root = &j->nodes[0];
    if (root->type != AG__JSON_OBJECT) return bad(c, "header is %s, not a JSON object", type_name(root->type));
    uint32_t *order = ag__calloc((size_t)root->count + 1, sizeof *order);
    uint32_t *shape_at = ag__calloc((size_t)root->count + 1, sizeof *shape_at);
    f->t = ag__calloc((size_t)root->count + 1, sizeof *f->t);
    uint32_t meta_at = 0;
    ag_status st = !order || !shape_at || !f->t ? oom(c) : AG_OK;
    if (!st) st = check_top_keys(c, root, order, &meta_at);
    if (!st) st = check_tensors(c, root, meta_at, f, shape_at);
    if (!st && meta_at) st = check_meta(c, meta_at, f);
    if (!st) st = check_tiling(c, f, order);
    if (!st) st = keep_index(c, j, f, shape_at);
    ag__free(order);
    ag__free(shape_at);
    return st;
}

ag_status ag__st_validate(const char *what, const unsigned char *hdr, size_t n, size_t data_len, ag_safetensors *f,
                          char *err, size_t errlen)
{
    vctx c = {what, (const char *)hdr, NULL, err, errlen};
    size_t at = ag__utf8_check(hdr, n);
    if (at != n) return bad(&c, "header is not valid UTF-8 (byte %zu of the header is 0x%02x)", at, hdr[at]);
    f->data_len = data_len;
    ag__json j;
    char jerr[160];
    ag_status st = ag__json_parse((const char *)hdr, n, &j, jerr, sizeof jerr);
    if (st == AG_ERR_NOMEM) return oom(&c);
    if (st) return bad(&c, "header is not valid JSON: %s", jerr);
    c.j = &j;
    st = check_header(&c, &j, f);
    ag__json_free(&j);
    return st;
}
