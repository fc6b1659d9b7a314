/* store.c: the parameter store.  Parameters and their gradients outlive every
 * graph: a model builds a fresh graph each step over the same store. */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>

struct ag_store {
    ag_tensor **items;
    int count, cap;
    int borrowed; /* the values belong to another store (ag__store_borrow) */
    char err[256];
};

ag_store *ag_store_new(void) { return ag__calloc(1, sizeof(ag_store)); }

void ag_store_free(ag_store *s)
{
    if (!s) return;
    for (int i = 0; i < s->count; i++) {
        if (!s->borrowed) ag__free(s->items[i]->data);
        ag__free(s->items[i]->grad);
        ag__free(s->items[i]);
    }
    ag__free(s->items);
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

ag_tensor *ag_param(ag_store *s, const char *name, int ndim, const int *shape)
{
    if (!s) return NULL;
    char buf[96];
    if (!name || !*name || strlen(name) >= sizeof(((ag_tensor *)0)->name)) {
        snprintf(s->err, sizeof s->err, "param: name is empty or longer than %zu bytes",
                 sizeof(((ag_tensor *)0)->name) - 1);
        return NULL;
    }
    if (s->borrowed) { /* its values are another store's: a new one would have no owner */
        snprintf(s->err, sizeof s->err, "param '%s': this store reads another store's values; add parameters there", name);
        return NULL;
    }
    if (ag_store_find(s, name)) {
        snprintf(s->err, sizeof s->err, "param: duplicate name '%s'", name);
        return NULL;
    }
    if (ndim < 0 || ndim > AG_MAX_DIMS || (ndim > 0 && !shape)) {
        snprintf(s->err, sizeof s->err, "param '%s': %d axes, at most %d are supported", name, ndim, AG_MAX_DIMS);
        return NULL;
    }
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && size > SIZE_MAX / sizeof(ag_real) / (size_t)shape[i])) {
            snprintf(s->err, sizeof s->err, "param '%s': bad shape %s", name, ag_shape_str_n(ndim, shape, buf, sizeof buf));
            return NULL;
        }
        size *= (size_t)shape[i];
    }
    if (s->count == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        ag_tensor **n = ag__malloc((size_t)cap * sizeof *n);
        if (!n) goto nomem;
        if (s->count) memcpy(n, s->items, (size_t)s->count * sizeof *n);
        ag__free(s->items);
        s->items = n;
        s->cap = cap;
    }
    ag_tensor *t = ag__calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->data = ag__calloc(size, sizeof(ag_real));
    t->grad = ag__calloc(size, sizeof(ag_real));
    if (!t->data || !t->grad) {
        ag__free(t->data);
        ag__free(t->grad);
        ag__free(t);
        goto nomem;
    }
    t->ndim = ndim;
    for (int i = 0; i < AG_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->size = size;
    t->op = AG_OP_LEAF;
    t->requires_grad = 1;
    t->is_param = 1;
    snprintf(t->name, sizeof t->name, "%s", name);
    s->items[s->count++] = t;
    return t;
nomem:
    snprintf(s->err, sizeof s->err, "param '%s': out of memory", name);
    return NULL;
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
        ag__free(r->items[i]->data);
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
