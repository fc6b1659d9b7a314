/* tests/fuzz/fuzz_safetensors.c: libFuzzer target for the safetensors reader.
 *
 * Any bytes go to ag_safetensors_parse.  A rejected file must come back with a
 * status, a NULL result and a message; an accepted one is then walked the
 * way a program would walk it (every accessor, every value read as float
 * and as int, and a store load), so that a validation hole shows up as an
 * out-of-bounds read under ASan rather than as a wrong number somewhere.
 *
 *   make fuzz                       (tests/fuzz/fuzz.mk)
 *   build-fuzz/fuzz_safetensors build-fuzz/corpus/safetensors */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

/* A failed invariant: crash loudly so libFuzzer records the input. */
#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) __builtin_trap();                                                               \
    } while (0)

static volatile unsigned sink; /* keeps the byte reads from being optimised away */

/* Bytes per element of a dtype the reader accepted. */
static size_t dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } t[] = {{"BOOL", 1}, {"U8", 1}, {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
             {"I32", 4},  {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(d, t[i].name)) return t[i].size;
    __builtin_trap(); /* a dtype the reader should have refused */
}

static void walk(ag_safetensors *f)
{
    char err[512];
    int n = ag_safetensors_count(f);
    CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        const char *name = ag_safetensors_name(f, i), *dtype = ag_safetensors_dtype(f, i);
        CHECK(name && dtype);
        CHECK(ag_safetensors_find(f, name) == i); /* names are unique */
        int nd = ag_safetensors_ndim(f, i);
        CHECK(nd >= 0 && nd <= 64);
        const int64_t *shape = ag_safetensors_shape(f, i);
        size_t numel = 1;
        for (int k = 0; k < nd; k++) {
            CHECK(shape[k] >= 0);
            numel *= (size_t)shape[k];
        }
        CHECK(numel == ag_safetensors_numel(f, i));
        /* every byte of the tensor is inside the buffer: touch them all */
        const unsigned char *b = ag_safetensors_bytes(f, i);
        unsigned acc = 0;
        for (size_t k = 0; k < numel * dtype_size(dtype); k++) acc += b[k];
        sink += acc;
        if (numel > (1u << 20)) continue; /* a real file would have the bytes; keep runs fast */
        ag_real *v = malloc((numel ? numel : 1) * sizeof *v);
        int *iv = malloc((numel ? numel : 1) * sizeof *iv);
        CHECK(v && iv);
        ag_status st = ag_safetensors_read(f, name, v, numel, err, sizeof err);
        CHECK(st == AG_OK || st == AG_ERR_FORMAT);
        if (st == AG_OK) CHECK(!strcmp(dtype, "F32") || !strcmp(dtype, "F64"));
        st = ag_safetensors_read(f, name, v, numel + 1, err, sizeof err); /* the wrong count */
        CHECK(st != AG_OK);
        st = ag_safetensors_read_int(f, name, iv, numel, err, sizeof err);
        CHECK(st == AG_OK || st == AG_ERR_FORMAT);
        free(v);
        free(iv);
    }
    CHECK(ag_safetensors_name(f, n) == NULL && ag_safetensors_name(f, -1) == NULL);
    for (int i = 0; i < ag_safetensors_meta_count(f); i++) {
        const char *k = ag_safetensors_meta_key(f, i);
        CHECK(k && ag_safetensors_meta(f, k) != NULL);
    }

    /* a store that expects w [2, 3] and b [3]: loads only when both are there,
     * real-valued and of that shape; a failed load changes nothing */
    ag_store *s = ag_store_new();
    CHECK(s);
    ag_tensor *w = ag_param(s, "w", AG_SHAPE(2, 3));
    ag_tensor *bias = ag_param(s, "b", AG_SHAPE(3));
    CHECK(w && bias);
    ag_init_const(w, 0.5);
    ag_init_const(bias, 0.5);
    ag_status st = ag_store_load(s, f, err, sizeof err);
    if (st != AG_OK) {
        CHECK(err[0] != '\0');
        for (int k = 0; k < 6; k++) CHECK(w->data[k] == (ag_real)0.5);
        for (int k = 0; k < 3; k++) CHECK(bias->data[k] == (ag_real)0.5);
    }
    ag_store_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ag_safetensors *f = (ag_safetensors *)&sink;
    char err[512] = "";
    ag_status st = ag_safetensors_parse(data, size, &f, err, sizeof err);
    if (st != AG_OK) {
        CHECK(f == NULL);
        CHECK(st == AG_ERR_FORMAT || st == AG_ERR_NOMEM);
        CHECK(strncmp(err, "safetensors buffer: ", 20) == 0);
        return 0;
    }
    CHECK(f != NULL);
    walk(f);
    ag_safetensors_free(f);
    return 0;
}
