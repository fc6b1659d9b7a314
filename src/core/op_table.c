/* op_table.c: the table of primitive ops, indexed by their ids, made from
 * the one list of them, AG_OPS in attograd_core.h (which makes the enum of
 * their ids too).  Adding an op is its file in ops/ and its line (and
 * declaration) in attograd_core.h (docs/contributing.md). */
#include "core/internal.h"

#define DECLARE(name, ID) extern const ag_op_desc ag_op_##name;
AG_OPS(DECLARE)

static const ag_op_desc leaf = {.name = "leaf", .backward = NULL};

/* One entry per line of AG_OPS, at its id: the table is full by
 * construction (tests/check_op/test_op_list.sh deletes a line to see). */
#define ENTRY(name, ID) [AG_OP_##ID] = &ag_op_##name,
const ag_op_desc *const ag_op_table[] = {[AG_OP_LEAF] = &leaf, AG_OPS(ENTRY)};

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
