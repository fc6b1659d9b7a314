/* tests/test_kernels_vs_ref.c: every op's fast kernels against its plain
 * reference (src/kernels/ against ops/, docs/kernels.md).
 *
 * The same case is built twice on the same inputs, once with
 * ag_set_kernels(AG_KERNELS_FAST) and once with AG_KERNELS_REFERENCE, and
 * its forward values and the gradients of its inputs (of L = sum(y w), w
 * fixed random) are compared within the op's row of `tols`.  The cases are
 * every op's gradient-check cases (the op table's, so an op added to the
 * table is walked too: without a row it must match to the bit, which an op
 * without a kernel does, running the same reference in both modes), then the wider
 * ones below: sizes that are not multiples of a tile or a vector, blocks
 * of rows with a rest, size-1 and broadcast axes, random shapes.  The
 * public op is what runs, so the comparison holds however an op reaches
 * its kernel. */
#include <stdlib.h>

#include "common.h"
#include "core/internal.h"
#include "kernels/kernels.h"

/* |fast - ref| <= abs + rel |ref| for every value (NaN against NaN, and
 * an infinity against the same one, agree).  0, 0: to the bit, where both
 * run the same operations in the same order.  Otherwise the fast kernel
 * adds in another order (lanes, blocks, fused multiply-adds, tiles) or
 * uses core/fastmath's exp, tanh and log (a few ulp in float). */
typedef struct tol {
    const char *op;
    double abs64, rel64, abs32, rel32;
} tol;

static const tol tols[] = {
    {"add", 0, 0, 0, 0},
    {"sub", 0, 0, 0, 0},
    {"mul", 0, 0, 0, 0},
    {"div", 1e-15, 1e-15, 1e-6, 1e-6},
    {"scale", 0, 0, 0, 0},
    {"shift", 0, 0, 0, 0},
    {"neg", 0, 0, 0, 0},
    {"exp", 1e-14, 1e-14, 1e-6, 1e-6},
    {"log", 1e-14, 1e-14, 1e-6, 1e-6},
    {"sqrt", 1e-15, 1e-15, 1e-6, 1e-6},
    {"tanh", 1e-14, 1e-14, 1e-6, 1e-6},
    {"relu", 0, 0, 0, 0},
    {"gelu", 1e-14, 1e-14, 1e-6, 1e-6},
    {"gelu_tanh", 1e-14, 1e-14, 1e-6, 1e-6},
    {"matmul", 1e-13, 1e-13, 2e-5, 2e-5},
    {"reshape", 0, 0, 0, 0},
    {"permute", 0, 0, 0, 0},
    {"concat", 0, 0, 0, 0},
    {"slice", 0, 0, 0, 0},
    {"sum", 1e-13, 1e-13, 1e-5, 1e-5},
    {"mean", 1e-13, 1e-13, 1e-5, 1e-5},
    {"max", 0, 0, 0, 0},
    {"softmax", 1e-14, 1e-13, 1e-6, 1e-5},
    {"log_softmax", 1e-13, 1e-13, 1e-5, 1e-5},
    {"masked_fill", 1e-14, 1e-13, 1e-6, 1e-5}, /* its cases end in a softmax */
    {"layer_norm", 1e-12, 1e-12, 1e-5, 1e-4},
    {"embedding", 0, 0, 0, 0},
    {"dropout", 0, 0, 0, 0},
    {"cross_entropy", 1e-13, 1e-13, 1e-5, 1e-5},
    {"linear", 1e-13, 1e-13, 2e-5, 2e-5},
    {"masked_softmax", 1e-14, 1e-13, 1e-6, 1e-5},
    {"index_add", 0, 0, 0, 0},
    {"attention", 1e-13, 1e-12, 2e-5, 1e-4},
    {"linear_add", 1e-13, 1e-13, 2e-5, 2e-5},
    {"linear_gelu", 1e-13, 1e-13, 2e-5, 2e-5},
    {"gelu_linear_add", 1e-13, 1e-13, 2e-5, 2e-5},
};

/* An op with no row: to the bit.  The ops without a kernel (expand,
 * repeat, argmax, topk, where, clamp, and a new op until it gets one) run
 * the same reference in both modes; a kernel that adds in another order
 * fails here, with the value that says how far off it is, until it has a
 * row of its own. */
static const tol to_the_bit = {"no row in tols: to the bit", 0, 0, 0, 0};

static const tol *tol_of(const char *op)
{
    for (size_t i = 0; i < sizeof tols / sizeof tols[0]; i++)
        if (strcmp(tols[i].op, op) == 0) return &tols[i];
    return &to_the_bit;
}

/* One build's forward values and input gradients. */
typedef struct outcome {
    size_t n[1 + AG_MAX_SRC];
    double *v[1 + AG_MAX_SRC]; /* y, then each input's gradient */
} outcome;

static double *copy(const ag_real *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++) d[i] = x ? (double)x[i] : 0;
    return d;
}

/* Case c built in mode `mode` on inputs drawn from seed (as opcheck draws
 * them), its gradient by backward from L = sum(y w) in mode `back`. */
static outcome run(const ag_op_case *c, ag_kernels mode, ag_kernels back, uint64_t seed)
{
    ag_set_kernels(mode);
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    cr_assert(s && g);
    ag_graph_seed(g, seed);
    ag_rng r;
    ag_rng_seed(&r, seed);
    ag_tensor *in[AG_MAX_SRC] = {0};
    for (int k = 0; k < c->n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        in[k] = ag_param(s, name, c->ndim[k], c->shape[k]);
        cr_assert_not_null(in[k]);
        for (size_t j = 0; j < in[k]->size; j++) {
            double v = c->lo + (c->hi - c->lo) * ag_rng_uniform(&r);
            if (v > -c->gap && v < c->gap) v = v < 0 ? -c->gap : c->gap;
            in[k]->data[j] = (ag_real)v;
        }
    }
    ag_tensor *y = c->build(g, in);
    cr_assert_not_null(y, "%s: %s", c->label, ag_graph_error(g));
    ag_real *w = malloc((y->size ? y->size : 1) * sizeof *w);
    cr_assert_not_null(w);
    for (size_t i = 0; i < y->size; i++) w[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    ag_tensor *loss = ag_sum_all(g, ag_mul(g, y, ag_tensor_from(g, y->ndim, y->shape, w)));
    ag_set_kernels(back);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s: %s", c->label, ag_graph_error(g));
    outcome o = {{y->size}, {copy(y->data, y->size)}};
    for (int k = 0; k < c->n_in; k++) o.n[1 + k] = in[k]->size, o.v[1 + k] = copy(in[k]->grad, in[k]->size);
    free(w);
    ag_graph_free(g);
    ag_store_free(s);
    ag_set_kernels(AG_KERNELS_FAST);
    return o;
}

static bool agree(double f, double r, double abs, double rel)
{
    if (isnan(f) || isnan(r)) return isnan(f) && isnan(r);
    if (isinf(f) || isinf(r)) return f == r;
    return fabs(f - r) <= abs + rel * fabs(r);
}

/* Case c of op `op` forward in mode `mode`, backward in `back`, against
 * the fast kernels throughout, within t. */
static void compare_modes(const char *op, const ag_op_case *c, const tol *t, uint64_t seed, ag_kernels mode,
                          ag_kernels back)
{
    double abs = TOL(t->abs64, t->abs32), rel = TOL(t->rel64, t->rel32);
    outcome f = run(c, AG_KERNELS_FAST, AG_KERNELS_FAST, seed), r = run(c, mode, back, seed);
    for (int k = 0; k <= c->n_in; k++) {
        cr_assert_eq(f.n[k], r.n[k]);
        for (size_t i = 0; i < f.n[k]; i++)
            cr_assert(agree(f.v[k][i], r.v[k][i], abs, rel),
                      "%s, %s: %s[%zu] fast %.17g, reference %.17g (diff %.3g; allowed %.3g + %.3g |ref|, %s)", op,
                      c->label, k == 0 ? "y" : "d input", i, f.v[k][i], r.v[k][i], fabs(f.v[k][i] - r.v[k][i]),
                      abs, rel, t == &to_the_bit ? t->op : "its row of tols");
        free(f.v[k]);
        free(r.v[k]);
    }
}

/* Case c of op `op`, the references against the kernels, within t. */
static void compare(const char *op, const ag_op_case *c, const tol *t, uint64_t seed)
{
    compare_modes(op, c, t, seed, AG_KERNELS_REFERENCE, AG_KERNELS_REFERENCE);
}

/* The ops to walk: all of them, or the one AG_CHECK_OP names (make
 * check-op OP=<name>, the quick loop for one op). */
static int first_op(void)
{
    const char *only = getenv("AG_CHECK_OP");
    if (!only || !only[0]) return 1;
    int op = ag_op_find(only);
    cr_assert_gt(op, 0, "AG_CHECK_OP=%s is no op of the table", only);
    return op;
}
static int end_op(int first) { return getenv("AG_CHECK_OP") && getenv("AG_CHECK_OP")[0] ? first + 1 : AG_OP_COUNT; }

Test(kernels_vs_ref, every_op_of_the_table_on_its_gradcheck_cases)
{
    int ops = 0, cases = 0, first = first_op();
    for (int op = first; op < end_op(first); op++) {
        const char *name = ag_op_name(op);
        const tol *t = tol_of(name);
        cr_assert_gt(ag_op_case_count(op), 0, "op %s has no cases to compare its kernels on", name);
        for (int i = 0; i < ag_op_case_count(op); i++, cases++) compare(name, &ag_op_table[op]->cases[i], t, 7 + i);
        ops++;
    }
    cr_assert_eq(ops, end_op(first) - first);
    cr_log_info("kernels_vs_ref: %d ops, %d cases, fast against reference", ops, cases);
}

/* What a forward saves serves either room's backward: a forward in one
 * mode and its backward in the other give the kernels' values within the
 * op's tolerance. */
Test(kernels_vs_ref, a_forward_in_one_mode_and_its_backward_in_the_other)
{
    int first = first_op();
    for (int op = first; op < end_op(first); op++) {
        const char *name = ag_op_name(op);
        const tol *t = tol_of(name);
        for (int i = 0; i < ag_op_case_count(op); i++) {
            const ag_op_case *c = &ag_op_table[op]->cases[i];
            compare_modes(name, c, t, 9 + i, AG_KERNELS_REFERENCE, AG_KERNELS_FAST);
            compare_modes(name, c, t, 9 + i, AG_KERNELS_FAST, AG_KERNELS_REFERENCE);
        }
    }
}

/* ---- wider cases: tiles and vectors with a rest, blocks of rows --------- */

static ag_tensor *mm(ag_graph *g, ag_tensor *const *in) { return ag_matmul(g, in[0], in[1]); }
static ag_tensor *mm_bt(ag_graph *g, ag_tensor *const *in) { return ag_matmul_bt(g, in[0], in[1]); }
static ag_tensor *linear(ag_graph *g, ag_tensor *const *in) { return ag__linear(g, in[0], in[1], in[2]); }
static ag_tensor *linear_add(ag_graph *g, ag_tensor *const *in)
{
    return ag__linear_add(g, in[0], in[1], in[2], in[3]);
}
static ag_tensor *linear_gelu(ag_graph *g, ag_tensor *const *in) { return ag__linear_gelu(g, in[0], in[1], in[2]); }
static ag_tensor *gelu_linear_add(ag_graph *g, ag_tensor *const *in)
{
    return ag__gelu_linear_add(g, in[0], in[1], in[2], in[3]);
}
static ag_tensor *norm(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], in[1], in[2], 1e-5); }
static ag_tensor *norm_plain(ag_graph *g, ag_tensor *const *in) { return ag_layer_norm(g, in[0], NULL, NULL, 1e-5); }
static ag_tensor *softmax(ag_graph *g, ag_tensor *const *in) { return ag_softmax(g, in[0]); }
static ag_tensor *log_softmax(ag_graph *g, ag_tensor *const *in) { return ag_log_softmax(g, in[0]); }
static ag_tensor *causal_softmax(ag_graph *g, ag_tensor *const *in)
{
    return ag__masked_softmax(g, in[0], 0.25, ag_causal_mask(g, in[0]->shape[1], in[0]->shape[2]), -INFINITY);
}
static ag_tensor *xent(ag_graph *g, ag_tensor *const *in)
{
    int rows = (int)(in[0]->size / (size_t)in[0]->shape[in[0]->ndim - 1]), *t = malloc((size_t)rows * sizeof *t);
    for (int i = 0; i < rows; i++) t[i] = i % 5 == 3 ? -100 : (i * 7) % in[0]->shape[in[0]->ndim - 1];
    ag_tensor *y = ag_cross_entropy(g, in[0], t, -100, 0.1);
    free(t);
    return y;
}
static ag_tensor *sum_rows(ag_graph *g, ag_tensor *const *in) { return ag_sum(g, in[0], -1, 0); }
static ag_tensor *mean_cols(ag_graph *g, ag_tensor *const *in) { return ag_mean(g, in[0], 0, 1); }
static ag_tensor *max_rows(ag_graph *g, ag_tensor *const *in) { return ag_max(g, in[0], -1, 1); }
static ag_tensor *dropout(ag_graph *g, ag_tensor *const *in) { return ag_dropout(g, in[0], 0.3); }
/* x read by two nodes of the op: the second backward adds into dx */
static ag_tensor *dropout_twice(ag_graph *g, ag_tensor *const *in)
{
    return ag_add(g, ag_dropout(g, in[0], 0.3), ag_dropout(g, in[0], 0.5));
}
static ag_tensor *heads_split(ag_graph *g, ag_tensor *const *in)
{
    return ag_permute(g, in[0], (const int[]){0, 2, 1, 3});
}
static ag_tensor *permute_twice(ag_graph *g, ag_tensor *const *in)
{
    return ag_add(g, heads_split(g, in), ag_transpose(g, ag_transpose(g, heads_split(g, in), 1, 3), 1, 3));
}
static ag_tensor *reshape_twice(ag_graph *g, ag_tensor *const *in)
{
    return ag_add(g, ag_reshape(g, in[0], AG_SHAPE(-1)), ag_reshape(g, in[0], AG_SHAPE(-1)));
}
static ag_tensor *attention_causal(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 0.25, ag_causal_mask(g, in[0]->shape[1], in[1]->shape[1]),
                               -INFINITY);
}
static ag_tensor *attention(ag_graph *g, ag_tensor *const *in)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 0.3, NULL, 0);
}

/* ---- long rows: the flash kernel (more than AG__FLASH_KEYS keys) ----------
 * Masks of every kind, made from the inputs' shapes q [B, T, H, D],
 * k [B, S, H, D]: causal; padding by valid lengths per sentence and per
 * query, one sentence or query with none; scattered 0s, 1s and NaNs per
 * head with whole rows 0; one value per query stretched over the keys
 * ([T, 1]); one row of keys per head ([1, H, 1, S]); keys up to t + 200
 * (cross-attention over a longer source); queries before 40 that see
 * nothing.  fill -inf (whose tiles past the last key seen are skipped) or
 * -1e9 (a row with every key masked is uniform). */
enum { FK = AG__FLASH_KEYS };

static ag_tensor *heads_with(ag_graph *g, ag_tensor *const *in, ag_tensor *mask, double fill)
{
    return ag__attention_heads(g, in[0], in[1], in[2], 1 / sqrt((double)in[0]->shape[3]), mask, fill);
}
static ag_tensor *mask_padding(ag_graph *g, ag_tensor *const *in, int per_query)
{
    int B = in[0]->shape[0], T = in[0]->shape[1], S = in[1]->shape[1], n = per_query ? B * T : B;
    int *len = malloc((size_t)n * sizeof *len);
    for (int i = 0; i < n; i++) len[i] = i == 1 ? 0 : S - 7 * i % S; /* entry 1: no key */
    ag_tensor *m = ag_padding_mask(g, len, B, per_query, T, S);
    free(len);
    return m;
}
static ag_tensor *mask_scattered(ag_graph *g, ag_tensor *const *in)
{
    int B = in[0]->shape[0], T = in[0]->shape[1], H = in[0]->shape[2], S = in[1]->shape[1];
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(B, H, T, S));
    ag_rng r;
    ag_rng_seed(&r, 77);
    for (size_t i = 0; i < m->size; i++) {
        uint64_t x = ag_rng_next(&r) % 16;
        size_t t = i / (size_t)S % (size_t)T;
        m->data[i] = t % 9 == 4 ? 0 : x < 7 ? 0 : x == 7 ? NAN : 1; /* NaN is not 0: kept */
    }
    return m;
}
static ag_tensor *mask_per_query(ag_graph *g, ag_tensor *const *in)
{
    int T = in[0]->shape[1];
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(T, 1));
    for (int t = 0; t < T; t++) m->data[t] = t % 5 != 2;
    return m;
}
static ag_tensor *mask_keys_per_head(ag_graph *g, ag_tensor *const *in)
{
    int H = in[0]->shape[2], S = in[1]->shape[1];
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(1, H, 1, S));
    for (int h = 0; h < H; h++)
        for (int s = 0; s < S; s++) m->data[h * S + s] = (s + 3 * h) % 4 != 0 && s < S - 20 * h;
    return m;
}
static ag_tensor *mask_shifted(ag_graph *g, ag_tensor *const *in, int shift)
{
    int T = in[0]->shape[1], S = in[1]->shape[1];
    ag_tensor *m = ag_tensor_new(g, AG_SHAPE(T, S));
    for (int t = 0; t < T; t++)
        for (int s = 0; s < S && s <= t + shift; s++) m->data[(size_t)t * S + s] = 1;
    return m;
}
/* a case's build: the heads with `mask` (made from g and in) and `fill` */
#define LONG_BUILD(name, mask, fill) \
    static ag_tensor *name(ag_graph *g, ag_tensor *const *in) { return heads_with(g, in, mask, fill); }
#define CAUSAL ag_causal_mask(g, in[0]->shape[1], in[1]->shape[1])
LONG_BUILD(long_causal, CAUSAL, -INFINITY)
LONG_BUILD(long_causal_1e9, CAUSAL, -1e9)
LONG_BUILD(long_plain, NULL, 0)
LONG_BUILD(long_padding, mask_padding(g, in, 0), -INFINITY)
LONG_BUILD(long_padding_1e9, mask_padding(g, in, 0), -1e9)
LONG_BUILD(long_padding_rows, mask_padding(g, in, 1), -INFINITY)
LONG_BUILD(long_scattered, mask_scattered(g, in), -INFINITY)
LONG_BUILD(long_scattered_1e9, mask_scattered(g, in), -1e9)
LONG_BUILD(long_per_query, mask_per_query(g, in), -INFINITY)
LONG_BUILD(long_keys_per_head, mask_keys_per_head(g, in), -INFINITY)
LONG_BUILD(long_shifted, mask_shifted(g, in, 200), -INFINITY)
LONG_BUILD(long_late, mask_shifted(g, in, -40), -INFINITY)
LONG_BUILD(long_late_1e9, mask_shifted(g, in, -40), -1e9)

/* q [B, T, H, D], k [B, S, H, D], v [B, S, H, Dv]; S = FK + 44: two
 * tiles of 128 keys and a rest (FK + 1 and FK: either side of the seam);
 * T = 70 or S: a block of 64 queries and a rest. */
#define LONG(label, B, T, S, H, D, Dv, fn)                                                                      \
    {                                                                                                             \
        "attention", { label, 3, {4, 4, 4}, {{B, T, H, D}, {B, S, H, D}, {B, S, H, Dv}}, -1, 1, 0, fn }        \
    }
static const struct {
    const char *op;
    ag_op_case c;
} longs[] = {
    LONG("long rows: causal, T = S = FK + 44, D 8, Dv 5", 1, FK + 44, FK + 44, 2, 8, 5, long_causal),
    LONG("long rows: causal, fill -1e9", 1, FK + 44, FK + 44, 2, 8, 5, long_causal_1e9),
    LONG("long rows: no mask, S = FK + 1 (above the seam)", 2, 70, FK + 1, 2, 12, 12, long_plain),
    LONG("rows at the seam: no mask, S = FK (the kernel with P)", 2, 70, FK, 2, 12, 12, long_plain),
    LONG("rows at the seam: causal, S = FK", 1, 70, FK, 2, 8, 8, long_causal),
    LONG("long rows: padding [B, 1, 1, S], a sentence with no key", 3, 70, FK + 44, 2, 8, 8, long_padding),
    LONG("long rows: padding, fill -1e9 (uniform rows)", 3, 70, FK + 44, 2, 8, 8, long_padding_1e9),
    LONG("long rows: padding per query [B, 1, T, S]", 2, 70, FK + 44, 2, 8, 8, long_padding_rows),
    LONG("long rows: scattered 0, 1, NaN [B, H, T, S], rows all 0", 2, 70, FK + 44, 2, 8, 6, long_scattered),
    LONG("long rows: scattered, fill -1e9", 2, 70, FK + 44, 2, 8, 6, long_scattered_1e9),
    LONG("long rows: a mask per query [T, 1] stretched over the keys", 2, 70, FK + 44, 2, 8, 8, long_per_query),
    LONG("long rows: keys per head [1, H, 1, S]", 2, 70, FK + 44, 3, 8, 8, long_keys_per_head),
    LONG("long rows: keys up to t + 200 (T 70 < S)", 2, 70, FK + 44, 2, 8, 8, long_shifted),
    LONG("long rows: queries before 40 see no key", 1, 140, FK + 1, 2, 8, 8, long_late),
    LONG("long rows: queries before 40 see no key, fill -1e9", 1, 140, FK + 1, 2, 8, 8, long_late_1e9),
};

/* Each in both modes, and forward in one, backward in the other (whose
 * backward, after a forward that kept no P, is the kernel's either way). */
Test(kernels_vs_ref, long_rows_every_mask)
{
    for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++) {
        const tol *t = tol_of(longs[i].op);
        compare(longs[i].op, &longs[i].c, t, 700 + i);
        compare_modes(longs[i].op, &longs[i].c, t, 700 + i, AG_KERNELS_REFERENCE, AG_KERNELS_FAST);
        compare_modes(longs[i].op, &longs[i].c, t, 700 + i, AG_KERNELS_FAST, AG_KERNELS_REFERENCE);
    }
}

/* The same on every instruction set the CPU has (the tiles' fill, max,
 * exps and products each have a clone per level). */
Test(kernels_vs_ref, long_rows_on_every_level)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512"};
    for (int l = 0; l < 3; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++)
            compare(longs[i].op, &longs[i].c, tol_of(longs[i].op), 800 + i);
    }
    ag__isa_force(NULL);
}

/* Dropout 0.2 (seed 9) on the kernel that keeps P, S keys from 1 to the
 * seam (FK): blocks of 16 queries (S <= 32) and of 64, one rest key, toy
 * heads' sizes (which head512 leaves to the general path); the causal
 * rule bottom-right, a padding mask (a sentence with no key), 4 query
 * heads over 2 (grouped-query) with the causal rule top-left.  q
 * [B, T, H, D], k [B, S, Hkv, D], v [B, S, Hkv, Dv]. */
static ag_tensor *dropped(ag_graph *g, ag_tensor *const *in, ag_tensor *mask, int causal)
{
    return ag__attention(g, in[0], in[1], in[2],
                         &(ag__attn_rule){.mask = mask, .scale = 1 / sqrt((double)in[0]->shape[3]),
                                          .fill = -INFINITY, .causal = causal, .dropout = 0.2, .seed = 9});
}
static ag_tensor *drop_causal(ag_graph *g, ag_tensor *const *in) { return dropped(g, in, NULL, AG__CAUSAL_BOTTOM_RIGHT); }
static ag_tensor *drop_padding(ag_graph *g, ag_tensor *const *in) { return dropped(g, in, mask_padding(g, in, 0), 0); }
static ag_tensor *drop_gqa(ag_graph *g, ag_tensor *const *in) { return dropped(g, in, NULL, AG__CAUSAL_DIAG); }
#define DROP(label, B, T, S, H, Hkv, fn)                                                                            \
    {                                                                                                             \
        label, 3, {4, 4, 4}, {{B, T, H, 8}, {B, S, Hkv, 8}, {B, S, Hkv, 5}}, -1, 1, 0, fn                         \
    }
#define DROPS(S, T)                                                                                               \
    DROP("dropout, causal bottom-right, S = " #S, 1, T, S, 2, 2, drop_causal),                                   \
        DROP("dropout, padding, S = " #S, 2, 9, S, 2, 2, drop_padding),                                          \
        DROP("dropout, 4 query heads over 2, causal, S = " #S, 1, T, S, 4, 2, drop_gqa)
static const ag_op_case drops[] = {DROPS(1, 1),    DROPS(8, 8),     DROPS(32, 32),
                                   DROPS(64, 70),  DROPS(255, 40),  DROPS(FK, FK)};

/* Case c's path in the fast mode (and that its heads fit), whatever
 * AG_KERNELS says (CI runs this file in the reference mode too). */
static const char *path_of(const ag_op_case *c)
{
    ag_set_kernels(AG_KERNELS_FAST);
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_tensor *in[3];
    for (int k = 0; k < 3; k++)
        in[k] = ag_param(s, (const char *[]){"q", "k", "v"}[k], c->ndim[k], c->shape[k]), ag_init_normal(in[k], 0, 1, 1);
    ag_tensor *y = c->build(g, in);
    cr_assert_not_null(y, "%s: %s", c->label, ag_graph_error(g));
    const char *p = ag_attention_path(y, NULL);
    ag_graph_free(g);
    ag_store_free(s);
    return p;
}

/* Each takes the kernel that keeps P, and draws what the reference
 * draws: in both modes, and forward in one, backward in the other. */
Test(kernels_vs_ref, dropout_on_the_kernel_that_keeps_p)
{
    const tol *t = tol_of("attention");
    for (size_t i = 0; i < sizeof drops / sizeof drops[0]; i++) {
        cr_assert_str_eq(path_of(&drops[i]), "P kept", "%s", drops[i].label);
        compare("attention", &drops[i], t, 900 + i);
        compare_modes("attention", &drops[i], t, 900 + i, AG_KERNELS_REFERENCE, AG_KERNELS_FAST);
        compare_modes("attention", &drops[i], t, 900 + i, AG_KERNELS_FAST, AG_KERNELS_REFERENCE);
    }
}

typedef struct wide {
    const char *op;
    ag_op_case c;
} wide;

static const wide wides[] = {
    {"matmul", {"[70, 300] @ [300, 50]: blocked, edge tiles", 2, {2, 2}, {{70, 300}, {300, 50}}, -1, 1, 0, mm}},
    {"matmul", {"[3, 37, 19] @ [1, 29, 19]^T broadcast", 2, {3, 3}, {{3, 37, 19}, {1, 29, 19}}, -1, 1, 0, mm_bt}},
    {"matmul", {"[1, 500] @ [500, 1]", 2, {2, 2}, {{1, 500}, {500, 1}}, -1, 1, 0, mm}},
    {"linear", {"x [37, 45], w [29, 45], b [29]", 3, {2, 2, 1}, {{37, 45}, {29, 45}, {29}}, -1, 1, 0, linear}},
    {"linear_add",
     {"x [2, 33, 70], w [65, 70], b [65], r", 4, {3, 2, 1, 3}, {{2, 33, 70}, {65, 70}, {65}, {2, 33, 65}}, -1, 1, 0,
      linear_add}},
    {"linear_gelu", {"x [2, 33, 70], w [300, 70], b [300]", 3, {3, 2, 1}, {{2, 33, 70}, {300, 70}, {300}}, -1, 1, 0,
                     linear_gelu}},
    {"gelu_linear_add",
     {"h [2, 33, 300], w [70, 300], b [70], r", 4, {3, 2, 1, 3}, {{2, 33, 300}, {70, 300}, {70}, {2, 33, 70}}, -1.5,
      1.5, 0, gelu_linear_add}},
    {"layer_norm", {"[67, 64] blocks of 16 and a rest", 3, {2, 1, 1}, {{67, 64}, {64}, {64}}, -2, 2, 0, norm}},
    {"layer_norm", {"[50, 130] edge lanes", 3, {2, 1, 1}, {{50, 130}, {130}, {130}}, -2, 2, 0, norm}},
    {"layer_norm", {"[5, 3, 7] no gain, no bias", 1, {3}, {{5, 3, 7}}, -2, 2, 0, norm_plain}},
    {"softmax", {"[33, 100]", 1, {2}, {{33, 100}}, -4, 4, 0, softmax}},
    {"softmax", {"[17, 7]", 1, {2}, {{17, 7}}, -4, 4, 0, softmax}},
    {"log_softmax", {"[33, 100]", 1, {2}, {{33, 100}}, -4, 4, 0, log_softmax}},
    {"masked_softmax", {"causal [3, 40, 40]", 1, {3}, {{3, 40, 40}}, -4, 4, 0, causal_softmax}},
    {"cross_entropy", {"[37, 65], ignored rows, smoothing", 1, {2}, {{37, 65}}, -4, 4, 0, xent}},
    {"sum", {"[37, 129] over rows", 1, {2}, {{37, 129}}, -1, 1, 0, sum_rows}},
    {"mean", {"[37, 129] over columns", 1, {2}, {{37, 129}}, -1, 1, 0, mean_cols}},
    {"max", {"[37, 129] over rows", 1, {2}, {{37, 129}}, -1, 1, 0, max_rows}},
    {"dropout", {"[1000]", 1, {1}, {{1000}}, -1, 1, 0, dropout}},
    {"dropout", {"[37, 29] twice: dx added", 1, {2}, {{37, 29}}, -1, 1, 0, dropout_twice}},
    {"permute", {"[3, 50, 4, 33] (0, 2, 1, 3): runs of 33", 1, {4}, {{3, 50, 4, 33}}, -1, 1, 0, heads_split}},
    {"permute", {"[2, 7, 3, 19] twice, strided runs: dx added", 1, {4}, {{2, 7, 3, 19}}, -1, 1, 0, permute_twice}},
    {"reshape", {"[37, 29] twice: dx added", 1, {2}, {{37, 29}}, -1, 1, 0, reshape_twice}},
    {"attention",
     {"toy heads: q, k, v [2, 32, 4, 16], causal", 3, {4, 4, 4}, {{2, 32, 4, 16}, {2, 32, 4, 16}, {2, 32, 4, 16}},
      -1, 1, 0, attention_causal}},
    {"attention",
     {"q [1, 70, 2, 8], k [1, 100, 2, 8], v [1, 100, 2, 5], causal", 3, {4, 4, 4},
      {{1, 70, 2, 8}, {1, 100, 2, 8}, {1, 100, 2, 5}}, -1, 1, 0, attention_causal}},
    {"attention",
     {"q [2, 9, 3, 12], k, v [2, 24, 3, 12], no mask", 3, {4, 4, 4}, {{2, 9, 3, 12}, {2, 24, 3, 12}, {2, 24, 3, 12}},
      -1, 1, 0, attention}},
};

/* Each in both modes, and forward in one, backward in the other. */
Test(kernels_vs_ref, wider_cases)
{
    for (size_t i = 0; i < sizeof wides / sizeof wides[0]; i++) {
        const tol *t = tol_of(wides[i].op);
        cr_assert_not_null(t, "%s", wides[i].op);
        compare(wides[i].op, &wides[i].c, t, 100 + i);
        compare_modes(wides[i].op, &wides[i].c, t, 100 + i, AG_KERNELS_REFERENCE, AG_KERNELS_FAST);
        compare_modes(wides[i].op, &wides[i].c, t, 100 + i, AG_KERNELS_FAST, AG_KERNELS_REFERENCE);
    }
}

/* Random shapes, from 1 up past two tiles or vectors on every axis. */
Test(kernels_vs_ref, random_shapes)
{
    ag_rng r;
    ag_rng_seed(&r, 2024);
    for (int trial = 0; trial < 12; trial++) {
        int M = 1 + (int)(ag_rng_uniform(&r) * 40), N = 1 + (int)(ag_rng_uniform(&r) * 70);
        int K = 1 + (int)(ag_rng_uniform(&r) * 90), B = 1 + (int)(ag_rng_uniform(&r) * 3);
        ag_op_case c = {"random [B, M, K] @ [K, N]", 2, {3, 2}, {{B, M, K}, {K, N}}, -1, 1, 0, mm};
        compare("matmul", &c, tol_of("matmul"), 300 + (uint64_t)trial);
        ag_op_case n = {"random [M, N] layer norm", 3, {2, 1, 1}, {{M, N}, {N}, {N}}, -2, 2, 0, norm};
        compare("layer_norm", &n, tol_of("layer_norm"), 400 + (uint64_t)trial);
        ag_op_case s = {"random [B, M, N] softmax", 1, {3}, {{B, M, N}}, -4, 4, 0, softmax};
        compare("softmax", &s, tol_of("softmax"), 500 + (uint64_t)trial);
        ag_op_case x = {"random [M, N] cross-entropy", 1, {2}, {{M, N}}, -4, 4, 0, xent};
        compare("cross_entropy", &x, tol_of("cross_entropy"), 600 + (uint64_t)trial);
    }
}
