/* op_table.c: the one list of primitive ops.  Adding an op is one enum line
 * in attograd_core.h, one file in ops/, and its declaration and table line
 * here. */
#include "core/internal.h"

/* Each defined in ops/<name>.c. */
extern const ag_op_desc ag_op_add;
extern const ag_op_desc ag_op_sub;
extern const ag_op_desc ag_op_mul;
extern const ag_op_desc ag_op_div;
extern const ag_op_desc ag_op_scale;
extern const ag_op_desc ag_op_shift;
extern const ag_op_desc ag_op_neg;
extern const ag_op_desc ag_op_exp;
extern const ag_op_desc ag_op_log;
extern const ag_op_desc ag_op_sqrt;
extern const ag_op_desc ag_op_tanh;
extern const ag_op_desc ag_op_relu;
extern const ag_op_desc ag_op_gelu;
extern const ag_op_desc ag_op_matmul;
extern const ag_op_desc ag_op_reshape;
extern const ag_op_desc ag_op_permute;
extern const ag_op_desc ag_op_concat;
extern const ag_op_desc ag_op_slice;
extern const ag_op_desc ag_op_sum;
extern const ag_op_desc ag_op_mean;
extern const ag_op_desc ag_op_max;
extern const ag_op_desc ag_op_softmax;
extern const ag_op_desc ag_op_log_softmax;
extern const ag_op_desc ag_op_masked_fill;
extern const ag_op_desc ag_op_layer_norm;
extern const ag_op_desc ag_op_embedding;
extern const ag_op_desc ag_op_dropout;
extern const ag_op_desc ag_op_cross_entropy;
extern const ag_op_desc ag_op_linear;
extern const ag_op_desc ag_op_masked_softmax;
extern const ag_op_desc ag_op_index_add;
extern const ag_op_desc ag_op_gelu_tanh;
extern const ag_op_desc ag_op_attention;
extern const ag_op_desc ag_op_linear_add;
extern const ag_op_desc ag_op_expand;
extern const ag_op_desc ag_op_repeat;
extern const ag_op_desc ag_op_argmax;
extern const ag_op_desc ag_op_topk;
extern const ag_op_desc ag_op_where;
extern const ag_op_desc ag_op_clamp;

static const ag_op_desc leaf = {.name = "leaf", .backward = NULL};

const ag_op_desc *const ag_op_table[] = {
    [AG_OP_LEAF] = &leaf,
    [AG_OP_ADD] = &ag_op_add,
    [AG_OP_SUB] = &ag_op_sub,
    [AG_OP_MUL] = &ag_op_mul,
    [AG_OP_DIV] = &ag_op_div,
    [AG_OP_SCALE] = &ag_op_scale,
    [AG_OP_SHIFT] = &ag_op_shift,
    [AG_OP_NEG] = &ag_op_neg,
    [AG_OP_EXP] = &ag_op_exp,
    [AG_OP_LOG] = &ag_op_log,
    [AG_OP_SQRT] = &ag_op_sqrt,
    [AG_OP_TANH] = &ag_op_tanh,
    [AG_OP_RELU] = &ag_op_relu,
    [AG_OP_GELU] = &ag_op_gelu,
    [AG_OP_MATMUL] = &ag_op_matmul,
    [AG_OP_RESHAPE] = &ag_op_reshape,
    [AG_OP_PERMUTE] = &ag_op_permute,
    [AG_OP_CONCAT] = &ag_op_concat,
    [AG_OP_SLICE] = &ag_op_slice,
    [AG_OP_SUM] = &ag_op_sum,
    [AG_OP_MEAN] = &ag_op_mean,
    [AG_OP_MAX] = &ag_op_max,
    [AG_OP_SOFTMAX] = &ag_op_softmax,
    [AG_OP_LOG_SOFTMAX] = &ag_op_log_softmax,
    [AG_OP_MASKED_FILL] = &ag_op_masked_fill,
    [AG_OP_LAYER_NORM] = &ag_op_layer_norm,
    [AG_OP_EMBEDDING] = &ag_op_embedding,
    [AG_OP_DROPOUT] = &ag_op_dropout,
    [AG_OP_CROSS_ENTROPY] = &ag_op_cross_entropy,
    [AG_OP_LINEAR] = &ag_op_linear,
    [AG_OP_MASKED_SOFTMAX] = &ag_op_masked_softmax,
    [AG_OP_INDEX_ADD] = &ag_op_index_add,
    [AG_OP_GELU_TANH] = &ag_op_gelu_tanh,
    [AG_OP_ATTENTION] = &ag_op_attention,
    [AG_OP_LINEAR_ADD] = &ag_op_linear_add,
    [AG_OP_EXPAND] = &ag_op_expand,
    [AG_OP_REPEAT] = &ag_op_repeat,
    [AG_OP_ARGMAX] = &ag_op_argmax,
    [AG_OP_TOPK] = &ag_op_topk,
    [AG_OP_WHERE] = &ag_op_where,
    [AG_OP_CLAMP] = &ag_op_clamp,
};
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
