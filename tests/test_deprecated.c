/* tests/test_deprecated.c: code written against the names this library
 * has renamed still compiles and behaves as the new names do (CHANGELOG.md,
 * "Deprecated").  Nothing else in the tree uses the old names. */
#include "common.h"
#include "tmpdir.h"

#include <string.h>

/* ag_st_* are ag_safetensors_*: a save and a load through the old names. */
Test(deprecated, safetensors_aliases)
{
    char err[256];
    char *dir = make_tmpdir("deprecated"), *path = join(dir, "old.safetensors");
    const ag_real v[3] = {1, 2, 3};
    ag_st_writer *w = ag_st_writer_new();
    cr_assert_not_null(w);
    cr_assert_eq(ag_st_add(w, "v", NULL, 1, (const int[]){3}, v), AG_OK);
    cr_assert_eq(ag_st_save(w, path, err, sizeof err), AG_OK, "%s", err);
    ag_st_writer_free(w);
    ag_st *f = NULL;
    cr_assert_eq(ag_st_load(path, &f, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_st_count(f), 1);
    cr_assert_str_eq(ag_st_name(f, 0), "v");
    cr_assert_eq(ag_st_numel(f, 0), 3);
    ag_st_free(f);
    free(path);
    rm_dir(dir);
}

/* ag_norm is ag_layer_norm_layer: the same parameters, the same output. */
Test(deprecated, norm_is_layernorm)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_norm old;
    ag_layer_norm_layer now;
    cr_assert_eq(ag_norm_init(&old, s, "old", 4), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&now, s, "now", 4), AG_OK);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 4), (ag_real[]){1, 2, 3, 5, -1, 0, 4, 2});
    ag_tensor *a = ag_norm_forward(g, &old, x), *b = ag_layer_norm_layer_forward(g, &now, x);
    cr_assert_eq(ag_graph_status(g), AG_OK, "%s", ag_graph_error(g));
    for (int i = 0; i < 8; i++) cr_assert_eq(a->data[i], b->data[i]);
    ag_graph_free(g);
    ag_store_free(s);
}

/* ag_optim_last_error still gives the reason a constructor failed. */
Test(deprecated, optim_last_error)
{
    cr_assert_null(ag_sgd_new(NULL, 0.1, 0, 0, 0));
    cr_assert(strstr(ag_optim_last_error(), "store is NULL"), "%s", ag_optim_last_error());
}

/* The layers' names before "_layer" (attograd_compat.h): each old type and
 * function makes and runs the same layer as the new name, value for value. */
Test(deprecated, layer_names)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_linear l_old;
    ag_linear_layer l_new;
    ag_layernorm n_old;
    ag_layer_norm_layer n_new;
    ag_mha m_old;
    ag_mha_layer m_new;
    ag_ffn f_old, f_old2;
    ag_ffn_layer f_new, f_new2;
    cr_assert_eq(ag_linear_init(&l_old, s, "l_old", 4, 3, 1, 7), AG_OK);
    cr_assert_eq(ag_linear_layer_init(&l_new, s, "l_new", 4, 3, 1, 7), AG_OK);
    cr_assert_eq(ag_layernorm_init(&n_old, s, "n_old", 4), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&n_new, s, "n_new", 4), AG_OK);
    cr_assert_eq(ag_mha_init(&m_old, s, "m", 4, 2, 1, 0, 7), AG_OK);
    m_new = m_old; /* the same parameters through the new name */
    cr_assert_eq(ag_ffn_init(&f_old, s, "f", 4, 8, 7), AG_OK);
    cr_assert_eq(ag_ffn_init_ex(&f_old2, s, "f2", 4, 8, AG_ACT_GELU, 7), AG_OK);
    f_new = f_old, f_new2 = f_old2;
    /* the same seed and sizes: the names differ, so copy the values over */
    memcpy(l_new.weight->data, l_old.weight->data, l_old.weight->size * sizeof *l_old.weight->data);
    memcpy(l_new.bias->data, l_old.bias->data, l_old.bias->size * sizeof *l_old.bias->data);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, 2, 4), (ag_real[]){1, 2, 3, 5, -1, 0, 4, 2});
    ag_tensor *pairs[][2] = {
        {ag_linear_forward(g, &l_old, x), ag_linear_layer_forward(g, &l_new, x)},
        {ag_layernorm_forward(g, &n_old, x), ag_layer_norm_layer_forward(g, &n_new, x)},
        {ag_mha_forward(g, &m_old, x, x, NULL, AG_MASK_NEG_INF, NULL),
         ag_mha_layer_forward(g, &m_new, x, x, NULL, AG_MASK_NEG_INF, NULL)},
        {ag_mha_forward_textbook(g, &m_old, x, x, NULL, AG_MASK_NEG_INF, NULL),
         ag_mha_layer_forward_textbook(g, &m_new, x, x, NULL, AG_MASK_NEG_INF, NULL)},
        {ag_ffn_forward(g, &f_old, x), ag_ffn_layer_forward(g, &f_new, x)},
        {ag_ffn_forward(g, &f_old2, x), ag_ffn_layer_forward(g, &f_new2, x)},
    };
    cr_assert_eq(ag_graph_status(g), AG_OK, "%s", ag_graph_error(g));
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (size_t i = 0; i < pairs[p][0]->size; i++)
            cr_assert_eq(pairs[p][0]->data[i], pairs[p][1]->data[i], "pair %zu, element %zu", p, i);
    ag_graph_free(g);
    ag_store_free(s);
}
