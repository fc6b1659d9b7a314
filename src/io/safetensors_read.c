/* safetensors_read.c: loading a safetensors file (or a buffer), the
 * queries on it, its values as ag_real or int, and a store filled from it.
 *
 * Loading reads in the order that bounds memory by what the file declares:
 * the 8-byte length (checked against the file's size), the header (checked
 * against the data's size, safetensors_validate.c), then the data.  A
 * loaded file owns a copy of its data; every query is read-only. */
#include "io/safetensors.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "io/file.h"

static ag_status oom(const char *what, char *err, size_t errlen)
{
    return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory", what);
}

/* ---- loading ----------------------------------------------------------------- */

void ag_safetensors_free(ag_safetensors *f)
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

/* buf[0..len) as a safetensors file named what in messages */
static ag_status parse(const char *what, const void *buf, size_t len, ag_safetensors **out, char *err,
                       size_t errlen)
{
    const unsigned char *bytes = buf;
    uint64_t n;
    ag_status st = ag__st_header_length(what, len, bytes, &n, err, errlen);
    if (st) return st;
    ag_safetensors *f = ag__calloc(1, sizeof *f);
    if (!f) return oom(what, err, errlen);
    st = ag__st_validate(what, bytes + 8, (size_t)n, len - 8 - (size_t)n, f, err, errlen);
    /* keep a copy of the data: buf belongs to the caller */
    if (!st && !(f->owned = ag__malloc(f->data_len))) st = oom(what, err, errlen);
    if (!st) {
        if (f->data_len) memcpy(f->owned, bytes + 8 + n, f->data_len);
        f->data = f->owned;
    }
    if (st) {
        ag_safetensors_free(f);
        return st;
    }
    *out = f;
    return AG_OK;
}

ag_status ag_safetensors_parse(const void *buf, size_t len, ag_safetensors **out, char *err, size_t errlen)
{
    if (!out || (!buf && len))
        return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_parse: %s is NULL", out ? "buf" : "out");
    *out = NULL;
    return parse("safetensors buffer", buf, len, out, err, errlen);
}

/* A pipe: its whole content (at most the input limit), then checked as a
 * file of those bytes is. */
static ag_status load_stream(ag__file *fh, ag_safetensors **out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    ag_status st = ag__file_read_rest(fh, &buf, &len, err, errlen);
    ag__file_close(fh);
    if (st) return st;
    st = parse(fh->path, buf, len, out, err, errlen);
    ag__free(buf);
    return st;
}

ag_status ag_safetensors_load(const char *path, ag_safetensors **out, char *err, size_t errlen)
{
    if (!out || !path)
        return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_load: %s is NULL", out ? "path" : "out");
    *out = NULL;
    ag__file fh;
    ag_status st = ag__file_open(&fh, path, err, errlen);
    if (st) return st;
    if (fh.stream) return load_stream(&fh, out, err, errlen);
    /* the length field, checked against the file's size before any allocation */
    unsigned char first8[8] = {0};
    uint64_t n = 0;
    if (fh.size >= 8) st = ag__file_read_exact(&fh, first8, 8, err, errlen);
    if (!st) st = ag__st_header_length(path, fh.size, first8, &n, err, errlen);
    if (!st && fh.size - 8 - n >= SIZE_MAX)
        st = ag__errf(err, errlen, AG_ERR_NOMEM, "%s: %" PRIu64 " bytes of data do not fit in memory", path,
                      fh.size - 8 - n);
    /* the header, validated against the data's size before the data is read */
    unsigned char *hdr = st ? NULL : ag__malloc((size_t)n + 1);
    ag_safetensors *f = st ? NULL : ag__calloc(1, sizeof *f);
    if (!st && (!hdr || !f)) st = oom(path, err, errlen);
    if (!st) st = ag__file_read_exact(&fh, hdr, (size_t)n, err, errlen);
    if (!st) st = ag__st_validate(path, hdr, (size_t)n, (size_t)(fh.size - 8 - n), f, err, errlen);
    ag__free(hdr);
    /* the data: as many bytes as the tensors declared in the header take */
    if (!st && !(f->owned = ag__malloc(f->data_len))) st = oom(path, err, errlen);
    if (!st) st = ag__file_read_exact(&fh, f->owned, f->data_len, err, errlen);
    ag__file_close(&fh);
    if (st) {
        ag_safetensors_free(f);
        return st;
    }
    f->data = f->owned;
    *out = f;
    return AG_OK;
}

/* ---- queries ---------------------------------------------------------------- */

static const ag__st_tensor *at(const ag_safetensors *f, int i)
{
    return (f && i >= 0 && i < f->count) ? &f->t[i] : NULL;
}

int ag_safetensors_count(const ag_safetensors *f) { return f ? f->count : 0; }
const char *ag_safetensors_name(const ag_safetensors *f, int i) { return at(f, i) ? at(f, i)->name : NULL; }
const char *ag_safetensors_dtype(const ag_safetensors *f, int i) { return at(f, i) ? at(f, i)->dtype : NULL; }
int ag_safetensors_ndim(const ag_safetensors *f, int i) { return at(f, i) ? at(f, i)->ndim : -1; }
const int64_t *ag_safetensors_shape(const ag_safetensors *f, int i) { return at(f, i) ? at(f, i)->shape : NULL; }
size_t ag_safetensors_numel(const ag_safetensors *f, int i) { return at(f, i) ? at(f, i)->numel : 0; }

const void *ag_safetensors_bytes(const ag_safetensors *f, int i)
{
    return at(f, i) ? f->data + at(f, i)->begin : NULL;
}

int ag_safetensors_find(const ag_safetensors *f, const char *name)
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

const char *ag_safetensors_meta(const ag_safetensors *f, const char *key)
{
    for (int i = 0; f && key && i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

int ag_safetensors_meta_count(const ag_safetensors *f) { return f ? f->nmeta : 0; }

const char *ag_safetensors_meta_key(const ag_safetensors *f, int i)
{
    return (f && i >= 0 && i < f->nmeta) ? f->meta[2 * i] : NULL;
}

/* ---- reading values ----------------------------------------------------------- */

/* Tensor `name` as a float tensor, or an error. */
static ag_status find_real(const ag_safetensors *f, const char *name, int *idx, char *err, size_t errlen)
{
    ag__shown s;
    if (!f || !name) return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_read: file or name is NULL");
    *idx = ag_safetensors_find(f, name);
    if (*idx < 0) return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': not in the file", ag__st_show(name, &s));
    const char *d = f->t[*idx].dtype;
    if (strcmp(d, "F32") != 0 && strcmp(d, "F64") != 0)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': dtype %s in file, F32 or F64 expected",
                    ag__st_show(name, &s), d);
    return AG_OK;
}

/* Decode n elements of an F32 or F64 tensor. */
static void decode_real(const ag_safetensors *f, const ag__st_tensor *t, ag_real *dst, size_t n)
{
    const unsigned char *p = f->data + t->begin;
    if (t->dsize == 4)
        for (size_t i = 0; i < n; i++) dst[i] = (ag_real)ag__get_f32(p + 4 * i);
    else /* F64 into float rounds (IEEE: overflow gives +-inf) */
        for (size_t i = 0; i < n; i++) dst[i] = (ag_real)ag__get_f64(p + 8 * i);
}

ag_status ag_safetensors_read(const ag_safetensors *f, const char *name, ag_real *dst, size_t n, char *err, size_t errlen)
{
    int i;
    ag__shown s;
    ag_status st = find_real(f, name, &i, err, errlen);
    if (st) return st;
    if (f->t[i].numel != n)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': %zu elements in file, %zu expected",
                    ag__st_show(name, &s), f->t[i].numel, n);
    if (!dst && n) return ag__errf(err, errlen, AG_ERR_ARG, "tensor '%s': dst is NULL", ag__st_show(name, &s));
    decode_real(f, &f->t[i], dst, n);
    return AG_OK;
}

/* The stored shape of tensor i equals the ndim/shape given. */
static int same_shape(const ag__st_tensor *t, int ndim, const int *shape)
{
    if (t->ndim != ndim) return 0;
    for (int k = 0; k < ndim; k++)
        if (t->shape[k] != (int64_t)shape[k]) return 0;
    return 1;
}

static ag_status shape_mismatch(const ag__st_tensor *t, int ndim, const int *shape, char *err, size_t errlen)
{
    char a[128], b[128];
    ag__shown s;
    return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': shape %s in file, %s expected", ag__st_show(t->name, &s),
                ag__st_shape_str(t->ndim, t->shape, a, sizeof a), ag_shape_str_n(ndim, shape, b, sizeof b));
}

ag_status ag_safetensors_read_tensor(const ag_safetensors *f, const char *name, ag_tensor *t, char *err, size_t errlen)
{
    int i;
    if (!t) return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_read_tensor: tensor is NULL");
    ag_status st = find_real(f, name, &i, err, errlen);
    if (st) return st;
    if (!same_shape(&f->t[i], t->ndim, t->shape)) return shape_mismatch(&f->t[i], t->ndim, t->shape, err, errlen);
    decode_real(f, &f->t[i], t->data, t->size);
    return AG_OK;
}

ag_status ag_safetensors_read_int(const ag_safetensors *f, const char *name, int *dst, size_t n, char *err, size_t errlen)
{
    ag__shown s;
    if (!f || !name) return ag__errf(err, errlen, AG_ERR_ARG, "ag_safetensors_read_int: file or name is NULL");
    int i = ag_safetensors_find(f, name);
    if (i < 0) return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': not in the file", ag__st_show(name, &s));
    const ag__st_tensor *t = &f->t[i];
    if (strcmp(t->dtype, "I64") != 0 && strcmp(t->dtype, "I32") != 0)
        return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': dtype %s in file, I64 or I32 expected",
                    ag__st_show(name, &s), t->dtype);
    if (t->numel != n)
        return ag__errf(err, errlen, AG_ERR_SHAPE, "tensor '%s': %zu elements in file, %zu expected",
                    ag__st_show(name, &s), t->numel, n);
    if (!dst && n) return ag__errf(err, errlen, AG_ERR_ARG, "tensor '%s': dst is NULL", ag__st_show(name, &s));
    const unsigned char *p = f->data + t->begin;
    for (size_t k = 0; k < n; k++) {
        int64_t v = t->dsize == 8 ? (int64_t)ag__get_u64(p + 8 * k) : (int64_t)(int32_t)ag__get_u32(p + 4 * k);
        if (v < INT_MIN || v > INT_MAX)
            return ag__errf(err, errlen, AG_ERR_FORMAT, "tensor '%s': element %zu is %" PRId64 ", outside the range of int",
                        ag__st_show(name, &s), k, v);
        dst[k] = (int)v;
    }
    return AG_OK;
}

/* ---- a store from a file -------------------------------------------------------- */

/* A weight that is NaN or infinite once read as ag_real (an F64 value past
 * float's range counts: it would load as inf) is an error naming the
 * tensor: a model with one would run and print nonsense with status OK. */
static ag_status check_finite(const ag_safetensors *f, const ag__st_tensor *t, char *err, size_t errlen)
{
    const unsigned char *p = f->data + t->begin;
    for (size_t i = 0; i < t->numel; i++) {
        double v = t->dsize == 4 ? (double)ag__get_f32(p + 4 * i) : ag__get_f64(p + 8 * i);
        if (isfinite((ag_real)v)) continue;
        ag__shown s;
        char what[48];
        if (isfinite(v)) snprintf(what, sizeof what, "%g, beyond the range of %s", v, sizeof(ag_real) == 4 ? "float" : "double");
        else snprintf(what, sizeof what, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return ag__errf(err, errlen, AG_ERR_NUMERIC, "tensor '%s': element %zu is %s (weights must be finite)",
                        ag__st_show(t->name, &s), i, what);
    }
    return AG_OK;
}

ag_status ag_store_load(ag_store *s, const ag_safetensors *f, char *err, size_t errlen)
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
        decode_real(f, &f->t[ag_safetensors_find(f, t->name)], t->data, t->size);
    }
    return AG_OK;
}
