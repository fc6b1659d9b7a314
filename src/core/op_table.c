/* op_table.c: the one list of primitive ops.  Adding an op is its file in
 * ops/, its enum line (and declaration) in attograd_core.h, and its line in
 * AG_OPS here (docs/contributing.md). */
#include "core/internal.h"

/* The ops after the leaf, in the enum's order: X(name, ID) for ag_op_<name>,
 * defined in ops/<name>.c, at [AG_OP_<ID>].  A new op is one line at the
 * end, above the comment that closes the list. */
#define AG_OPS(X) \
    X(add, ADD) \
    X(sub, SUB) \
    X(mul, MUL) \
    X(div, DIV) \
    X(scale, SCALE) \
    X(shift, SHIFT) \
    X(neg, NEG) \
    X(exp, EXP) \
    X(log, LOG) \
    X(sqrt, SQRT) \
    X(tanh, TANH) \
    X(relu, RELU) \
    X(gelu, GELU) \
    X(matmul, MATMUL) \
    X(reshape, RESHAPE) \
    X(permute, PERMUTE) \
    X(concat, CONCAT) \
    X(slice, SLICE) \
    X(sum, SUM) \
    X(mean, MEAN) \
    X(max, MAX) \
    X(softmax, SOFTMAX) \
    X(log_softmax, LOG_SOFTMAX) \
    X(masked_fill, MASKED_FILL) \
    X(layer_norm, LAYER_NORM) \
    X(embedding, EMBEDDING) \
    X(dropout, DROPOUT) \
    X(cross_entropy, CROSS_ENTROPY) \
    X(linear, LINEAR) \
    X(masked_softmax, MASKED_SOFTMAX) \
    X(index_add, INDEX_ADD) \
    X(gelu_tanh, GELU_TANH) \
    X(attention, ATTENTION) \
    X(linear_add, LINEAR_ADD) \
    X(expand, EXPAND) \
    X(repeat, REPEAT) \
    X(argmax, ARGMAX) \
    X(topk, TOPK) \
    X(where, WHERE) \
    X(clamp, CLAMP) \
    X(linear_gelu, LINEAR_GELU) \
    X(gelu_linear_add, GELU_LINEAR_ADD) \
    /* the end of the list */

#define DECLARE(name, ID) extern const ag_op_desc ag_op_##name;
AG_OPS(DECLARE)

static const ag_op_desc leaf = {.name = "leaf", .backward = NULL};

#define ENTRY(name, ID) [AG_OP_##ID] = &ag_op_##name,
const ag_op_desc *const ag_op_table[] = {[AG_OP_LEAF] = &leaf, AG_OPS(ENTRY)};
_Static_assert(sizeof ag_op_table / sizeof ag_op_table[0] == AG_OP_COUNT,
               "the table must end at the last op id");

const char *ag_op_name(int op)
{
    if (op < 0 || op >= AG_OP_COUNT || !ag_op_table[op]) return "?";
    return ag_op_table[op]->name;
}

int ag_op_find(const char *name)
{
    for (int i = 0; name && i < AG_OP_COUNT; i++)
        if (ag_op_table[i] && strcmp(ag_op_table[i]->name, name) == 0) return i;
    return -1;
}

const char *ag_status_name(ag_status s)
{
    switch (s) {
    case AG_OK: return "ok";
    case AG_ERR_SHAPE: return "shape error";
    case AG_ERR_ARG: return "bad argument";
    case AG_ERR_NOMEM: return "out of memory";
    case AG_ERR_IO: return "i/o error";
    case AG_ERR_FORMAT: return "format error";
    case AG_ERR_STATE: return "bad state";
    case AG_ERR_NUMERIC: return "numeric error";
    }
    return "unknown status";
}
