/* attention_walk.c: attention_demo's sections with sizes that tell the axes
 * apart, and the facts about masks and positions that the tour quotes.
 *
 *   demo_walk         cross-attention with B 2, T 3 queries, S 5 keys, H 2
 *                     heads of D 4 (C 8), W_q != W_k: every intermediate
 *                     printed under its named axes, [B, T, C] ->
 *                     [B, T, H, D] -> [B, H, T, D] -> [B, H, T, S] and back,
 *                     checked against ag_mha_layer_forward; with --svg, the graph
 *                     of this block (attention.dot) and its weights
 *                     (walk.svg)
 *   demo_masked_row   a row whose every key is masked, filled with -1e9 (the
 *                     PyTorch tutorial's masked_fill), -1e6 (d2l's masked
 *                     softmax) and -inf (the library's blocks)
 *   demo_wavelengths  the sinusoidal encodings' fastest and slowest cycles */
#include "attention_demo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 3, S = 5, C = 8, H = 2, D = C / H };

/* Sentence 0 of t, whose axes are named by axes ("B", "T", "H", "D"): a
 * 3-axis tensor as rows of its axis 1, a 4-axis one as blocks of its axis 1,
 * each a matrix of axes 2 and 3. */
static void print_named(const char *title, const char *axes, const ag_tensor *t)
{
    char shape[64];
    printf("%s  [%s] = %s\n", title, axes, ag_shape_str(t, shape, sizeof shape));
    int n1 = t->shape[1], n2 = t->shape[2], n3 = t->ndim == 4 ? t->shape[3] : 1;
    char a1 = (char)(axes[3] + 'a' - 'A'), a2 = (char)(axes[6] + 'a' - 'A'); /* "B, T, H, D": T and H */
    for (int i = 0; i < n1; i++) {
        const ag_real *row = t->data + (size_t)i * n2 * n3;
        if (t->ndim == 3) {
            printf("  b 0, %c %d:", a1, i);
            for (int j = 0; j < n2; j++) printf(" %8.4f", (double)row[j]);
            printf("\n");
            continue;
        }
        for (int j = 0; j < n2; j++) {
            printf("  b 0, %c %d, %c %d:", a1, i, a2, j);
            for (int k = 0; k < n3; k++) printf(" %8.4f", (double)row[(size_t)j * n3 + k]);
            printf("\n");
        }
    }
}

/* The block's weights [B, H, T, S] as four panels (sentence, head), with
 * the padding mask. */
static int draw_walk(const ag_tensor *p, const ag_tensor *mask, const char *svg_dir)
{
    char err[512], path[4096];
    const char *file = demo_svg_path(svg_dir, "walk.svg", path, sizeof path);
    if (!file) return 0;
    ag_real masks[B * H * T * S];
    for (int b = 0; b < B; b++)
        for (int r = 0; r < H * T; r++) memcpy(masks + ((size_t)b * H * T + r) * S, mask->data + b * S, sizeof(ag_real) * S);
    const char *titles[B * H] = {"sentence 0, head 0", "sentence 0, head 1", "sentence 1, head 0",
                                 "sentence 1, head 1"};
    ag_heatmap_spec spec = {.title = "Cross-attention: 3 queries over 5 keys (sentence 1: 3 valid)",
                            .rows = T, .cols = S, .panels = B * H, .panel_titles = titles, .grid_cols = 2,
                            .w = p->data, .mask = masks, .mask_panels = B * H};
    return demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err);
}

/* The graph of the block with Add&Norm, on the textbook path: attention.dot. */
static int draw_block(const ag_mha_layer *m, const ag_layer_norm_layer *norm, ag_tensor *xq, ag_tensor *xkv, ag_tensor *mask,
                      ag_graph *g, const char *svg_dir)
{
    char err[512], path[4096];
    ag_tensor *out = ag_add_norm(g, norm, xq, ag_mha_layer_forward_textbook(g, m, xq, xkv, mask, AG_MASK_NEG_INF, NULL), 0);
    if (ag_graph_status(g) != AG_OK) return fprintf(stderr, "attention_demo: %s\n", ag_graph_error(g)), 1;
    const char *dot = demo_out_path(svg_dir, "attention.dot", path, sizeof path);
    return !dot || demo_report(ag_graph_write_dot(g, out, 0, dot, err, sizeof err), dot, err);
}

/* The walk, one public op per step; returns the output [B, T, C]. */
static ag_tensor *walk(ag_graph *g, const ag_mha_layer *m, ag_tensor *xq, ag_tensor *xkv, ag_tensor *mask, ag_tensor **pp)
{
    static const int perm[4] = {0, 2, 1, 3};
    ag_tensor *q = ag_linear_layer_forward(g, &m->w_q, xq), *k = ag_linear_layer_forward(g, &m->w_k, xkv);
    ag_tensor *v = ag_linear_layer_forward(g, &m->w_v, xkv);
    ag_tensor *q4 = ag_reshape(g, q, AG_SHAPE(B, T, H, D)), *qh = ag_permute(g, q4, perm);
    ag_tensor *kh = ag_permute(g, ag_reshape(g, k, AG_SHAPE(B, S, H, D)), perm);
    ag_tensor *vh = ag_permute(g, ag_reshape(g, v, AG_SHAPE(B, S, H, D)), perm);
    ag_tensor *qk = ag_matmul(g, qh, ag_transpose(g, kh, -1, -2));
    ag_tensor *sc = ag_scale(g, qk, 1 / sqrt((double)D));
    ag_tensor *p = ag_softmax(g, ag_masked_fill(g, sc, mask, AG_MASK_NEG_INF));
    ag_tensor *o = ag_matmul(g, p, vh), *ot = ag_permute(g, o, perm);
    ag_tensor *cat = ag_reshape(g, ot, AG_SHAPE(B, T, C)), *y = ag_linear_layer_forward(g, &m->w_o, cat);
    if (ag_graph_status(g) != AG_OK) return NULL;
    print_named("Q = x_q W_q^T + b_q", "B, T, C", q);
    print_named("Q split: reshape (a view)", "B, T, H, D", q4);
    print_named("Q heads: permute (0, 2, 1, 3) (a copy)", "B, H, T, D", qh);
    print_named("K heads", "B, H, S, D", kh);
    print_named("Q K^T per head: T rows, S columns", "B, H, T, S", qk);
    print_named("P = softmax(masked_fill(Q K^T / sqrt(4), mask, -inf))", "B, H, T, S", p);
    printf("  b 1 (3 valid keys), h 0, t 0: ");
    for (int s = 0; s < S; s++) printf(" %.4f", (double)p->data[(size_t)H * T * S + s]);
    printf("\n");
    print_named("O = P V per head", "B, H, T, D", o);
    print_named("O heads joined: permute (0, 2, 1, 3)", "B, T, H, D", ot);
    print_named("concat heads: reshape", "B, T, C", cat);
    print_named("y = concat W_o^T + b_o", "B, T, C", y);
    *pp = p;
    return y;
}

int demo_walk(uint64_t seed, const char *svg_dir)
{
    printf("\n== 5. Shapes: B 2, T 3 queries, S 5 keys, H 2 heads of D 4 (C 8) ==\n");
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new(), *g2 = ag_graph_new();
    ag_mha_layer m;
    ag_layer_norm_layer norm;
    int rc = 1;
    if (!s || !g || !g2 || ag_mha_layer_init(&m, s, "mha", C, H, 1, 0.0, seed) != AG_OK ||
        ag_layer_norm_layer_init(&norm, s, "layer_norm", C) != AG_OK)
        goto done;
    ag_graph_set_training(g, 0), ag_graph_set_training(g2, 0);
    ag_tensor *xq = ag_set_name(ag_tensor_new(g, AG_SHAPE(B, T, C)), "x_q");
    ag_tensor *xkv = ag_set_name(ag_tensor_new(g, AG_SHAPE(B, S, C)), "x_kv");
    if (xq) ag_init_normal(xq, 0, 1, seed + 4);
    if (xkv) ag_init_normal(xkv, 0, 1, seed + 5);
    const int valid[B] = {5, 3};
    ag_tensor *mask = ag_padding_mask(g, valid, B, 0, T, S), *p = NULL;
    printf("x_q [B, T, C] = [2, 3, 8] (the decoder's), x_kv [B, S, C] = [2, 5, 8] (the encoder's), "
           "valid_lens [5, 3]; W_q and W_k drawn apart\n");
    ag_tensor *y = walk(g, &m, xq, xkv, mask, &p);
    ag_tensor *fast = ag_mha_layer_forward(g, &m, xq, xkv, mask, AG_MASK_NEG_INF, NULL);
    if (!y || ag_graph_status(g) != AG_OK) {
        fprintf(stderr, "attention_demo: shapes: %s\n", ag_graph_error(g));
        goto done;
    }
    double worst = 0;
    for (size_t i = 0; i < y->size; i++) { /* a NaN is the worst, never dropped */
        double d = fabs((double)y->data[i] - (double)fast->data[i]);
        worst = isnan(d) || isnan(worst) ? NAN : fmax(worst, d);
    }
    printf("y equals ag_mha_layer_forward(x_q, x_kv, mask) within 1e-6: %s\n", worst <= 1e-6 ? "yes" : "no");
    /* the block's picture is drawn from its own graph: only its nodes */
    ag_tensor *xq2 = ag_set_name(ag_tensor_from(g2, AG_SHAPE(B, T, C), xq->data), "x_q");
    ag_tensor *xkv2 = ag_set_name(ag_tensor_from(g2, AG_SHAPE(B, S, C), xkv->data), "x_kv");
    ag_tensor *mask2 = ag_padding_mask(g2, valid, B, 0, T, S);
    if (draw_block(&m, &norm, xq2, xkv2, mask2, g2, svg_dir) || draw_walk(p, mask, svg_dir)) goto done;
    rc = worst <= 1e-6 ? 0 : 1;
done:
    if (rc && g && ag_graph_status(g) == AG_OK && s) fprintf(stderr, "attention_demo: shapes: %s\n", ag_store_error(s));
    ag_graph_free(g2);
    ag_graph_free(g);
    ag_store_free(s);
    return rc;
}

/* softmax of a row as the textbook formula writes it, exp(s - max) / sum,
 * in double: its first weight (NaN for a row of -inf: -inf - -inf) */
static double textbook_softmax_first(const double *row, int n)
{
    double mx = row[0], sum = 0;
    for (int i = 1; i < n; i++) mx = fmax(mx, row[i]);
    for (int i = 0; i < n; i++) sum += exp(row[i] - mx);
    return exp(row[0] - mx) / sum;
}

int demo_masked_row(void)
{
    printf("\n== 6. A row with every key masked ==\n");
    const ag_real scores[S] = {0.5, -1, 2, 0.3, 1}, values[S] = {1, 2, 3, 4, 5};
    const double fills[3] = {-1e9, -1e6, AG_MASK_NEG_INF};
    const char *names[3] = {"-1e9 (the PyTorch tutorial)", "-1e6 (d2l)", "-inf (attograd's blocks)"};
    ag_graph *g = ag_graph_new();
    if (!g) return 1;
    printf("scores [%g %g %g %g %g], mask [0 0 0 0 0], values [1 2 3 4 5]\n", (double)scores[0],
           (double)scores[1], (double)scores[2], (double)scores[3], (double)scores[4]);
    for (int f = 0; f < 3; f++) {
        ag_tensor *x = ag_tensor_from(g, AG_SHAPE(1, S), scores), *mask = ag_tensor_new(g, AG_SHAPE(1, S));
        ag_tensor *p = ag_softmax(g, ag_masked_fill(g, x, mask, fills[f]));
        ag_tensor *o = ag_matmul(g, p, ag_tensor_from(g, AG_SHAPE(S, 1), values));
        if (ag_graph_status(g) != AG_OK) return fprintf(stderr, "%s\n", ag_graph_error(g)), ag_graph_free(g), 1;
        printf("fill %-28s weights [", names[f]);
        for (int s = 0; s < S; s++) printf("%s%.1f", s ? " " : "", (double)p->data[s]);
        printf("]  output %.1f\n", (double)o->data[0]);
    }
    const double inf_row[S] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    double first = textbook_softmax_first(inf_row, S);
    printf("exp(s - max) / sum over a row of -inf, as written: %s (-inf - -inf)\n",
           isnan(first) ? "NaN" : "a number");
    ag_graph_free(g);
    return 0;
}

/* n rounded to 3 significant digits, with thousands separators */
static void print_rounded(double n)
{
    if (n < 1000) {
        printf("%.1f", n);
        return;
    }
    long scale = lround(pow(10, floor(log10(n)) - 2)), r = lround(n / (double)scale) * scale;
    if (r >= 1000000) printf("%ld,%03ld,%03ld", r / 1000000, r / 1000 % 1000, r % 1000);
    else printf("%ld,%03ld", r / 1000, r % 1000);
}

void demo_wavelengths(void)
{
    const int widths[2] = {32, 64};
    for (int i = 0; i < 2; i++) {
        int c = widths[i];
        printf("C %d: one cycle per ", c);
        print_rounded(2 * acos(-1));
        printf(" positions (dimensions 0, 1) down to one per ");
        print_rounded(2 * acos(-1) * pow(10000, (double)(c - 2) / c));
        printf(" (dimensions %d, %d)\n", c - 2, c - 1);
    }
}
