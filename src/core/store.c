/* store.c: the parameter store.  Parameters and their gradients outlive every
 * graph: a model builds a fresh graph each step over the same store.
 * Constants (masks, position tables) live here too, apart from the
 * parameters: they have no gradient and are never saved or optimized.
 * Store-owned tensors have no graph (ag__impl(t)->graph is NULL), so any
 * graph's ops take them after any reset. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>

struct ag_store {
    ag_tensor **items; /* the parameters, in insertion order */
    int count, cap;
    ag_tensor **consts; /* the constants (ag_store_constant) */
    int nconst, capconst;
    int borrowed; /* the values belong to another store (ag__store_borrow) */
    char err[256];
};

ag_store *ag_store_new(void) { return ag__calloc(1, sizeof(ag_store)); }

/* A tensor's values, zeroed, on a 64-byte boundary (a cache line, an
 * AVX-512 vector), as the graph's arena gives them: malloc's 16 would split
 * every vector of a parameter or its gradient across two lines.  The
 * pointer to free sits in the bytes just before the values. */
enum { VALUES_ALIGN = 64 };

static ag_real *values_new(size_t size)
{
    size_t pad = VALUES_ALIGN + sizeof(void *);
    if (size > (SIZE_MAX - pad) / sizeof(ag_real)) return NULL;
    unsigned char *raw = ag__malloc(size * sizeof(ag_real) + pad);
    if (!raw) return NULL;
    uintptr_t at = ((uintptr_t)raw + sizeof(void *) + VALUES_ALIGN - 1) & ~(uintptr_t)(VALUES_ALIGN - 1);
    ag_real *v = (ag_real *)at;
    memcpy((unsigned char *)v - sizeof(void *), &raw, sizeof raw);
    memset(v, 0, size * sizeof(ag_real));
    return v;
}

static void values_free(ag_real *v)
{
    if (!v) return;
    void *raw;
    memcpy(&raw, (unsigned char *)v - sizeof(void *), sizeof raw);
    ag__free(raw);
}

void ag_store_free(ag_store *s)
{
    if (!s) return;
    for (int i = 0; i < s->count; i++) {
        if (!s->borrowed) values_free(s->items[i]->data);
        values_free(s->items[i]->grad);
        ag__free(s->items[i]);
    }
    for (int i = 0; i < s->nconst; i++) {
        values_free(s->consts[i]->data);
        ag__free(s->consts[i]);
    }
    ag__free(s->items);
    ag__free(s->consts);
    ag__free(s);
}

const char *ag_store_error(const ag_store *s) { return s ? s->err : "store is NULL"; }

ag_status ag__store_fail(ag_store *s, ag_status st, const char *fmt, ...)
{
    if (!s) return st;
    va_list ap;
    va_start(ap, fmt);
    ag__verrf(s->err, sizeof s->err, st, fmt, ap);
    va_end(ap);
    return st;
}

ag_tensor *ag_store_find(const ag_store *s, const char *name)
{
    if (!s || !name) return NULL;
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->items[i]->name, name) == 0) return s->items[i];
    return NULL;
}

/* Grow a list of tensors to hold one more; false when out of memory. */
static bool list_grow(ag_tensor ***items, int count, int *cap)
{
    if (count < *cap) return true;
    int ncap = *cap ? 2 * *cap : 32;
    ag_tensor **n = ag__malloc((size_t)ncap * sizeof *n);
    if (!n) return false;
    if (count) memcpy(n, *items, (size_t)count * sizeof *n);
    ag__free(*items);
    *items = n;
    *cap = ncap;
    return true;
}

/* A store-owned tensor of the given shape, zero-filled, with a zeroed
 * gradient when `grad`; NULL with s->err set ("what 'name': why"). */
static ag_tensor *store_tensor(ag_store *s, const char *what, const char *name, int ndim, const int *shape,
                               bool grad)
{
    char buf[96];
    size_t size;
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim > 0 && !shape)) {
        snprintf(s->err, sizeof s->err, "%s '%s': %d axes, at most %d are supported", what, name, ndim,
                 AG_MAX_DIMS);
        return NULL;
    }
    if (!ag__shape_size(ndim, shape, &size)) {
        snprintf(s->err, sizeof s->err, "%s '%s': bad shape %s", what, name,
                 ag_shape_str_n(ndim, shape, buf, sizeof buf));
        return NULL;
    }
    ag__tensor_impl *n = ag__calloc(1, sizeof *n);
    ag_tensor *t = n ? &n->pub : NULL;
    if (t) t->data = values_new(size);
    if (t && grad) t->grad = values_new(size);
    if (!t || !t->data || (grad && !t->grad)) {
        if (t) values_free(t->data);
        if (t) values_free(t->grad);
        ag__free(n);
        snprintf(s->err, sizeof s->err, "%s '%s': out of memory", what, name);
        return NULL;
    }
    t->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->size = size;
    t->op = AG_OP_LEAF;
    n->slot = -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

/* The name is a string that fits in ag_tensor's name; else s->err says so. */
static bool name_fits(ag_store *s, const char *what, const char *name)
{
    if (name && *name && strlen(name) < sizeof(((ag_tensor *)0)->name)) return true;
    snprintf(s->err, sizeof s->err, "%s: name is empty or longer than %zu bytes", what,
             sizeof(((ag_tensor *)0)->name) - 1);
    return false;
}

ag_tensor *ag_param(ag_store *s, const char *name, int ndim, const int *shape)
{
    if (!s) return NULL;
    if (!name_fits(s, "param", name)) return NULL;
    if (s->borrowed) { /* its values are another store's: a new one would have no owner */
        snprintf(s->err, sizeof s->err, "param '%s': this store reads another store's values; add parameters there", name);
        return NULL;
    }
    if (ag_store_find(s, name)) {
        snprintf(s->err, sizeof s->err, "param: duplicate name '%s'", name);
        return NULL;
    }
    if (!list_grow(&s->items, s->count, &s->cap)) {
        snprintf(s->err, sizeof s->err, "param '%s': out of memory", name);
        return NULL;
    }
    ag_tensor *t = store_tensor(s, "param", name, ndim, shape, true);
    if (!t) return NULL;
    t->requires_grad = 1;
    t->is_param = 1;
    s->items[s->count++] = t;
    return t;
}

ag_tensor *ag_store_constant(ag_store *s, const char *name, int ndim, const int *shape, const ag_real *data)
{
    if (!s) return NULL;
    if (!name_fits(s, "constant", name)) return NULL;
    for (int i = 0; i < s->nconst; i++)
        if (strcmp(s->consts[i]->name, name) == 0) {
            snprintf(s->err, sizeof s->err, "constant: duplicate name '%s'", name);
            return NULL;
        }
    if (!list_grow(&s->consts, s->nconst, &s->capconst)) {
        snprintf(s->err, sizeof s->err, "constant '%s': out of memory", name);
        return NULL;
    }
    ag_tensor *t = store_tensor(s, "constant", name, ndim, shape, false);
    if (!t) return NULL;
    if (data) memcpy(t->data, data, t->size * sizeof(ag_real));
    ag__impl(t)->constant = true;
    s->consts[s->nconst++] = t;
    return t;
}

int ag_store_count(const ag_store *s) { return s ? s->count : 0; }

ag_tensor *ag_store_at(const ag_store *s, int i)
{
    return (s && i >= 0 && i < s->count) ? s->items[i] : NULL;
}

size_t ag_store_numel(const ag_store *s)
{
    size_t n = 0;
    for (int i = 0; s && i < s->count; i++) n += s->items[i]->size;
    return n;
}

ag_status ag__store_borrow(ag_store *r, const ag_store *s)
{
    if (!r || !s || r->borrowed) return AG_ERR_ARG;
    for (int i = 0; i < r->count; i++) { /* check every one before changing any */
        ag_tensor *t = ag_store_find(s, r->items[i]->name);
        if (!t || t->size != r->items[i]->size) {
            snprintf(r->err, sizeof r->err, "borrow: '%s' %s", r->items[i]->name,
                     t ? "has another size in the model's store" : "is not in the model's store");
            return AG_ERR_SHAPE;
        }
    }
    for (int i = 0; i < r->count; i++) {
        values_free(r->items[i]->data);
        r->items[i]->data = ag_store_find(s, r->items[i]->name)->data;
    }
    r->borrowed = 1;
    return AG_OK;
}

void ag__store_pieces(ag_store *s, size_t lo, size_t hi, ag_piece_fn fn, void *ctx)
{
    size_t off = 0;
    for (int i = 0; i < s->count && off < hi; i++) {
        ag_tensor *t = s->items[i];
        size_t a = lo > off ? lo - off : 0, b = hi - off < t->size ? hi - off : t->size;
        if (a < b) fn(ctx, i, t, a, b);
        off += t->size;
    }
}

void ag_store_zero_grad(ag_store *s)
{
    for (int i = 0; s && i < s->count; i++)
        memset(s->items[i]->grad, 0, s->items[i]->size * sizeof(ag_real));
}
