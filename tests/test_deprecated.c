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

/* ag_norm is ag_layernorm: the same parameters, the same output. */
Test(deprecated, norm_is_layernorm)
{
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_norm old;
    ag_layernorm now;
    cr_assert_eq(ag_norm_init(&old, s, "old", 4), AG_OK);
    cr_assert_eq(ag_layernorm_init(&now, s, "now", 4), AG_OK);
    ag_tensor *x = ag_tensor_from(g, AG_SHAPE(2, 4), (ag_real[]){1, 2, 3, 5, -1, 0, 4, 2});
    ag_tensor *a = ag_norm_forward(g, &old, x), *b = ag_layernorm_forward(g, &now, x);
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
