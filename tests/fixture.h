/* tests/fixture.h: reading the PyTorch fixtures of tests/reference (see the
 * README there) for the parity tests.
 *
 * A fixture is a safetensors file of named tensors: inputs (read into
 * ag_real, exactly, since make_fixtures.py keeps them to multiples of
 * 2^-16), integer ids, and reference results, which are read as doubles
 * exactly as stored (F64, or F32 for translator.py's float32 results) so
 * that neither build rounds the reference it is compared with.  Each helper
 * fails the test when the fixture lacks what it asks for. */
#ifndef AG_TESTS_FIXTURE_H
#define AG_TESTS_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "common.h"

static inline ag_safetensors *open_fixture(const char *path)
{
    ag_safetensors *f = NULL;
    char err[256] = "";
    ag_status st = ag_safetensors_load(path, &f, err, sizeof err);
    cr_assert_eq(st, AG_OK, "%s (run the tests from the repository root; tests/reference/README.md says "
                            "how to regenerate the fixtures)", err);
    return f;
}

/* The index of the stored tensor `name`. */
static inline int stored(const ag_safetensors *f, const char *name)
{
    int i = ag_safetensors_find(f, name);
    cr_assert_geq(i, 0, "the fixture has no tensor %s", name);
    return i;
}

/* How many stored tensors are named "<prefix>.<something>". */
static inline int count_stored(const ag_safetensors *f, const char *prefix)
{
    int k = 0;
    size_t len = strlen(prefix);
    for (int i = 0; i < ag_safetensors_count(f); i++)
        if (!strncmp(ag_safetensors_name(f, i), prefix, len) && ag_safetensors_name(f, i)[len] == '.') k++;
    return k;
}

/* A leaf of g with the stored tensor's shape and values. */
static inline ag_tensor *load_leaf(ag_graph *g, const ag_safetensors *f, const char *name, int requires_grad)
{
    int i = stored(f, name), nd = ag_safetensors_ndim(f, i), shape[AG_MAX_DIMS];
    cr_assert(nd >= 0 && nd <= AG_MAX_DIMS, "%s has %d axes", name, nd);
    for (int d = 0; d < nd; d++) shape[d] = (int)ag_safetensors_shape(f, i)[d];
    ag_tensor *t = ag_tensor_new(g, nd, shape);
    cr_assert_not_null(t, "%s: %s", name, ag_graph_error(g));
    char err[256] = "";
    cr_assert_eq(ag_safetensors_read_tensor(f, name, t, err, sizeof err), AG_OK, "%s", err);
    ag_set_requires_grad(t, requires_grad);
    return ag_set_name(t, name);
}

/* n stored ints (I64), which must be exactly n. */
static inline void load_ints(const ag_safetensors *f, const char *name, int *dst, size_t n)
{
    cr_assert_eq(ag_safetensors_numel(f, stored(f, name)), n, "%s: element count", name);
    char err[256] = "";
    cr_assert_eq(ag_safetensors_read_int(f, name, dst, n, err, sizeof err), AG_OK, "%s", err);
}

/* The stored F32 or F64 values as doubles, exactly as stored (not rounded
 * to ag_real): a reference.  *n gets the count; the caller frees them. */
static inline double *load_ref(const ag_safetensors *f, const char *name, size_t *n)
{
    int i = stored(f, name);
    const char *dt = ag_safetensors_dtype(f, i);
    int wide = !strcmp(dt, "F64");
    cr_assert(wide || !strcmp(dt, "F32"), "%s is %s, want F32 or F64", name, dt);
    *n = ag_safetensors_numel(f, i);
    double *v = malloc((*n ? *n : 1) * sizeof *v);
    cr_assert_not_null(v);
    const unsigned char *b = ag_safetensors_bytes(f, i);
    size_t width = wide ? 8 : 4;
    for (size_t k = 0; k < *n; k++) {
        uint64_t u = 0; /* little-endian, at any alignment */
        for (size_t j = 0; j < width; j++) u |= (uint64_t)b[width * k + j] << (8 * j);
        if (wide) {
            memcpy(&v[k], &u, sizeof v[k]);
        } else {
            uint32_t u32 = (uint32_t)u;
            float x;
            memcpy(&x, &u32, sizeof x);
            v[k] = x;
        }
    }
    return v;
}

/* The same for a tensor that must be F64. */
static inline double *load_f64(const ag_safetensors *f, const char *name, size_t *n)
{
    cr_assert_str_eq(ag_safetensors_dtype(f, stored(f, name)), "F64", "%s", name);
    return load_ref(f, name, n);
}

/* got (t's data or gradient) matches the stored tensor `name`, shape
 * included (a scalar t matches a stored [1]), every element within
 * abs_tol + rel_tol * |want|. */
static inline void expect_ref(const ag_safetensors *f, const char *name, const ag_tensor *t, const ag_real *got,
                              double abs_tol, double rel_tol)
{
    cr_assert_not_null(t, "%s: no tensor", name);
    cr_assert_not_null(got, "%s: no values (no gradient reached it?)", name);
    int i = stored(f, name), nd = ag_safetensors_ndim(f, i);
    if (t->ndim == 0) {
        cr_assert_eq(ag_safetensors_numel(f, i), 1, "%s: a scalar, stored with %zu elements", name, ag_safetensors_numel(f, i));
    } else {
        cr_assert_eq(t->ndim, nd, "%s: %d axes, stored %d", name, t->ndim, nd);
        for (int d = 0; d < nd; d++)
            cr_assert_eq((int64_t)t->shape[d], ag_safetensors_shape(f, i)[d], "%s: axis %d is %d, stored %lld", name, d,
                         t->shape[d], (long long)ag_safetensors_shape(f, i)[d]);
    }
    size_t n;
    double *want = load_ref(f, name, &n);
    cr_assert_eq(n, t->size, "%s: %zu values, stored %zu", name, t->size, n);
    expect_close(got, want, n, abs_tol, rel_tol, name);
    free(want);
}

/* The same against a stored F64 tensor (the fixtures of make_fixtures.py). */
static inline void expect_f64(const ag_safetensors *f, const char *name, const ag_tensor *t, const ag_real *got,
                              double abs_tol, double rel_tol)
{
    cr_assert_str_eq(ag_safetensors_dtype(f, stored(f, name)), "F64", "%s", name);
    expect_ref(f, name, t, got, abs_tol, rel_tol);
}

/* L = sum(y * w) for the fixture's random weights w, then backward: the
 * gradients stored as grad.<input> are those of this L. */
static inline void backward_weighted(ag_graph *g, ag_tensor *y, ag_tensor *w)
{
    cr_assert_not_null(y, "%s", ag_graph_error(g));
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, w));
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
}

/* ---- a whole model's training step against PyTorch -------------------------
 *
 * tests/reference/translator.py and gpt.py store their results in float32
 * (names without a suffix) and in float64 (suffix "64"), from the same
 * weights.  The float build compares with the float32 results, the double
 * build with the float64 ones, so each build is held to its own precision. */
#ifdef AG_DOUBLE
#define SUFFIX "64"
#else
#define SUFFIX ""
#endif

/* Tolerances.  PyTorch's own float32 results are within 3e-8 (absolute) of
 * its float64 ones on the translator; a float32 computation in another
 * order (attograd's) differs by as much again.
 *   loss:        1e-5 relative in float, 1e-10 in double;
 *   parameters:  |got - want| <= 1e-4 + 1e-4 |want| in float (the bound
 *                the parity contract asks), 1e-10 + 1e-9 |want| in double;
 *   gradients:   1e-6 + 1e-4 |want| in float (gradients are ~1e-3, so an
 *                absolute 1e-4 would say little), 1e-12 + 1e-9 |want| in
 *                double. */
#define LOSS_REL TOL(1e-10, 1e-5)
#define P_ABS TOL(1e-10, 1e-4)
#define P_REL TOL(1e-9, 1e-4)
#define G_ABS TOL(1e-12, 1e-6)
#define G_REL TOL(1e-9, 1e-4)

#endif
