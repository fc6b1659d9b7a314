/* tensor.c: leaf tensors on a graph, the op arguments' view, shapes as text,
 * printing. */
#include "core/internal.h"

#include <math.h>
#include <stdio.h>

ag_tensor *ag_tensor_new(ag_graph *g, int ndim, const int *shape)
{
    if (!ag__ok(g, "tensor_new", 0)) return NULL;
    if (ndim > 0 && !shape) {
        ag_graph_fail(g, AG_ERR_ARG, "tensor_new: shape is NULL");
        return NULL;
    }
    ag_tensor *t = ag__node(g, AG_OP_LEAF, ndim, shape, 0, NULL);
    if (t) memset(t->data, 0, t->size * sizeof(ag_real));
    return t;
}

ag_tensor *ag_tensor_from(ag_graph *g, int ndim, const int *shape, const ag_real *data)
{
    ag_tensor *t = ag_tensor_new(g, ndim, shape);
    if (!t) return NULL;
    if (!data) {
        ag_graph_fail(g, AG_ERR_ARG, "tensor_from: data is NULL");
        return NULL;
    }
    memcpy(t->data, data, t->size * sizeof(ag_real));
    return t;
}

ag_tensor *ag_scalar(ag_graph *g, ag_real value)
{
    ag_tensor *t = ag_tensor_new(g, 0, NULL);
    if (t) t->data[0] = value;
    return t;
}

void ag_set_requires_grad(ag_tensor *t, int on)
{
    if (t && !ag__impl(t)->constant) t->requires_grad = on != 0;
}

int ag_tensor_iarg(const ag_tensor *t, int i)
{
    return t && i >= 0 && i < AG_MAX_DIMS + 2 ? ag__impl(t)->iarg[i] : 0;
}

double ag_tensor_farg(const ag_tensor *t, int i)
{
    return t && i >= 0 && i < 2 ? ag__impl(t)->farg[i] : 0;
}

ag_tensor *ag_set_name(ag_tensor *t, const char *name)
{
    if (t && name) { /* a bounded copy (no printf: models name tensors every step) */
        size_t n = strnlen(name, sizeof t->name - 1);
        memcpy(t->name, name, n);
        t->name[n] = 0;
    }
    return t;
}

char *ag_shape_str_n(int ndim, const int *shape, char *buf, size_t len)
{
    if (!buf || len == 0) return buf;
    size_t at = 0;
    int n = snprintf(buf, len, "[");
    at = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && at < len; i++) {
        n = snprintf(buf + at, len - at, i ? ", %d" : "%d", shape[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
    if (at < len) snprintf(buf + at, len - at, "]");
    buf[len - 1] = '\0';
    return buf;
}

char *ag_shape_str(const ag_tensor *t, char *buf, size_t len)
{
    if (!t) {
        if (buf && len) snprintf(buf, len, "(null)");
        return buf;
    }
    return ag_shape_str_n(t->ndim, t->shape, buf, len);
}

int ag_same_shape(const ag_tensor *a, const ag_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

void ag_tensor_print(FILE *f, const ag_tensor *t, const char *label)
{
    char buf[96];
    if (!t) {
        fprintf(f, "%s (null)\n", label ? label : "");
        return;
    }
    fprintf(f, "%s %s\n", label ? label : t->name, ag_shape_str(t, buf, sizeof buf));
    size_t row = t->ndim ? (size_t)t->shape[t->ndim - 1] : 1;
    if (row == 0) return;
    for (size_t i = 0; i < t->size; i++) {
        fprintf(f, "%s%9.4f", i % row ? " " : "  ", (double)t->data[i]);
        if ((i + 1) % row == 0) fputc('\n', f);
    }
}
