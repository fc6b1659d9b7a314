/* tests/test_threads.c: results do not depend on the thread count, the gemm
 * micro-kernels agree with each other, and a step allocates nothing after
 * the first whatever the count.
 *
 * The gemm sizes are chosen above the threshold where it splits its work
 * (~8M multiply-adds); the other tests lower the threshold of the other
 * kernels (src/core/threads.c, ~1M values) to 4K values, so that their threaded
 * paths really run on small cases.  (Criterion runs each test in a process
 * of its own: the setting goes with it.) */
#include "common.h"
#include "core/internal.h"

#include <string.h>

/* src/kernels/gemm.c: force a micro-kernel by name, NULL for the CPU's choice. */

Test(threads, the_count_is_set_clamped_and_read_back)
{
    cr_assert_eq(ag_get_threads(), 1, "one thread by default");
    ag_set_threads(3);
    cr_assert_eq(ag_get_threads(), 3);
    ag_set_threads(0);
    cr_assert_eq(ag_get_threads(), 1);
    ag_set_threads(-5);
    cr_assert_eq(ag_get_threads(), 1);
}

static ag_real *randoms(size_t n, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    ag_real *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
    return v;
}

/* C = beta C0 + op(A) op(B) with the current threads and kernel. */
static ag_real *product(int ta, int tb, int M, int N, int K, double beta, uint64_t seed)
{
    ag_real *A = randoms((size_t)M * K, seed), *B = randoms((size_t)K * N, seed + 1);
    ag_real *C = randoms((size_t)M * N, seed + 2);
    ag__gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (ag_real)beta, C, N);
    free(A), free(B);
    return C;
}

static const int shapes[][3] = {{200, 300, 150}, {37, 513, 700}, {130, 70, 1000}, {6, 1000, 1500}, {1000, 9, 1000}};

Test(threads, gemm_gives_the_same_bits_for_every_thread_count)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1, M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            ag_set_threads(1);
            ag_real *one = product(ta, tb, M, N, K, t == 3, 40 + s);
            for (int n = 2; n <= 3; n++) {
                ag_set_threads(n);
                ag_real *many = product(ta, tb, M, N, K, t == 3, 40 + s);
                cr_assert(memcmp(one, many, (size_t)M * N * sizeof(ag_real)) == 0,
                          "gemm ta=%d tb=%d %dx%dx%d: %d threads differ from 1", ta, tb, M, N, K, n);
                free(many);
            }
            free(one);
        }
    ag_set_threads(1);
}

/* Against a triple loop in double: within float rounding, every kernel. */
static void expect_near_reference(const ag_real *C, int ta, int tb, int M, int N, int K, uint64_t seed, const char *k)
{
    ag_real *A = randoms((size_t)M * K, seed), *B = randoms((size_t)K * N, seed + 1);
    double *want = malloc((size_t)M * N * sizeof *want);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += (double)(ta ? A[(size_t)p * M + i] : A[(size_t)i * K + p]) *
                     (double)(tb ? B[(size_t)j * K + p] : B[(size_t)p * N + j]);
            want[(size_t)i * N + j] = s;
        }
    char what[96];
    snprintf(what, sizeof what, "kernel %s ta=%d tb=%d %dx%dx%d", k, ta, tb, M, N, K);
    expect_close(C, want, (size_t)M * N, TOL(1e-12, 2e-5) * sqrt((double)K), 0, what);
    free(A), free(B), free(want);
}

/* Sizes for every path of the gemm: blocked, and a toy attention head's
 * (N <= 32, K <= 64, M <= 64, its own kernel on AVX-512: one vector per
 * row of C, or two from N = 17). */
static const int kernel_shapes[][3] = {{37, 130, 300}, {10, 10, 16}, {10, 16, 10}, {32, 16, 32}, {64, 16, 64},
                                       {7, 5, 33},      {32, 32, 16}, {13, 17, 40}, {64, 32, 64}, {5, 29, 3}};
enum { NSHAPES = sizeof kernel_shapes / sizeof kernel_shapes[0] };

Test(threads, every_gemm_kernel_agrees_within_rounding)
{
    const char *kernels[] = {"avx512", "avx2", "neon", "baseline"};
    const char *best = ag__gemm_kernel(NULL);
    ag_real *first[NSHAPES][8] = {{0}};
    for (int k = 0; k < 4; k++) {
        const char *got = ag__gemm_kernel(kernels[k]);
        if (strcmp(got, kernels[k])) continue; /* the CPU lacks it */
        for (int s = 0; s < NSHAPES; s++)
            for (int t = 0; t < 8; t++) {
                int ta = t & 1, tb = (t >> 1) & 1, beta = t >> 2, M = kernel_shapes[s][0], N = kernel_shapes[s][1],
                    K = kernel_shapes[s][2];
                ag_real *C = product(ta, tb, M, N, K, beta, 7 + t);
                if (!beta) expect_near_reference(C, ta, tb, M, N, K, 7 + t, got);
                /* the FMA kernels add the same products in the same order */
                if (!first[s][t]) first[s][t] = C;
                else {
                    if (strcmp(got, "baseline"))
                        cr_assert(memcmp(first[s][t], C, (size_t)M * N * sizeof(ag_real)) == 0,
                                  "kernel %s differs from the first FMA kernel (%dx%dx%d ta=%d tb=%d beta=%d)", got,
                                  M, N, K, ta, tb, beta);
                    free(C);
                }
            }
    }
    for (int s = 0; s < NSHAPES; s++)
        for (int t = 0; t < 8; t++) free(first[s][t]);
    cr_assert_str_eq(ag__gemm_kernel(NULL), best);
}

/* A block with every threaded kernel: linear, head attention (with its
 * dropout), layer norm, add, relu, softmax, cross-entropy.  Returns the loss
 * and keeps every gradient in grads[] (freed by the caller). */
typedef struct block {
    ag_store *s;
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
    ag_linear_layer out;
    ag_tensor *x;
} block;

static double run_block(block *b, int threads, double **grads)
{
    enum { B = 8, T = 64, C = 256, V = 300 };
    ag_set_threads(threads);
    ag__thread_min_work = 4096; /* every op of the block splits its work */
    ag_graph *g = ag_graph_new();
    ag_graph_seed(g, 5);
    ag_store_zero_grad(b->s);
    ag_tensor *mask = ag_causal_mask(g, T, T);
    ag_tensor *h = ag_add_norm(g, &b->norm, b->x, ag_mha_layer_forward(g, &b->mha, b->x, b->x, mask, -1e9, NULL), 0.1);
    h = ag_softmax(g, ag_relu(g, h));
    ag_tensor *logits = ag_linear_layer_forward(g, &b->out, h);
    int *targets = malloc(B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) targets[i] = (i * 7) % V;
    ag_tensor *loss = ag_cross_entropy(g, logits, targets, -1, 0.1);
    cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
    double l = loss->data[0];
    for (int i = 0; i < ag_store_count(b->s); i++) {
        ag_tensor *p = ag_store_at(b->s, i);
        grads[i] = malloc(p->size * sizeof(double));
        for (size_t j = 0; j < p->size; j++) grads[i][j] = p->grad[j];
    }
    free(targets);
    ag_graph_free(g);
    ag_set_threads(1);
    return l;
}

Test(threads, a_training_step_gives_the_same_bits_for_every_thread_count)
{
    block b = {0};
    b.s = ag_store_new();
    cr_assert_eq(ag_mha_layer_init(&b.mha, b.s, "mha", 256, 8, 1, 0.1, 1), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&b.norm, b.s, "norm", 256), AG_OK);
    cr_assert_eq(ag_linear_layer_init(&b.out, b.s, "out", 256, 300, 1, 2), AG_OK);
    b.x = ag_param(b.s, "x", AG_SHAPE(8, 64, 256));
    ag_init_uniform(b.x, -1, 1, 3);
    int n = ag_store_count(b.s);
    double *one[16], *two[16];
    cr_assert_leq(n, 16);
    double l1 = run_block(&b, 1, one), l2 = run_block(&b, 2, two);
    cr_assert(l1 == l2, "loss %.17g with 1 thread, %.17g with 2", l1, l2);
    for (int i = 0; i < n; i++) {
        ag_tensor *p = ag_store_at(b.s, i);
        cr_assert(memcmp(one[i], two[i], p->size * sizeof(double)) == 0, "gradient of %s differs", p->name);
        free(one[i]), free(two[i]);
    }
    ag_store_free(b.s);
}

Test(threads, a_step_after_the_first_allocates_nothing_with_two_threads)
{
    ag_set_threads(2);
    ag__thread_min_work = 4096;
    ag_store *s = ag_store_new();
    ag_mha_layer m;
    cr_assert_eq(ag_mha_layer_init(&m, s, "mha", 128, 4, 1, 0.1, 1), AG_OK);
    ag_tensor *x = ag_param(s, "x", AG_SHAPE(8, 128, 128));
    ag_init_uniform(x, -1, 1, 3);
    ag_graph *g = ag_graph_new();
    uint64_t before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 1) before = ag_alloc_count();
        ag_graph_reset(g);
        ag_tensor *y = ag_mha_layer_forward(g, &m, x, x, ag_causal_mask(g, 128, 128), -1e9, NULL);
        cr_assert_eq(ag_backward(g, ag_mean_all(g, ag_mul(g, y, y))), AG_OK, "%s", ag_graph_error(g));
        ag_store_zero_grad(s);
    }
    cr_assert_eq(ag_alloc_count(), before, "%llu allocations in steps 2 and 3",
                 (unsigned long long)(ag_alloc_count() - before));
    ag_graph_free(g);
    ag_store_free(s);
    ag_set_threads(1);
}

/* Clipping and the optimizers' updates split the parameters' values among
 * threads (src/nn/optim.c): the same bits as one thread, pieces cut inside
 * parameters included. */
static void optimizer_steps(int threads, int adam, ag_real **out, size_t *n_out)
{
    ag_set_threads(threads);
    ag__thread_min_work = 16;
    ag_store *s = ag_store_new();
    static const int sizes[] = {1000, 37, 5003, 1, 64};
    enum { NP = sizeof sizes / sizeof sizes[0] };
    for (int i = 0; i < NP; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        ag_tensor *p = ag_param(s, name, AG_SHAPE(sizes[i]));
        ag_init_uniform(p, -1, 1, 10 + (uint64_t)i);
    }
    ag_optim *o = adam ? ag_adam_new(s, 0.01, 0.9, 0.99, 1e-8, 0.01, 1) : ag_sgd_new(s, 0.1, 0.9, 0.01, 1);
    cr_assert_not_null(o);
    double norm;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < NP; i++) {
            ag_tensor *p = ag_store_at(s, i);
            ag_real *r = randoms(p->size, 100 + (uint64_t)(step * NP + i));
            memcpy(p->grad, r, p->size * sizeof(ag_real));
            free(r);
        }
        cr_assert_eq(ag_clip_grad_norm(s, 2.0, &norm), AG_OK);
        cr_assert_gt(norm, 2.0, "the clipping really scales");
        cr_assert_eq(ag_optim_step(o), AG_OK, "%s", ag_optim_error(o));
    }
    /* every value, gradient and state, in order */
    size_t total = ag_store_numel(s), k = 0;
    *out = malloc(total * (2 + (size_t)ag_optim_state_count(o)) * sizeof(ag_real));
    for (int i = 0; i < NP; i++) {
        ag_tensor *p = ag_store_at(s, i);
        memcpy(*out + k, p->data, p->size * sizeof(ag_real)), k += p->size;
        memcpy(*out + k, p->grad, p->size * sizeof(ag_real)), k += p->size;
        for (int w = 0; w < ag_optim_state_count(o); w++) {
            size_t n;
            ag_real *st = ag_optim_state(o, i, w, &n);
            memcpy(*out + k, st, n * sizeof(ag_real)), k += n;
        }
    }
    *n_out = k;
    ag_optim_free(o);
    ag_store_free(s);
    ag_set_threads(1);
}

Test(threads, clipping_and_optimizers_give_the_same_bits_for_every_thread_count)
{
    for (int adam = 0; adam <= 1; adam++) {
        ag_real *one, *many;
        size_t n1, n2;
        optimizer_steps(1, adam, &one, &n1);
        for (int t = 2; t <= 3; t++) {
            optimizer_steps(t, adam, &many, &n2);
            cr_assert_eq(n1, n2);
            cr_assert(memcmp(one, many, n1 * sizeof(ag_real)) == 0, "%s: %d threads differ from 1",
                      adam ? "adamw" : "sgd", t);
            free(many);
        }
        free(one);
    }
}

Test(threads, a_team_step_after_the_first_allocates_nothing)
{
    /* src/core/team.c: two workers on two threads, and the optimizer */
    ag_set_threads(2);
    ag__thread_min_work = 4096;
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    ag_seq2seq_config cfg = {.src_vocab = 20, .tgt_vocab = 30, .hidden = 16, .heads = 2, .ffn = 32, .layers = 2,
                             .max_len = 6, .dropout = 0.1};
    cr_assert_eq(ag_seq2seq_init(&m, s, &cfg, 1), AG_OK);
    enum { B = 8, L = 6 };
    int src[B * L], valid[B], tin[B * L], tout[B * L];
    for (int b = 0; b < B; b++) {
        valid[b] = 2 + b % 5;
        for (int t = 0; t < L; t++) {
            src[b * L + t] = t < valid[b] ? 4 + (b * 3 + t) % 16 : 0;
            tout[b * L + t] = t < 1 + b % 6 ? 4 + (b * 5 + t) % 26 : 0;
            tin[b * L + t] = t == 0 ? 1 : tout[b * L + t - 1];
        }
    }
    char err[256];
    ag_seq2seq_team *team = ag_seq2seq_team_new(&m, s, 2, err, sizeof err);
    cr_assert_not_null(team, "%s", err);
    ag_optim *o = ag_sgd_new(s, 0.1, 0.9, 0, 1);
    ag_graph *g = ag_graph_new();
    uint64_t before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 1) before = ag_alloc_count();
        ag_graph_reset(g);
        double loss, norm;
        cr_assert_eq(ag_seq2seq_team_step(team, g, src, valid, tin, tout, B, L, L, &loss), AG_OK, "%s",
                     ag_graph_error(g));
        cr_assert(isfinite(loss) && loss > 0);
        cr_assert_eq(ag_clip_grad_norm(s, 1.0, &norm), AG_OK);
        cr_assert_eq(ag_optim_step(o), AG_OK);
        ag_store_zero_grad(s);
    }
    cr_assert_eq(ag_alloc_count(), before, "%llu allocations in steps 2 and 3",
                 (unsigned long long)(ag_alloc_count() - before));
    ag_graph_free(g);
    ag_optim_free(o);
    ag_seq2seq_team_free(team);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    ag_set_threads(1);
}
