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
 *   - the same step in bf16 products against the twin's step under
 *     torch.autocast("cpu", dtype=torch.bfloat16) (gpt_autocast.safetensors):
 *     within a bound in bf16 roundoffs, and closer to it than fp32 is;
 *   - the whole model against finite differences (double), tied and untied;
 *   - the sampler: greedy, top-k, the distribution it draws from, the same
 *     seed giving the same tokens, and its errors.
 *
 * Regenerate the fixture (tests/reference/README.md):
 *   build/gpt train --data tests/reference/tiny.tsv --out tests/reference/gpt_tiny.safetensors \
 *       --steps 20 --context 8 --hidden 16 --heads 2 --ffn 32 --layers 2 --batch 8 --quiet
 *   /usr/bin/python3 tests/reference/gpt.py step --model tests/reference/gpt_tiny.safetensors \
 *       --data tests/reference/tiny.tsv --out tests/reference/gpt_step.safetensors
 *   /usr/bin/python3 tests/reference/gpt.py autocast --model tests/reference/gpt_tiny.safetensors \
 *       --data tests/reference/tiny.tsv --out tests/reference/gpt_autocast.safetensors */
#include <float.h>
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

/* ---- one step in bf16 products against PyTorch's autocast -------------------- *
 *
 * tests/reference/gpt.py autocast took gpt_step's step (same checkpoint, same
 * batch) under torch.autocast("cpu", dtype=torch.bfloat16) and stored the
 * logits, loss, gradients, gradient norm and the weights after clipping and
 * Adam (gpt_autocast.safetensors, F32).  Both builds compare with it.
 *
 * Where the two differ.  attograd's bf16 precision rounds the operands of
 * linear and of the tied logits product, forward and backward, and returns
 * fp32.  Autocast (torch 1.13, CPU; gpt.py asserts these rules before
 * the step) runs linear and matmul in bf16 (the
 * attention's q k^T and p v among them) and returns bf16; the scale,
 * masked_fill, softmax and gelu that follow have no autocast rule, so they
 * run in their input's type, bf16; the residual adds promote back to fp32,
 * so layer norm and the residual stream stay fp32; cross_entropy is on the
 * fp32 list.  Its backward runs each op in its forward's type: the
 * gradients through those tensors are bf16, and each weight's gradient is
 * rounded to bf16 before it reaches the fp32 .grad.  Both round the same
 * weights, bit for bit, and (up to their inputs' small differences) the
 * same activations where attograd rounds an operand.  What autocast adds
 * are the extra roundings.
 *
 * The bound.  Each extra rounding moves what it rounds by at most u = 2^-8
 * relative.  To first order, if no later stage makes a relative error
 * grow (the layer norms rescale; each branch adds into a residual stream at
 * least its size: an assumption, not a theorem), the logits move by at most
 * u times the extra roundings on their longest path.  Per block: q|k|v,
 * the scores, the scale, the softmax and w_o's output in attention (5);
 * dense1's and dense2's outputs in the FFN (2) (p v's and gelu's outputs
 * both round: attograd rounds them as the next product's operands); then
 * the logits themselves: 2 x 7 + 1 = 15, so ||dz|| <= 15 u ||z||.  A
 * gradient's path is that forward and back again, the backward rounding
 * each of those ops' input gradients, plus the weight gradient's own
 * rounding: 2 x 15 + 1 = 31, ||dg|| <= 31 u ||g|| per parameter.  The loss:
 * cross-entropy's gradient for a token, p - onehot(y), has 1-norm at most
 * 2, so |dL| <= 2 max|dz|.  The key bias's gradient is 0 in exact
 * arithmetic (see the test above): rounding noise on both sides, held to
 * 1e-6 and not compared.
 *
 * fp32 products pass these bounds too: they bound, they do not tell the
 * precisions apart.  The second test does: attograd's bf16 shares
 * autocast's weight and operand roundings, fp32 shares none, so with
 * rounding errors as independent the expected ||bf16 - autocast||^2 is the
 * extra roundings' share alone and ||fp32 - autocast||^2 that plus the
 * shared ones': bf16 must be strictly closer, on the logits, on all the
 * gradients together and on the loss (where the shared roundings, the same
 * in every token, add up while the extra ones average out).  fp32 products
 * give a ratio of exactly 1 and fail. */

#define AUTOCAST "tests/reference/gpt_autocast.safetensors"
#define U_BF16 (1.0 / 256)

/* One step's results: the loss, the logits [B, T, V], the gradient norm,
 * and every parameter's gradient (unclipped) and value after clipping to 1
 * and one Adam step, in the store's order, parameter i at off[i]. */
typedef struct step_out {
    double loss, norm;
    ag_real *logits, *grad, *adam;
    size_t n_logits, off[64];
} step_out;

static void run_step(ag_precision p, const int *x, const int *y, int B, int T, step_out *o)
{
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_safetensors *ckpt;
    load_tiny(&m, s, &ckpt);
    cr_assert_lt(ag_store_count(s), 64);
    ag_graph *g = ag_graph_new();
    ag_graph_set_precision(g, p);
    ag_tensor *logits = ag_gpt_forward(g, &m, x, B, T), *loss = ag_cross_entropy(g, logits, y, -1, 0);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    o->loss = loss->data[0];
    o->n_logits = logits->size;
    o->logits = malloc(logits->size * sizeof *o->logits);
    memcpy(o->logits, logits->data, logits->size * sizeof *o->logits);
    size_t total = ag_store_numel(s);
    o->grad = malloc(total * sizeof *o->grad), o->adam = malloc(total * sizeof *o->adam);
    o->off[0] = 0;
    for (int i = 0; i < ag_store_count(s); i++) {
        ag_tensor *t = ag_store_at(s, i);
        memcpy(o->grad + o->off[i], t->grad, t->size * sizeof *o->grad);
        o->off[i + 1] = o->off[i] + t->size;
    }
    cr_assert_eq(ag_clip_grad_norm(s, 1.0, &o->norm), AG_OK);
    ag_optim *opt = ag_adam_new(s, ADAM_LR, 0.9, 0.999, 1e-8, 0, 0);
    cr_assert_eq(ag_optim_step(opt), AG_OK, "%s", ag_optim_error(opt));
    for (int i = 0; i < ag_store_count(s); i++)
        memcpy(o->adam + o->off[i], ag_store_at(s, i)->data, ag_store_at(s, i)->size * sizeof *o->adam);
    ag_optim_free(opt);
    ag_graph_free(g);
    ag_gpt_free(&m);
    ag_store_free(s);
    ag_safetensors_free(ckpt);
}

static void free_step(step_out *o) { free(o->logits), free(o->grad), free(o->adam); }

/* The fixture, its batch, and the step in precision p on that batch. */
static ag_safetensors *autocast_step(ag_precision p, step_out *o)
{
    ag_safetensors *f = open_fixture(AUTOCAST);
    int B = ag_safetensors_shape(f, stored(f, "batch.x"))[0], T = ag_safetensors_shape(f, stored(f, "batch.x"))[1];
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    load_ints(f, "batch.x", x, (size_t)B * T);
    load_ints(f, "batch.y", y, (size_t)B * T);
    run_step(p, x, y, B, T, o);
    free(x), free(y);
    return f;
}

/* sum of (a - b)^2 over n values (b NULL: of a^2); *max gets max |a - b| */
static double sq_dist(const ag_real *a, const double *b, size_t n, double *max)
{
    double s = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b ? b[i] : 0);
        s += d * d, m = fmax(m, fabs(d));
    }
    if (max) *max = m;
    return s;
}

/* One parameter's stored "<prefix>.<name>", its count checked against off. */
static double *param_ref(const ag_safetensors *f, const char *prefix, const char *name, const step_out *o, int i)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", prefix, name);
    size_t n;
    double *v = load_ref(f, key, &n);
    cr_assert_eq(n, o->off[i + 1] - o->off[i], "%s: element count", key);
    return v;
}

Test(gpt, bf16_step_within_bf16_roundoffs_of_pytorch_autocast)
{
    step_out bf;
    ag_safetensors *f = autocast_step(AG_PRECISION_BF16, &bf);
    size_t n;
    double *z = load_ref(f, "logits", &n), dz_max;
    cr_assert_eq(n, bf.n_logits);
    double dz = sqrt(sq_dist(bf.logits, z, n, &dz_max)), zn = sqrt(sq_dist(bf.logits, NULL, n, NULL));
    cr_assert_leq(dz, 15 * U_BF16 * zn, "logits: ||bf16 - autocast|| %.3g, bound 15 u ||z|| %.3g", dz, 15 * U_BF16 * zn);
    double want = scalar(f, "loss");
    cr_assert_leq(fabs(bf.loss - want), 2 * dz_max, "loss %.9g, autocast %.9g, bound 2 max|dz| %.3g", bf.loss, want,
                  2 * dz_max);
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_safetensors *ckpt;
    load_tiny(&m, s, &ckpt);
    double c_bf = fmin(1, 1 / (bf.norm + 1e-6)), c_ac = fmin(1, 1 / (scalar(f, "norm") + 1e-6));
    size_t flips = 0;
    for (int i = 0; i < ag_store_count(s); i++) {
        const char *name = ag_store_at(s, i)->name;
        const ag_real *gb = bf.grad + bf.off[i], *wb = bf.adam + bf.off[i];
        double *g = param_ref(f, "grad", name, &bf, i), *w = param_ref(f, "adam", name, &bf, i), gmax;
        size_t k = bf.off[i + 1] - bf.off[i];
        double d = sqrt(sq_dist(gb, g, k, NULL)), gn = sqrt(sq_dist(gb, NULL, k, &gmax));
        if (strstr(name, ".w_k.bias"))
            cr_assert_leq(gmax, 1e-6, "%s: gradient %g is not noise", name, gmax);
        else
            cr_assert_leq(d, 31 * U_BF16 * gn, "d%s: ||bf16 - autocast|| %.3g, bound 31 u ||g|| %.3g", name, d,
                          31 * U_BF16 * gn);
        /* Adam's first step moves a weight by lr g / (|g| + eps) of the
         * clipped g: where the two gradients agree in sign, the weights
         * agree to lr eps (1 / |c g_bf16| + 1 / |c g_autocast|), plus the
         * float rounding of the update and of w - update on both sides. */
        for (size_t j = 0; j < k; j++) {
            if (((double)gb[j] > 0) != (g[j] > 0) || gb[j] == 0 || g[j] == 0) {
                flips++;
                continue;
            }
            double tol = ADAM_LR * 1e-8 * (1 / fabs(c_bf * gb[j]) + 1 / fabs(c_ac * g[j])) +
                         (ADAM_LR + fabs(w[j])) * 8 * FLT_EPSILON;
            cr_assert_leq(fabs((double)wb[j] - w[j]), tol, "adam.%s[%zu]: %.9g, autocast %.9g", name, j,
                          (double)wb[j], w[j]);
        }
        free(g), free(w);
    }
    cr_log_info("bf16 against autocast: logits %.3g u ||z||, max %.3g; %zu gradients of another sign", dz / zn / U_BF16,
                dz_max, flips);
    free(z);
    free_step(&bf);
    ag_gpt_free(&m);
    ag_store_free(s);
    ag_safetensors_free(ckpt);
    ag_safetensors_free(f);
}

Test(gpt, bf16_step_is_closer_to_pytorch_autocast_than_fp32_is)
{
    step_out bf, fp;
    ag_safetensors *f = autocast_step(AG_PRECISION_BF16, &bf);
    ag_safetensors_free(autocast_step(AG_PRECISION_FP32, &fp));
    size_t n;
    double *z = load_ref(f, "logits", &n), mb, mf;
    double zb = sqrt(sq_dist(bf.logits, z, n, &mb)), zf = sqrt(sq_dist(fp.logits, z, n, &mf));
    double want = scalar(f, "loss"), lb = fabs(bf.loss - want), lf = fabs(fp.loss - want);
    /* every gradient but the key biases' (noise) in one norm */
    double gb = 0, gf = 0, gmb = 0, gmf = 0;
    ag_store *s = ag_store_new();
    ag_gpt m;
    ag_safetensors *ckpt;
    load_tiny(&m, s, &ckpt);
    for (int i = 0; i < ag_store_count(s); i++) {
        const char *name = ag_store_at(s, i)->name;
        if (strstr(name, ".w_k.bias")) continue;
        double *g = param_ref(f, "grad", name, &bf, i), x;
        size_t k = bf.off[i + 1] - bf.off[i];
        gb += sq_dist(bf.grad + bf.off[i], g, k, &x), gmb = fmax(gmb, x);
        gf += sq_dist(fp.grad + fp.off[i], g, k, &x), gmf = fmax(gmf, x);
        free(g);
    }
    gb = sqrt(gb), gf = sqrt(gf);
    cr_log_info("against autocast, bf16 / fp32: logits %.3g / %.3g (max %.3g / %.3g), gradients %.3g / %.3g (max "
                "%.3g / %.3g), loss %.3g / %.3g",
                zb, zf, mb, mf, gb, gf, gmb, gmf, lb, lf);
    cr_assert_lt(zb, zf, "logits: bf16 %.4g from autocast, fp32 %.4g", zb, zf);
    cr_assert_lt(gb, gf, "gradients: bf16 %.4g from autocast, fp32 %.4g", gb, gf);
    cr_assert_lt(lb, lf, "loss: bf16 %.4g from autocast, fp32 %.4g", lb, lf);
    free(z);
    free_step(&bf), free_step(&fp);
    ag_gpt_free(&m);
    ag_store_free(s);
    ag_safetensors_free(ckpt);
    ag_safetensors_free(f);
}
