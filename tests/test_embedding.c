/* tests/test_embedding.c: rows of a table picked by ids (embedding), and
 * rows added into a table at indices (index_add, its adjoint). */
#include "common.h"
#include "core/internal.h"

static ag_tensor *table(ag_graph *g) /* weight [4, 3] = 0..11 */
{
    return ag_tensor_from(g, AG_SHAPE(4, 3), ((ag_real[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

Test(embedding, picks_rows)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *w = table(g);
    int ids[] = {2, 0, 2, 3};
    ag_tensor *y = ag_embedding(g, w, ids, AG_SHAPE(2, 2));
    expect_shape(y, 2, 2, 3);
    expect_close(y->data, ((double[]){6, 7, 8, 0, 1, 2, 6, 7, 8, 9, 10, 11}), 12, 0, 0, "y");
    ag_graph_free(g);
}

Test(embedding, one_id_gives_one_row)
{
    ag_graph *g = ag_graph_new();
    int id = 1;
    ag_tensor *y = ag_embedding(g, table(g), &id, 0, NULL);
    expect_shape(y, 3);
    expect_close(y->data, ((double[]){3, 4, 5}), 3, 0, 0, "y");
    ag_graph_free(g);
}

Test(embedding, repeated_ids_accumulate_and_ids_are_copied)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *w = table(g);
    ag_set_requires_grad(w, 1);
    int ids[] = {2, 0, 2, 2};
    ag_tensor *y = ag_embedding(g, w, ids, AG_SHAPE(4));
    ids[0] = ids[2] = ids[3] = 1; /* the op kept its own copy */
    ag_tensor *wt = ag_tensor_from(g, AG_SHAPE(4, 3), ((ag_real[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, wt))), AG_OK, "%s", ag_graph_error(g));
    /* row 2 gets rows 0, 2 and 3 of dy; row 0 gets row 1; rows 1 and 3 none */
    const double want[] = {4, 5, 6, 0, 0, 0, 1 + 7 + 10, 2 + 8 + 11, 3 + 9 + 12, 0, 0, 0};
    expect_close(w->grad, want, 12, 0, 0, "dweight");
    ag_graph_free(g);
}

Test(embedding, gradient_accumulates_into_a_parameter)
{
    ag_store *s = ag_store_new();
    ag_tensor *w = ag_param(s, "tok", AG_SHAPE(3, 2));
    ag_graph *g = ag_graph_new();
    int ids[] = {1, 1};
    for (int step = 0; step < 2; step++) {
        ag_graph_reset(g);
        cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_embedding(g, w, ids, AG_SHAPE(2)))), AG_OK);
    }
    expect_close(w->grad, ((double[]){0, 0, 4, 4, 0, 0}), 6, 0, 0, "dweight after two steps");
    ag_graph_free(g);
    ag_store_free(s);
}

/* The scatter-add, one clone per instruction set, gives the plain loop's
 * bits on every level: repeated ids, rows of vectors and a tail (C = 37). */
Test(embedding, scatter_add_is_the_plain_loop_on_every_level)
{
    static const char *const levels[] = {"baseline", "avx2", "avx512", "neon"};
    enum { V = 5, C = 37, N = 40 };
    int ids[N];
    ag_real dy[N * C], want[V * C] = {0};
    ag_rng r;
    ag_rng_seed(&r, 3);
    for (int p = 0; p < N; p++) ids[p] = (int)(ag_rng_next(&r) % V);
    for (int i = 0; i < N * C; i++) dy[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    for (int p = 0; p < N; p++)
        for (int c = 0; c < C; c++) want[ids[p] * C + c] += dy[p * C + c];
    for (int l = 0; l < 4; l++) {
        if (strcmp(ag__isa_force(levels[l]), levels[l]) != 0) continue; /* the CPU lacks it */
        ag_graph *g = ag_graph_new();
        ag_tensor *w = ag_tensor_new(g, AG_SHAPE(V, C));
        ag_set_requires_grad(w, 1);
        ag_tensor *y = ag_embedding(g, w, ids, AG_SHAPE(N));
        cr_assert(y && ag_backward_from(g, y, dy) == AG_OK, "%s", ag_graph_error(g));
        for (int i = 0; i < V * C; i++)
            cr_assert(memcmp(&w->grad[i], &want[i], sizeof want[i]) == 0, "%s: dweight[%d] = %a, the loop gives %a",
                      levels[l], i, (double)w->grad[i], (double)want[i]);
        ag_graph_free(g);
    }
    ag__isa_force(NULL);
}

Test(embedding, bad_ids_and_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *w = ag_tensor_new(g, AG_SHAPE(10, 4));
    int ids[] = {0, 9, 1, 12};
    cr_assert_null(ag_embedding(g, w, ids, AG_SHAPE(2, 2)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "embedding: id 12 at position 3 out of range [0, 10)");

    ag_graph_reset(g);
    w = ag_tensor_new(g, AG_SHAPE(10, 4));
    int neg[] = {-1};
    cr_assert_null(ag_embedding(g, w, neg, AG_SHAPE(1)));
    cr_assert_str_eq(ag_graph_error(g), "embedding: id -1 at position 0 out of range [0, 10)");

    ag_graph_reset(g);
    ag_tensor *w3 = ag_tensor_new(g, AG_SHAPE(2, 3, 4));
    cr_assert_null(ag_embedding(g, w3, ids, AG_SHAPE(1)));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "embedding: weight must be [V, C], got [2, 3, 4]");

    ag_graph_reset(g);
    w = ag_tensor_new(g, AG_SHAPE(10, 4));
    cr_assert_null(ag_embedding(g, w, NULL, AG_SHAPE(2)));
    cr_assert_str_eq(ag_graph_error(g), "embedding: ids is NULL for shape [2]");

    ag_graph_reset(g);
    w = ag_tensor_new(g, AG_SHAPE(10, 4));
    cr_assert_null(ag_embedding(g, w, ids, AG_SHAPE(1, 1, 1, 1, 1, 1))); /* 7 axes out */
    cr_assert_str_eq(ag_graph_error(g), "embedding: ids need 0..5 axes and a shape, got 6 axes");

    ag_graph_reset(g);
    cr_assert_null(ag_embedding(g, NULL, ids, AG_SHAPE(2)));
    cr_assert_str_eq(ag_graph_error(g), "embedding: input 0 is NULL");
    ag_graph_free(g);
}

Test(index_add, puts_rows_at_indices_and_sums_repeats)
{
    ag_graph *g = ag_graph_new();
    ag_tensor *x = table(g); /* [4, 3] = 0..11 */
    ag_set_requires_grad(x, 1);
    int idx[] = {3, 0, 3, 4};
    ag_tensor *y = ag_index_add(g, x, idx, 6);
    idx[0] = 1; /* the op kept its own copy */
    expect_shape(y, 6, 3);
    /* row 0 = x[1]; row 3 = x[0] + x[2]; row 4 = x[3]; rows 1, 2, 5 zero */
    expect_close(y->data, ((double[]){3, 4, 5, 0, 0, 0, 0, 0, 0, 6, 8, 10, 9, 10, 11, 0, 0, 0}), 18, 0, 0, "y");
    ag_tensor *wt = ag_tensor_new(g, AG_SHAPE(6, 3));
    for (int i = 0; i < 18; i++) wt->data[i] = (ag_real)(i + 1);
    cr_assert_eq(ag_backward(g, ag_sum_all(g, ag_mul(g, y, wt))), AG_OK, "%s", ag_graph_error(g));
    /* dx[i] = dy[idx[i]]: rows 3, 0, 3, 4 of wt */
    expect_close(x->grad, ((double[]){10, 11, 12, 1, 2, 3, 10, 11, 12, 13, 14, 15}), 12, 0, 0, "dx");
    ag_graph_free(g);
}

Test(index_add, undoes_embedding_of_distinct_rows)
{
    /* pack rows 1 and 3 of [4, 3] with embedding, unpack with index_add:
     * the same rows come back, the others are zero */
    ag_graph *g = ag_graph_new();
    int rows[] = {1, 3};
    ag_tensor *y = ag_index_add(g, ag_embedding(g, table(g), rows, AG_SHAPE(2)), rows, 4);
    expect_close(y->data, ((double[]){0, 0, 0, 3, 4, 5, 0, 0, 0, 9, 10, 11}), 12, 0, 0, "y");
    ag_graph_free(g);
}

Test(index_add, bad_indices_and_shapes_are_errors)
{
    ag_graph *g = ag_graph_new();
    int idx[] = {0, 5};
    cr_assert_null(ag_index_add(g, ag_tensor_new(g, AG_SHAPE(2, 3)), idx, 5));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "index_add: index 5 of row 1 out of range [0, 5)");

    ag_graph_reset(g);
    int neg[] = {-2};
    cr_assert_null(ag_index_add(g, ag_tensor_new(g, AG_SHAPE(1, 3)), neg, 5));
    cr_assert_str_eq(ag_graph_error(g), "index_add: index -2 of row 0 out of range [0, 5)");

    ag_graph_reset(g);
    cr_assert_null(ag_index_add(g, ag_tensor_new(g, AG_SHAPE(2, 3, 1)), idx, 6));
    cr_assert_eq(ag_graph_status(g), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_graph_error(g), "index_add: x must be [n, C], got [2, 3, 1]");

    ag_graph_reset(g);
    cr_assert_null(ag_index_add(g, ag_tensor_new(g, AG_SHAPE(2, 3)), NULL, 6));
    cr_assert_str_eq(ag_graph_error(g), "index_add: idx is NULL for 2 rows");

    ag_graph_reset(g);
    cr_assert_null(ag_index_add(g, ag_tensor_new(g, AG_SHAPE(2, 3)), idx, -1));
    cr_assert_str_eq(ag_graph_error(g), "index_add: -1 output rows");

    ag_graph_reset(g);
    cr_assert_null(ag_index_add(g, NULL, idx, 6));
    cr_assert_str_eq(ag_graph_error(g), "index_add: input 0 is NULL");
    ag_graph_free(g);
}

#ifdef AG_DOUBLE
Test(embedding, gradcheck) { expect_op_gradcheck("embedding"); }
Test(index_add, gradcheck) { expect_op_gradcheck("index_add"); }
#endif
