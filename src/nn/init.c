/* init.c: the initial values every layer can draw, by scheme (ag_init_opts):
 * one place that says which distribution a linear layer or an embedding
 * table gets, so that a model mixing layers draws one scheme throughout.
 * docs/init.md tabulates it.
 *
 * Invariant: every draw is seeded by (seed, parameter name), so a
 * parameter's initial value depends on neither the order layers are made
 * nor the scheme of any other parameter. */
#include "nn/nn_internal.h"

#include <math.h>

static const ag_init_opts zero_opts = {0};

ag_status ag__init_check(ag_store *s, const char *who, const ag_init_opts *o)
{
    if (!o) return AG_OK;
    if (o->scheme < AG_INIT_DEFAULT || o->scheme > AG_INIT_XAVIER)
        return ag__store_fail(s, AG_ERR_ARG, "%s: init scheme %d is not one of AG_INIT_DEFAULT (0) .. "
                              "AG_INIT_XAVIER (%d)", who, (int)o->scheme, (int)AG_INIT_XAVIER);
    if (o->scheme == AG_INIT_NORMAL && !(o->std > 0 && isfinite(o->std)))
        return ag__store_fail(s, AG_ERR_ARG, "%s: init AG_INIT_NORMAL needs std > 0, got %g", who, o->std);
    if (!(o->std >= 0 && isfinite(o->std)))
        return ag__store_fail(s, AG_ERR_ARG, "%s: init std = %g must be >= 0", who, o->std);
    if (o->layers < 0)
        return ag__store_fail(s, AG_ERR_ARG, "%s: init layers = %d must be >= 0", who, o->layers);
    return AG_OK;
}

/* GPT-2's standard deviation: 0.02 unless o gives one */
static double gpt2_std(const ag_init_opts *o) { return o->std > 0 ? o->std : 0.02; }

void ag__init_linear(ag_linear_layer *l, const ag_init_opts *o, ag_init_scheme dflt, bool residual, uint64_t seed)
{
    if (!o) o = &zero_opts;
    ag_init_scheme k = o->scheme == AG_INIT_DEFAULT ? dflt : o->scheme;
    uint64_t ws = ag_param_seed(seed, l->weight->name);
    uint64_t bs = l->bias ? ag_param_seed(seed, l->bias->name) : 0;
    switch (k) {
    case AG_INIT_XAVIER: ag_init_xavier_uniform(l->weight, ws); break;
    case AG_INIT_NORMAL: ag_init_normal(l->weight, 0, o->std, ws); break;
    case AG_INIT_GPT2: {
        /* the residual stream sums 2 L projections: scaling each by
         * 1/sqrt(2 L) keeps its variance at init independent of depth */
        double L = o->layers > 0 ? o->layers : 1;
        ag_init_normal(l->weight, 0, gpt2_std(o) / (residual ? sqrt(2 * L) : 1), ws);
        break;
    }
    default: {
        /* nn.Linear: kaiming_uniform(a = sqrt(5)) is U(-1/sqrt(in), 1/sqrt(in)),
         * and the bias draws from the same range */
        double b = 1 / sqrt((double)l->in);
        ag_init_uniform(l->weight, -b, b, ws);
        if (l->bias) ag_init_uniform(l->bias, -b, b, bs);
        return;
    }
    }
    if (l->bias) ag_init_const(l->bias, 0);
}

void ag__init_table(ag_tensor *t, const ag_init_opts *o, uint64_t seed)
{
    if (!t) return;
    if (!o) o = &zero_opts;
    double std = o->scheme == AG_INIT_NORMAL ? o->std : o->scheme == AG_INIT_GPT2 ? gpt2_std(o) : 1;
    ag_init_normal(t, 0, std, ag_param_seed(seed, t->name)); /* nn.Embedding: N(0, 1) */
}
