/* tests/test_gpt.c: the decoder-only GPT (src/nn/gpt.c) and its sampler.
 *
 *   - one training step against the PyTorch twin: tests/reference/gpt.py
 *     step loaded gpt_tiny.safetensors (written by `gpt train`: 20 steps on
 *     tiny.tsv, context 8, hidden 16, 2 heads, ffn 32, 2 layers, tied),
 *     took 4 windows, and stored the loss, every gradient, the gradient
 *     norm and every parameter after clipping to 1 and one Adam step (lr
 *     1e-3, betas 0.9/0.999, eps 1e-8), in float32 and in float64.  The
 *     float build compares with float32, the double build with float64,
 *     with the translator's parity tolerances;
 *   - the whole model against finite differences (double), tied and untied;
 *   - the sampler: greedy, top-k, the distribution it draws from, the same
 *     seed giving the same tokens, and its errors.
 *
 * Regenerate the fixture (tests/reference/README.md):
 *   build/gpt train --data tests/reference/tiny.tsv --out tests/reference/gpt_tiny.safetensors \
 *       --steps 20 --context 8 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --quiet
 *   /usr/bin/python3 tests/reference/gpt.py step --model tests/reference/gpt_tiny.safetensors \
 *       --data tests/reference/tiny.tsv --out tests/reference/gpt_step.safetensors */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define MODEL "tests/reference/gpt_tiny.safetensors"
#define FIXTURE "tests/reference/gpt_step.safetensors"
/* SUFFIX and the translator's parity tolerances: tests/fixture.h */
#define ADAM_LR 1e-3

static int meta(const ag_safetensors *f, const char *key)
{
    const char *v = ag_safetensors_meta(f, key);
    cr_assert_not_null(v, "the checkpoint has no metadata %s", key);
    return atoi(v);
}

/* The model gpt_tiny.safetensors describes, with its weights. */
static void load_tiny(ag_gpt *m, ag_store *s, ag_safetensors **ckpt)
{
    *ckpt = open_fixture(MODEL);
    const char *vocab = ag_safetensors_meta(*ckpt, "vocab"), *act = ag_safetensors_meta(*ckpt, "activation");
    cr_assert(vocab && act);
    int V = 1;
    for (const char *p = vocab; *p; p++) V += *p == ',';
    ag_gpt_config cfg = {.vocab = V, .context = meta(*ckpt, "context"), .hidden = meta(*ckpt, "hidden"),
                         .heads = meta(*ckpt, "heads"), .ffn = meta(*ckpt, "ffn"), .layers = meta(*ckpt, "layers"),
                         .untied = meta(*ckpt, "untied"),
                         .activation = !strcmp(act, "gelu_tanh") ? AG_ACT_GELU_TANH : AG_ACT_GELU};
    cr_assert_eq(ag_gpt_init(m, s, &cfg, 0), AG_OK, "%s", ag_store_error(s));
    char err[256] = "";
    cr_assert_eq(ag_store_load(s, *ckpt, err, sizeof err), AG_OK, "%s", err);
}

static double scalar(const ag_safetensors *f, const char *name)
{
    size_t n;
    double *v = load_ref(f, name, &n), x = v[0];
    cr_assert_eq(n, 1);
    free(v);
    return x;
}

Test(gpt, one_adam_step_matches_the_pytorch_twin)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_safetensors *ckpt, *f = open_fixture(FIXTURE);
    load_tiny(&m, s, &ckpt);
    int B = ag_safetensors_shape(f, stored(f, "batch.x"))[0], T = ag_safetensors_shape(f, stored(f, "batch.x"))[1];
    cr_assert_eq(T, m.cfg.context);
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    load_ints(f, "batch.x", x, (size_t)B * T);
    load_ints(f, "batch.y", y, (size_t)B * T);

    /* the loss and every gradient */
    ag_graph *g = ag_graph_new();
    ag_tensor *loss = ag_gpt_loss(g, &m, x, y, B, T);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    double want = scalar(f, "loss" SUFFIX);
    cr_assert_leq(fabs((double)loss->data[0] - want), LOSS_REL * want, "loss %.10g, want %.10g",
                  (double)loss->data[0], want);
    char name[160];
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *p = ag_store_at(s, i);
        snprintf(name, sizeof name, "grad" SUFFIX ".%s", p->name);
        expect_ref(f, name, p, p->grad, G_ABS, G_REL);
    }
    cr_assert_eq(count_stored(f, "grad" SUFFIX), ag_store_count(s), "the twin has other parameters");

    /* clipping to 1 and one Adam step */
    double norm, want_norm = scalar(f, "norm" SUFFIX);
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
    cr_assert_leq(fabs(norm - want_norm), LOSS_REL * want_norm, "norm %.10g, want %.10g", norm, want_norm);
    ag_optim *opt = ag_adam_new(s, ADAM_LR, 0.9, 0.999, 1e-8, 0, 0);
    size_t total = ag_store_numel(s), at = 0;
    ag_real *before = malloc(total * sizeof *before);
    for (int i = 0; i < ag_store_count(s); at += ag_store_at(s, i)->size, i++)
        memcpy(before + at, ag_store_at(s, i)->data, ag_store_at(s, i)->size * sizeof(ag_real));
    cr_assert_eq(ag_optim_step(opt), AG_OK, "%s", ag_optim_error(opt));
    at = 0;
    for (int i = 0; i < ag_store_count(s); at += ag_store_at(s, i)->size, i++) {
        ag_tensor *p = ag_store_at(s, i);
        snprintf(name, sizeof name, "adam" SUFFIX ".%s", p->name);
#ifndef AG_DOUBLE
        /* The key bias adds the same amount to every score of a query, which
         * the softmax ignores: its gradient is 0 in exact arithmetic and
         * float rounding noise here, as large as Adam's eps, so Adam's first
         * step moves it anywhere in [-lr, lr] (in PyTorch's float32 too).
         * Check what holds; the double build compares it like the rest. */
        if (strstr(p->name, ".w_k.bias")) {
            for (size_t k = 0; k < p->size; k++) {
                cr_assert_leq(fabs((double)p->grad[k]), 1e-6, "%s: gradient %g is not noise", p->name,
                              (double)p->grad[k]);
                cr_assert_leq(fabs((double)p->data[k] - (double)before[at + k]), ADAM_LR * (1 + 1e-6));
            }
            continue;
        }
#endif
        expect_ref(f, name, p, p->data, P_ABS, P_REL);
    }
    free(before), free(x), free(y);
    ag_optim_free(opt);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
    ag_safetensors_free(ckpt);
    ag_safetensors_free(f);
}

Test(gpt, parameters_have_the_twins_names_and_shapes)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_gpt_config cfg = {.vocab = 7, .context = 5, .hidden = 8, .heads = 2, .ffn = 12, .layers = 2, .untied = 1};
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 3), AG_OK, "%s", ag_store_error(s));
    static const struct {
        const char *name;
        int d0, d1;
    } want[] = {{"embedding.tokens.weight", 7, 8},  {"embedding.positions.weight", 5, 8},
                {"blocks.0.attention.w_q.weight", 8, 8}, {"blocks.1.attention.w_o.bias", 8, 0},
                {"blocks.1.norm1.weight", 8, 0},     {"blocks.0.ffn.dense1.weight", 12, 8},
                {"blocks.1.ffn.dense2.weight", 8, 12}, {"blocks.0.norm2.bias", 8, 0},
                {"norm.weight", 8, 0},               {"head.weight", 7, 8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ag_tensor *t = ag_store_find(s, want[i].name);
        cr_assert_not_null(t, "no parameter %s", want[i].name);
        cr_assert_eq(t->shape[0], want[i].d0, "%s", want[i].name);
        if (want[i].d1) cr_assert_eq(t->shape[1], want[i].d1, "%s", want[i].name);
    }
    /* 2 embeddings + 2 x (8 attention + 4 norm + 4 ffn) + 2 norm + head */
    cr_assert_eq(ag_store_count(s), 2 + 2 * 16 + 2 + 1);
    /* GPT-2's init: the residual projections are smaller */
    ag_tensor *wq = ag_store_find(s, "blocks.0.attention.w_q.weight"), *wo = ag_store_find(s, "blocks.0.attention.w_o.weight");
    double sq = 0, so = 0;
    for (size_t k = 0; k < wq->size; k++) sq += (double)wq->data[k] * wq->data[k], so += (double)wo->data[k] * wo->data[k];
    cr_assert_gt(sq, 2 * so, "w_q rms %g, w_o rms %g", sqrt(sq / 64), sqrt(so / 64));
    cr_assert_eq(ag_store_find(s, "blocks.0.attention.w_q.bias")->data[0], 0);
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* ---- the whole model against finite differences ------------------------------ */

typedef struct tiny {
    ag_store *s;
    ag_gpt m;
} tiny;

#ifdef AG_DOUBLE
static ag_tensor *build_loss(ag_graph *g, void *p)
{
    tiny *t = p;
    static const int x[] = {0, 3, 4, 1, 2, 2}, y[] = {3, 4, 1, 2, 2, 0};
    return ag_gpt_loss(g, &t->m, x, y, 2, 3);
}

static void gradcheck_model(int untied, ag_activation act)
{
    tiny t = {.s = ag_store_new()};
    ag_gpt_config cfg = {.vocab = 5, .context = 4, .hidden = 4, .heads = 2, .ffn = 6, .layers = 2, .activation = act,
                         .untied = untied};
    cr_assert_eq(ag_gpt_init(&t.m, t.s, &cfg, 9), AG_OK, "%s", ag_store_error(t.s));
    /* larger weights than GPT-2's 0.02, and norms off 1 and 0, so every term matters */
    for (int i = 0; i < ag_store_count(t.s); i++) ag_init_uniform(ag_store_at(t.s, i), -0.8, 0.8, 100 + (uint64_t)i);
    int n = ag_store_count(t.s);
    ag_tensor **in = malloc((size_t)n * sizeof *in);
    ag_gradcheck_result *r = malloc((size_t)n * sizeof *r);
    for (int i = 0; i < n; i++) in[i] = ag_store_at(t.s, i);
    ag_graph *g = ag_graph_new();
    ag_status st = ag_gradcheck(g, build_loss, &t, in, n, NULL, r);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        worst = worse_of(worst, r[i].max_abs_err);
        cr_expect_eq(r[i].failed, 0, "%s: %zu elements fail (max abs %.3g)", r[i].input->name, r[i].failed,
                     r[i].max_abs_err);
    }
    cr_assert_eq(st, AG_OK, "%s", ag_graph_error(g));
    cr_log_info("gpt untied %d activation %d: %d parameters, worst abs error %.3g", untied, (int)act, n, worst);
    free(in), free(r);
    ag_graph_free(g);
    ag_gpt_free(&t.m);
    ag_store_free(t.s);
}

Test(gpt, gradcheck_every_parameter_tied_gelu) { gradcheck_model(0, AG_ACT_GELU); }
Test(gpt, gradcheck_every_parameter_untied_gelu_tanh) { gradcheck_model(1, AG_ACT_GELU_TANH); }
#endif

Test(gpt, bad_configs_and_inputs_say_what_is_wrong)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_gpt_config cfg = {.vocab = 5, .context = 4, .hidden = 6, .heads = 4, .ffn = 6, .layers = 1};
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 0), AG_ERR_SHAPE);
    cr_assert_str_eq(ag_store_error(s), "gpt: hidden = 6 is not a multiple of heads = 4");
    cfg.heads = 2, cfg.layers = 0;
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 0), AG_ERR_ARG);
    cr_assert_str_eq(ag_store_error(s), "gpt: layers = 0, must be >= 1");
    cfg.layers = 1, cfg.dropout = 1;
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 0), AG_ERR_ARG);
    cr_assert_str_eq(ag_store_error(s), "gpt: dropout = 1 must be in [0, 1)");
    cfg.dropout = 0;
    cr_assert_eq(ag_gpt_init(&m, s, &cfg, 0), AG_OK, "%s", ag_store_error(s));
    ag_graph *g = ag_graph_new();
    static const int ids[5] = {0, 1, 2, 3, 4}, bad[2] = {0, 5};
    cr_assert_null(ag_gpt_forward(g, &m, ids, 1, 5));
    cr_assert_str_eq(ag_graph_error(g), "embedding: embedding_layer: T = 5 is longer than the 4 learned positions");
    ag_graph_reset(g);
    ag_tensor *logits = ag_gpt_forward(g, &m, ids, 1, 4);
    cr_assert_not_null(logits, "%s", ag_graph_error(g));
    expect_shape(logits, 1, 4, 5);
    ag_graph_reset(g);
    cr_assert_null(ag_gpt_forward(g, &m, bad, 1, 2));
    cr_assert_eq(ag_graph_status(g), AG_ERR_ARG, "%s", ag_graph_error(g));
    int out[4];
    ag_sample_opts o = {.temperature = 1};
    cr_assert_eq(ag_gpt_sample(g, &m, bad, 2, 2, &o, out), AG_ERR_ARG);
    cr_assert_eq(ag_gpt_sample(g, &m, ids, 0, 2, &o, out), AG_ERR_ARG);
    cr_assert_str_eq(ag_graph_error(g), "gpt_sample: the prompt is empty");
    o.temperature = -1;
    cr_assert_eq(ag_gpt_sample(g, &m, ids, 1, 2, &o, out), AG_ERR_ARG);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
}

/* ---- the causal model: a position never sees the future ------------------------ */

Test(gpt, changing_a_later_token_leaves_earlier_logits_unchanged)
{
    tiny t = {.s = ag_store_new()};
    ag_gpt_config cfg = {.vocab = 5, .context = 4, .hidden = 8, .heads = 2, .ffn = 8, .layers = 2};
    cr_assert_eq(ag_gpt_init(&t.m, t.s, &cfg, 4), AG_OK);
    for (int i = 0; i < ag_store_count(t.s); i++) ag_init_uniform(ag_store_at(t.s, i), -0.5, 0.5, 7 + (uint64_t)i);
    ag_graph *g = ag_graph_new();
    static const int a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 0, 0};
    ag_tensor *la = ag_gpt_forward(g, &t.m, a, 1, 4), *lb = ag_gpt_forward(g, &t.m, b, 1, 4);
    cr_assert(la && lb, "%s", ag_graph_error(g));
    for (int k = 0; k < 2 * 5; k++) cr_assert_eq(la->data[k], lb->data[k], "position %d", k / 5);
    int differ = 0;
    for (int k = 2 * 5; k < 4 * 5; k++) differ += la->data[k] != lb->data[k];
    cr_assert_gt(differ, 0);
    ag_graph_free(g);
    ag_gpt_free(&t.m);
    ag_store_free(t.s);
}

/* The causal masks on g: how many, and whether each is 1 exactly where s <= t. */
static int causal_masks(ag_graph *g, int T)
{
    int n = 0;
    for (int i = 0; i < ag_graph_node_count(g); i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        if (strcmp(t->name, "causal_mask") != 0) continue;
        n++;
        cr_assert(t->ndim == 2 && t->shape[0] == T && t->shape[1] == T, "mask %d", n);
        for (int q = 0; q < T; q++)
            for (int k = 0; k < T; k++) cr_assert_eq(t->data[q * T + k], k <= q, "mask [%d, %d]", q, k);
    }
    return n;
}

Test(gpt, causal_attention_is_a_rule_with_no_mask_tensor)
{
    tiny t = {.s = ag_store_new()};
    ag_gpt_config cfg = {.vocab = 5, .context = 4, .hidden = 8, .heads = 2, .ffn = 8, .layers = 3};
    cr_assert_eq(ag_gpt_init(&t.m, t.s, &cfg, 4), AG_OK);
    ag_graph *g = ag_graph_new();
    static const int ids[4] = {1, 2, 3, 4};
    cr_assert_not_null(ag_gpt_forward(g, &t.m, ids, 1, 4), "%s", ag_graph_error(g));
    cr_assert_not_null(ag_gpt_forward(g, &t.m, ids, 1, 4), "%s", ag_graph_error(g));
    cr_assert_eq(causal_masks(g, 4), 0, "3 layers, 2 forwards: the causal rule, no mask");
    ag_graph_free(g);
    ag_gpt_free(&t.m);
    ag_store_free(t.s);
}

/* How many nodes of op g holds. */
static int count_op(const ag_graph *g, int op)
{
    int n = 0;
    for (int i = 0; i < ag_graph_node_count(g); i++) n += ag_graph_node(g, i)->op == op;
    return n;
}

/* Up to 256 positions the GELU layers keep GELU's value and slope
 * (linear_gelu, linear_add); past it they keep only dense1's output
 * (linear, gelu_linear_add), one per layer: the seam, on both sides. */
Test(gpt, long_sequences_keep_less_for_gelu_and_the_seam_is_at_256)
{
    tiny t = {.s = ag_store_new()};
    ag_gpt_config cfg = {.vocab = 5, .context = 257, .hidden = 8, .heads = 2, .ffn = 16, .layers = 2,
                         .activation = AG_ACT_GELU};
    cr_assert_eq(ag_gpt_init(&t.m, t.s, &cfg, 4), AG_OK);
    int ids[257];
    for (int i = 0; i < 257; i++) ids[i] = i % 5;
    ag_graph *g = ag_graph_new();
    static const int Ts[2] = {256, 257};
    for (int k = 0; k < 2; k++) {
        ag_graph_reset(g);
        cr_assert_not_null(ag_gpt_forward(g, &t.m, ids, 1, Ts[k]), "%s", ag_graph_error(g));
        cr_assert_eq(count_op(g, AG_OP_GELU_LINEAR_ADD), k ? 2 : 0, "T %d", Ts[k]);
        cr_assert_eq(count_op(g, AG_OP_LINEAR_GELU), k ? 0 : 2, "T %d", Ts[k]);
    }
    ag_graph_free(g);
    ag_gpt_free(&t.m);
    ag_store_free(t.s);
}

/* ---- sampling -------------------------------------------------------------------- */

Test(gpt, sample_logits_greedy_top_k_and_its_distribution)
{
    double work[4];
    ag_rng r;
    ag_rng_seed(&r, 1);
    const ag_real l[4] = {1, 3, 3, 2};
    cr_assert_eq(ag_sample_logits(l, 4, 0, 0, &r, work), 1, "greedy: the first of the largest");
    for (int i = 0; i < 200; i++) {
        int v = ag_sample_logits(l, 4, 1, 2, &r, work); /* top-2: ids 1 and 2 only */
        cr_assert(v == 1 || v == 2, "top-k 2 drew %d", v);
    }
    /* logits (0, log 3): p = (1/4, 3/4); 20000 draws, 3 standard deviations = 0.009 */
    const ag_real two[2] = {0, (ag_real)log(3.0)};
    int ones = 0;
    for (int i = 0; i < 20000; i++) ones += ag_sample_logits(two, 2, 1, 0, &r, work);
    cr_assert(fabs(ones / 20000.0 - 0.75) < 0.009, "p(1) = %g, want 0.75", ones / 20000.0);
    /* temperature 2 flattens it: p ~ (1, sqrt 3), p(1) = 0.634 */
    ones = 0;
    for (int i = 0; i < 20000; i++) ones += ag_sample_logits(two, 2, 2, 0, &r, work);
    cr_assert(fabs(ones / 20000.0 - sqrt(3.0) / (1 + sqrt(3.0))) < 0.01, "p(1) = %g at temperature 2",
              ones / 20000.0);
    const ag_real masked[3] = {-INFINITY, NAN, 0};
    cr_assert_eq(ag_sample_logits(masked, 3, 1, 0, &r, work), 2, "only the finite logit can be drawn");
    const ag_real none[2] = {-INFINITY, NAN};
    cr_assert_eq(ag_sample_logits(none, 2, 1, 0, &r, work), -1);
    cr_assert_eq(ag_sample_logits(l, 0, 1, 0, &r, work), -1);
}

Test(gpt, the_same_seed_gives_the_same_tokens)
{
    tiny t = {.s = ag_store_new()};
    ag_gpt_config cfg = {.vocab = 6, .context = 4, .hidden = 8, .heads = 2, .ffn = 8, .layers = 1};
    cr_assert_eq(ag_gpt_init(&t.m, t.s, &cfg, 5), AG_OK);
    for (int i = 0; i < ag_store_count(t.s); i++) ag_init_uniform(ag_store_at(t.s, i), -1, 1, 70 + (uint64_t)i);
    ag_graph *g = ag_graph_new();
    static const int prompt[2] = {3, 1};
    int a[32], b[32], c[32];
    ag_sample_opts o = {.temperature = 1.0, .top_k = 0, .seed = 11};
    cr_assert_eq(ag_gpt_sample(g, &t.m, prompt, 2, 30, &o, a), AG_OK, "%s", ag_graph_error(g));
    cr_assert_eq(ag_gpt_sample(g, &t.m, prompt, 2, 30, &o, b), AG_OK);
    o.seed = 12;
    cr_assert_eq(ag_gpt_sample(g, &t.m, prompt, 2, 30, &o, c), AG_OK);
    cr_assert_eq(a[0], 3);
    cr_assert_eq(a[1], 1);
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "the same seed gave other tokens");
    cr_assert_neq(memcmp(a, c, sizeof a), 0, "seeds 11 and 12 gave the same 30 tokens");
    for (int i = 0; i < 32; i++) cr_assert(a[i] >= 0 && a[i] < 6);
    cr_assert(ag_graph_training(g), "sampling left the graph in eval mode");
    /* greedy continues with the argmax of the last position over the window */
    o.temperature = 0;
    cr_assert_eq(ag_gpt_sample(g, &t.m, prompt, 2, 5, &o, a), AG_OK);
    ag_graph_reset(g);
    ag_tensor *logits = ag_gpt_forward(g, &t.m, a + 3, 1, 4); /* the last 4 of 6 ids before a[6] */
    cr_assert_not_null(logits);
    double work[6];
    ag_rng r;
    ag_rng_seed(&r, 0);
    cr_assert_eq(a[6], ag_sample_logits(logits->data + 3 * 6, 6, 0, 0, &r, work));
    ag_graph_free(g);
    ag_gpt_free(&t.m);
    ag_store_free(t.s);
}
