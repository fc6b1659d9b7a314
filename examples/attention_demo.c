/* attention_demo: the two tutorials' worked examples, in attograd, on the
 * textbook attention path (ag_mha_layer_forward_textbook: one public op per step,
 * so that the graph picture shows every step of the formula).
 *
 *   1. The PyTorch tutorial's MultiHeadSelfAttention(d_model=64, num_heads=8)
 *      on a batch of 2 sentences of 4 tokens ("Are you OK ?"):
 *      out = LayerNorm(x + W_o(concat(heads))), with an optional mask filled
 *      with -1e9 where mask == 0.
 *   2. d2l.ai's MultiHeadAttention(num_hiddens=100, num_heads=5, dropout=0.5,
 *      no bias) in eval mode: queries of ones [2, 4, 100], keys = values of
 *      ones [2, 6, 100], valid_lens = [3, 2].
 *   3. Step by step, the article's 4 tokens of width 3: Q K^T, the scaled
 *      scores, softmax rows, the causal mask, and P V.
 *   4. The sinusoidal positional encodings, and a decoder block: causal
 *      self-attention, cross-attention over the encoder's output, FFN.
 *
 * Writes attention.dot (the graph of example 1's attention block) and
 * decoder.dot (example 4's decoder block) into the current directory, or
 * into DIR with --svg DIR (render them: dot -Tsvg attention.dot -o
 * attention.svg).  With --svg DIR it also draws SVG pictures into DIR:
 * tutorial_heads.svg (the 8 heads of example 1), d2l_masked.svg (example
 * 2's padding mask), causal.svg (example 3, with and without the causal
 * mask), mask.svg (the masks themselves), positions.svg and
 * position_curves.svg (example 4's encodings), and flash_tiles.svg (the
 * tiles causal attention at long rows skips).  Every heatmap of weights
 * uses the colour scale 0..1, and draws a cell masked where the mask is 0.
 *
 * Usage: attention_demo [--seed N] [--svg DIR] */
#include "attention_demo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(ag_graph *g, const char *where)
{
    if (ag_graph_status(g) == AG_OK) return 0;
    fprintf(stderr, "attention_demo: %s: %s\n", where, ag_graph_error(g));
    return 1;
}

/* DIR/name, or name without DIR (NULL when the path is too long). */
const char *demo_out_path(const char *dir, const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s", dir ? dir : ".", name);
    return n > 0 && (size_t)n < len ? buf : NULL;
}

/* DIR/name, or NULL when no --svg DIR was given (or the path is too long). */
const char *demo_svg_path(const char *dir, const char *name, char *buf, size_t len)
{
    if (!dir) return NULL;
    int n = snprintf(buf, len, "%s/%s", dir, name);
    return n > 0 && (size_t)n < len ? buf : NULL;
}

int demo_report(ag_status st, const char *path, const char *err)
{
    if (st != AG_OK) {
        fprintf(stderr, "attention_demo: %s\n", err);
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}

static int tutorial(uint64_t seed, const char *svg_dir)
{
    printf("== 1. PyTorch tutorial: MultiHeadSelfAttention(d_model=64, num_heads=8) ==\n");
    enum { B = 2, T = 4, C = 64, H = 8 };
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
    int rc = 1;
    if (!s || !g || ag_mha_layer_init(&mha, s, "mha", C, H, 1, 0.0, seed) != AG_OK ||
        ag_layer_norm_layer_init(&norm, s, "layer_norm", C) != AG_OK) {
        fprintf(stderr, "attention_demo: could not make the module: %s\n", ag_store_error(s));
        goto done;
    }
    ag_graph_set_training(g, 0);
    /* x: 2 sentences x 4 tokens ("Are", "you", "OK", "?"), each a random
     * 64-d vector standing in for an embedding */
    ag_tensor *x = ag_set_name(ag_tensor_new(g, AG_SHAPE(B, T, C)), "x");
    if (x) ag_init_normal(x, 0, 1, seed + 1);
    ag_tensor *w = NULL;
    ag_tensor *out = ag_add_norm(g, &norm, x, ag_mha_layer_forward_textbook(g, &mha, x, x, NULL, -1e9, &w), 0);
    if (check(g, "self-attention")) goto done;
    char s1[64], s2[64], s3[64];
    printf("input shape: %s\noutput shape: %s\nattention weights shape: %s\n", ag_shape_str(x, s1, sizeof s1),
           ag_shape_str(out, s2, sizeof s2), ag_shape_str(w, s3, sizeof s3));
    printf("attention weights, sentence 0, head 0 (rows sum to 1):\n");
    for (int t = 0; t < T; t++) {
        for (int u = 0; u < T; u++) printf(" %7.4f", (double)w->data[t * T + u]);
        printf("\n");
    }
    char err[512], path[4096];
    const char *tokens[T] = {"Are", "you", "OK", "?"};
    const char *file = demo_svg_path(svg_dir, "tutorial_heads.svg", path, sizeof path);
    if (file && demo_report(ag_svg_attention(file, "PyTorch tutorial: 8 heads of self-attention, sentence 0 (random weights)",
                                     w, 0, tokens, tokens, err, sizeof err),
                    file, err))
        goto done;
    /* the same with a mask: token 3 ("?") hidden from every query */
    ag_tensor *mask = ag_tensor_new(g, AG_SHAPE(1, 1, 1, T));
    if (mask) ag_init_const(mask, 1), mask->data[T - 1] = 0;
    ag_tensor *wm = NULL;
    ag_add_norm(g, &norm, x, ag_mha_layer_forward_textbook(g, &mha, x, x, mask, -1e9, &wm), 0);
    if (check(g, "masked self-attention")) goto done;
    printf("with masked_fill(mask == 0, -1e9) on key 3, sentence 0, head 0:\n");
    for (int t = 0; t < T; t++) {
        for (int u = 0; u < T; u++) printf(" %7.4f", (double)wm->data[t * T + u]);
        printf("\n");
    }
    rc = 0;
done:
    ag_graph_free(g);
    ag_store_free(s);
    return rc;
}

static int d2l(uint64_t seed, const char *svg_dir)
{
    printf("\n== 2. d2l.ai: MultiHeadAttention(num_hiddens=100, num_heads=5, dropout=0.5), eval ==\n");
    enum { B = 2, T = 4, S = 6, C = 100, H = 5 };
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_mha_layer mha;
    int rc = 1;
    if (!s || !g || ag_mha_layer_init(&mha, s, "attention", C, H, 0, 0.5, seed) != AG_OK) goto done;
    ag_graph_set_training(g, 0); /* eval: dropout off */
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(B, T, C)), *kv = ag_tensor_new(g, AG_SHAPE(B, S, C));
    ag_init_const(q, 1), ag_init_const(kv, 1);
    const int valid_lens[B] = {3, 2};
    ag_tensor *mask = ag_padding_mask(g, valid_lens, B, 0, T, S);
    ag_tensor *w = NULL;
    ag_tensor *out = ag_mha_layer_forward_textbook(g, &mha, q, kv, mask, -1e6, &w);
    if (check(g, "d2l attention")) goto done;
    char s1[64], s2[64], s3[64];
    printf("queries %s, keys/values %s, valid_lens [3, 2]\n", ag_shape_str(q, s1, sizeof s1),
           ag_shape_str(kv, s2, sizeof s2));
    printf("output shape: %s\n", ag_shape_str(out, s3, sizeof s3));
    printf("attention weights, sentence 0 / 1, head 0, query 0: ");
    for (int b = 0; b < B; b++) {
        printf("[");
        for (int u = 0; u < S; u++) printf("%s%.3f", u ? " " : "", (double)w->data[(size_t)b * H * T * S + u]);
        printf("] ");
    }
    printf("\n");
    /* head 0 of both sentences side by side: keys past valid_lens get 0 */
    char err[512], path[4096];
    const char *file = demo_svg_path(svg_dir, "d2l_masked.svg", path, sizeof path);
    if (file) {
        ag_real both[B * T * S], masks[B * T * S];
        for (int b = 0; b < B; b++) {
            memcpy(both + b * T * S, w->data + (size_t)b * H * T * S, sizeof(ag_real) * T * S);
            for (int t = 0; t < T; t++) memcpy(masks + (b * T + t) * S, mask->data + b * S, sizeof(ag_real) * S);
        }
        const char *titles[B] = {"sentence 0, valid_lens 3", "sentence 1, valid_lens 2"};
        ag_heatmap_spec spec = {.title = "d2l.ai: head 0, queries of ones over 6 keys, padding masked",
                                .rows = T, .cols = S, .panels = B, .panel_titles = titles, .w = both,
                                .mask = masks, .mask_panels = B};
        if (demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err)) goto done;
    }
    rc = 0;
done:
    ag_graph_free(g);
    ag_store_free(s);
    return rc;
}

static int step_by_step(const char *svg_dir)
{
    printf("\n== 3. Step by step: 4 tokens, width 3 ==\n");
    ag_graph *g = ag_graph_new();
    int rc = 1;
    if (!g) return 1;
    /* Q = K = V = X: each token a 3-d vector */
    const ag_real X[12] = {1, 0, 1, 0, 2, 0, 1, 1, 0, 0, 1, 2};
    ag_tensor *q = ag_tensor_from(g, AG_SHAPE(4, 3), X), *k = q, *v = q;
    ag_tensor *qk = ag_matmul(g, q, ag_transpose(g, k, 0, 1));
    ag_tensor *scaled = ag_scale(g, qk, 1 / sqrt(3.0));
    ag_tensor *p = ag_softmax(g, scaled);
    ag_tensor *causal = ag_causal_mask(g, 4, 4);
    ag_tensor *filled = ag_masked_fill(g, scaled, causal, AG_MASK_NEG_INF);
    ag_tensor *pc = ag_softmax(g, filled);
    ag_tensor *pv = ag_matmul(g, p, v), *pcv = ag_matmul(g, pc, v);
    if (check(g, "step by step")) goto done;
    ag_tensor_print(stdout, q, "X (= Q = K = V)");
    ag_tensor_print(stdout, qk, "Q K^T: token-to-token affinity");
    ag_tensor_print(stdout, scaled, "Q K^T / sqrt(3): scaled scores");
    ag_tensor_print(stdout, p, "softmax rows: attention weights");
    for (int t = 0; t < 4; t++) {
        double sum = 0;
        for (int u = 0; u < 4; u++) sum += (double)p->data[t * 4 + u];
        printf("  row %d sums to %.6f\n", t, sum);
    }
    ag_tensor_print(stdout, causal, "causal mask (1 = may attend)");
    ag_tensor_print(stdout, filled, "scores + M: masked_fill(scores, mask, -inf)");
    ag_tensor_print(stdout, pc, "causal softmax: the upper triangle is zero");
    ag_tensor_print(stdout, pv, "P V: each token a weighted mix of values");
    ag_tensor_print(stdout, pcv, "causal P V");
    char err[512], path[4096];
    const char *file = demo_svg_path(svg_dir, "causal.svg", path, sizeof path);
    const char *tokens[4] = {"x0", "x1", "x2", "x3"};
    if (file) {
        ag_real both[2 * 16], masks[2 * 16];
        memcpy(both, p->data, sizeof(ag_real) * 16);
        memcpy(both + 16, pc->data, sizeof(ag_real) * 16);
        for (int i = 0; i < 16; i++) masks[i] = 1, masks[16 + i] = causal->data[i];
        const char *titles[2] = {"softmax(Q K^T / sqrt(3))", "with the causal mask"};
        ag_heatmap_spec spec = {.title = "Step by step: attention weights of 4 tokens", .rows = 4, .cols = 4,
                                .row_labels = tokens, .col_labels = tokens, .panels = 2, .panel_titles = titles,
                                .w = both, .mask = masks, .mask_panels = 2};
        if (demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err)) goto done;
    }
    /* the mask itself: M = 0 where the mask is 1, -inf where it is 0 */
    file = demo_svg_path(svg_dir, "mask.svg", path, sizeof path);
    if (file) {
        const char *title[1] = {"1: M = 0 (may attend); crossed: M = -inf"};
        ag_heatmap_spec spec = {.title = "The causal mask of 4 tokens", .rows = 4, .cols = 4, .row_labels = tokens,
                                .col_labels = tokens, .panel_titles = title, .w = causal->data,
                                .mask = causal->data, .value_name = "mask"};
        if (demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err)) goto done;
    }
    rc = 0;
done:
    ag_graph_free(g);
    return rc;
}

/* The encodings P [T, C] as a heatmap (positions down, dimensions across)
 * and dimensions 0, 2, 4 and 8 as curves over the positions. */
static int draw_positions(ag_tensor *pe, const char *svg_dir)
{
    enum { N = 4 };
    int T = pe->shape[0], C = pe->shape[1];
    char err[512], path[4096];
    const char *file = demo_svg_path(svg_dir, "positions.svg", path, sizeof path);
    if (!file) return 0;
    ag_heatmap_spec spec = {.title = "Sinusoidal positional encodings P[t, i]", .row_axis = "position t",
                            .col_axis = "dimension i", .rows = T, .cols = C, .w = pe->data, .lo = -1, .hi = 1,
                            .value_name = "P[t, i]"};
    if (demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err)) return 1;
    const int dims[N] = {0, 2, 4, 8};
    double curves[N][64];
    const double *y[N];
    int n[N];
    const char *names[N] = {"i = 0: sin(t)", "i = 2: sin(t / 10000^(2/32))", "i = 4: sin(t / 10000^(4/32))",
                            "i = 8: sin(t / 10000^(8/32))"};
    for (int k = 0; k < N; k++) {
        for (int t = 0; t < T && t < 64; t++) curves[k][t] = (double)pe->data[(size_t)t * C + dims[k]];
        y[k] = curves[k], n[k] = T < 64 ? T : 64;
    }
    file = demo_svg_path(svg_dir, "position_curves.svg", path, sizeof path);
    return demo_report(ag_svg_line_plot(file, "Positional encodings: one frequency per pair of dimensions",
                                   "position t + 1", "P[t, i]", N, names, y, n, err, sizeof err),
                  file, err);
}

/* A decoder block (C 8, 2 heads, FFN 16) on 3 target tokens over 4 encoder
 * outputs of a source with 3 real tokens: its graph shows the causal mask,
 * the padding mask and the encoder's output coming in. */
static int decoder(uint64_t seed, const char *svg_dir)
{
    printf("\n== 4. Positions and a decoder block ==\n");
    enum { T = 3, S = 4, C = 8, H = 2, F = 16, PT = 40, PC = 32 };
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_decoder_block blk;
    int rc = 1;
    if (!s || !g || ag_decoder_block_init(&blk, s, "decoder.blocks.0", C, H, F, 0.0, seed) != AG_OK) goto done;
    blk.self_attention.textbook = blk.cross_attention.textbook = 1;
    ag_graph_set_training(g, 0);
    ag_tensor *pe = ag_positional_encoding(g, PT, PC);
    if (check(g, "positions")) goto done;
    printf("positions P[t, 2i] = sin(t / 10000^(2i / C)), P[t, 2i+1] = cos(...): [%d, %d]\n", PT, PC);
    printf("P[1, 0..3] = %.4f %.4f %.4f %.4f\n", (double)pe->data[PC], (double)pe->data[PC + 1],
           (double)pe->data[PC + 2], (double)pe->data[PC + 3]);
    demo_wavelengths();
    if (draw_positions(pe, svg_dir)) goto done;
    ag_tensor *x = ag_set_name(ag_tensor_new(g, AG_SHAPE(1, T, C)), "x (target so far)");
    ag_tensor *enc = ag_set_name(ag_tensor_new(g, AG_SHAPE(1, S, C)), "enc (encoder output)");
    if (x) ag_init_normal(x, 0, 1, seed + 2);
    if (enc) ag_init_normal(enc, 0, 1, seed + 3);
    const int src_valid[1] = {3};
    ag_tensor *causal = ag_causal_mask(g, T, T), *pad = ag_padding_mask(g, src_valid, 1, 0, T, S);
    ag_tensor *out = ag_decoder_block_forward(g, &blk, x, enc, causal, pad, NULL, NULL);
    if (check(g, "decoder block")) goto done;
    char s1[64], err[512], path[4096];
    printf("decoder block: x [1, 3, 8] over enc [1, 4, 8] (3 real source tokens) -> %s\n",
           ag_shape_str(out, s1, sizeof s1));
    const char *dot = demo_out_path(svg_dir, "decoder.dot", path, sizeof path);
    if (!dot || demo_report(ag_graph_write_dot(g, out, 0, dot, err, sizeof err), dot, err)) goto done;
    rc = 0;
done:
    ag_graph_free(g);
    ag_store_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    const char *svg_dir = NULL;
    int paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            char *end;
            seed = strtoull(argv[++i], &end, 10);
            if (*end) {
                fprintf(stderr, "attention_demo: --seed needs a whole number, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--svg") && i + 1 < argc) {
            svg_dir = argv[++i];
        } else if (!strcmp(argv[i], "--paths")) {
            paths = 1;
        } else {
            fprintf(stderr, "attention_demo: unknown flag '%s'\nusage: attention_demo [--seed N] [--svg DIR] [--paths]\n",
                    argv[i]);
            return 2;
        }
    }
    if (paths) return demo_paths();
    int rc = tutorial(seed, svg_dir);
    rc |= d2l(seed, svg_dir);
    rc |= step_by_step(svg_dir);
    rc |= decoder(seed, svg_dir);
    rc |= demo_walk(seed, svg_dir);
    rc |= demo_masked_row();
    rc |= demo_tiles(svg_dir);
    return rc;
}
