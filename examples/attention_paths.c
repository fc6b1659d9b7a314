/* attention_paths.c: `attention_demo --paths`, which node runs when.
 *
 * Multi-head attention takes one of several paths through the library, and
 * the tape shows which: this builds each path on a small block (B 2, T 3
 * queries over S 5 keys, C 8, H 2 heads of D 4), walks the tape from the
 * q projection to the output projection, and prints a Markdown table of the
 * nodes it finds, which of them are fused ops (a backward derived by hand
 * from their parts', in their own file) and where they live.  Nothing in the
 * table is typed by hand: a path that changes changes the table, and the
 * docs that quote it fail their test until they are made again (make docs). */
#include "attention_demo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 3, S = 5, C = 8, H = 2, F = 16 };

/* The tape's label for node t: its op, and for a matmul its flags. */
static const char *node_label(const ag_tensor *t, char *buf, size_t len)
{
    const char *name = ag_op_name(t->op);
    if (t->op == AG_OP_MATMUL)
        snprintf(buf, len, "matmul%s%s", ag_tensor_iarg(t, 0) ? " (a b^T)" : "",
                 ag_tensor_iarg(t, 1) ? " per head" : "");
    else if (t->op == AG_OP_PERMUTE && t->ndim == 4)
        snprintf(buf, len, "permute (%d, %d, %d, %d)", ag_tensor_iarg(t, 0), ag_tensor_iarg(t, 1),
                 ag_tensor_iarg(t, 2), ag_tensor_iarg(t, 3));
    else snprintf(buf, len, "%s", name);
    return buf;
}

/* A fused op: one node for a composition of others, whose backward is
 * derived by hand from theirs (docs/ops.md, "Fused ops"). */
static const char *fused_file(int op)
{
    switch (op) {
    case AG_OP_LINEAR: return "ops/linear.c";
    case AG_OP_LINEAR_ADD: return "ops/linear_add.c";
    case AG_OP_LINEAR_GELU: return "ops/linear_gelu.c";
    case AG_OP_GELU_LINEAR_ADD: return "ops/gelu_linear_add.c";
    case AG_OP_MASKED_SOFTMAX: return "ops/masked_softmax.c";
    case AG_OP_ATTENTION: return "ops/attention.c, src/kernels/attention.c";
    default: return NULL;
    }
}

static void append(char *buf, size_t len, const char *s)
{
    size_t n = strlen(buf);
    if (n < len) snprintf(buf + n, len - n, "%s", s);
}

/* The first node named "q" (the query projection), and the output
 * projection after it: the first linear or linear_add that follows a
 * product of queries and keys. */
static int block_range(const ag_graph *g, int from, int *lo, int *hi)
{
    int n = ag_graph_node_count(g), seen_product = 0;
    *lo = *hi = -1;
    for (int i = from; i < n; i++) {
        const ag_tensor *t = ag_graph_node(g, i);
        if (*lo < 0) {
            if (!strcmp(t->name, "q")) *lo = i;
            continue;
        }
        if (t->op == AG_OP_MATMUL || t->op == AG_OP_ATTENTION) seen_product = 1;
        if (seen_product && (t->op == AG_OP_LINEAR || t->op == AG_OP_LINEAR_ADD)) {
            *hi = i;
            return 0;
        }
    }
    return -1;
}

/* One row: the ops of nodes lo..hi (leaves skipped, runs of one label
 * counted), the fused ones among them and their files. */
static void print_row(const char *path, const char *when, const ag_graph *g, int lo, int hi)
{
    char nodes[1024] = "", hand[256] = "", files[256] = "", label[64], prev[64] = "", item[96];
    int run = 0, fused_seen[AG_OP_COUNT] = {0};
    for (int i = lo; i <= hi + 1; i++) {
        const ag_tensor *t = i <= hi ? ag_graph_node(g, i) : NULL;
        if (t && t->op == AG_OP_LEAF) continue;
        if (t && !strcmp(node_label(t, label, sizeof label), prev)) {
            run++;
            continue;
        }
        if (run) {
            snprintf(item, sizeof item, "%s%s", nodes[0] ? ", " : "", prev);
            append(nodes, sizeof nodes, item);
            if (run > 1) snprintf(item, sizeof item, " \xc3\x97%d", run), append(nodes, sizeof nodes, item);
        }
        if (!t) break;
        snprintf(prev, sizeof prev, "%s", label);
        run = 1;
        const char *file = fused_file(t->op);
        if (file && !fused_seen[t->op]) {
            fused_seen[t->op] = 1;
            snprintf(item, sizeof item, "%s%s", hand[0] ? ", " : "", ag_op_name(t->op));
            append(hand, sizeof hand, item);
            if (!strstr(files, file)) {
                snprintf(item, sizeof item, "%s%s", files[0] ? ", " : "", file);
                append(files, sizeof files, item);
            }
        }
    }
    printf("| %s | %s | %s | %s | %s |\n", path, when, nodes, hand, files);
}

/* x_q [B, T, C] and x_kv [B, S, C], seeded, and a padding mask (sentence
 * 1 has 3 valid keys) */
static ag_tensor *inputs(ag_graph *g, ag_tensor **xq, ag_tensor **xkv)
{
    static const int valid[B] = {S, 3};
    *xq = ag_tensor_new(g, AG_SHAPE(B, T, C));
    *xkv = ag_tensor_new(g, AG_SHAPE(B, S, C));
    if (*xq) ag_init_normal(*xq, 0, 1, 11);
    if (*xkv) ag_init_normal(*xkv, 0, 1, 12);
    return ag_padding_mask(g, valid, B, 0, T, S);
}

/* Rows 1, 4, 5, 6: ag_mha_layer_forward(_textbook) on its own. */
static int mha_row(ag_store *s, const char *path, const char *when, int textbook, int want_weights, double p)
{
    ag_mha_layer m;
    ag_graph *g = ag_graph_new();
    if (!g || ag_mha_layer_init(&m, s, path, C, H, 1, p, 1) != AG_OK) return ag_graph_free(g), 1;
    ag_graph_set_training(g, p > 0);
    ag_tensor *xq, *xkv, *w = NULL, *mask = inputs(g, &xq, &xkv);
    int n0 = ag_graph_node_count(g);
    if (textbook) ag_mha_layer_forward_textbook(g, &m, xq, xkv, mask, AG_MASK_NEG_INF, want_weights ? &w : NULL);
    else ag_mha_layer_forward(g, &m, xq, xkv, mask, AG_MASK_NEG_INF, want_weights ? &w : NULL);
    int lo, hi, rc = ag_graph_status(g) != AG_OK || block_range(g, n0, &lo, &hi);
    if (!rc) print_row(path, when, g, lo, hi);
    ag_graph_free(g);
    return rc;
}

/* Row 3: ag_attention alone, on q [B, T, D], k and v [B, S, D]: scaled
 * dot-product attention with no heads to fuse over. */
static int attention_row(void)
{
    enum { D = C / H };
    ag_graph *g = ag_graph_new();
    if (!g) return 1;
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(B, T, D)), *k = ag_tensor_new(g, AG_SHAPE(B, S, D));
    ag_tensor *v = ag_tensor_new(g, AG_SHAPE(B, S, D));
    int n0 = ag_graph_node_count(g);
    ag_attention(g, q, k, v, NULL, AG_MASK_NEG_INF, 0, NULL);
    int rc = ag_graph_status(g) != AG_OK || ag_graph_node_count(g) <= n0;
    if (!rc) print_row("`ag_attention`", "`ag_attention(g, q, k, v, mask, fill, 0, NULL)`: attention alone, no "
                       "projections", g, n0, ag_graph_node_count(g) - 1);
    ag_graph_free(g);
    return rc;
}

/* Row 2: an encoder block whose attention takes the textbook path. */
static int textbook_block_row(ag_store *s)
{
    ag_encoder_block b;
    ag_graph *g = ag_graph_new();
    if (!g || ag_encoder_block_init(&b, s, "blk", C, H, F, 0.0, 1) != AG_OK) return ag_graph_free(g), 1;
    b.attention.textbook = 1;
    ag_tensor *xq, *xkv, *mask = inputs(g, &xq, &xkv);
    ag_encoder_block_forward(g, &b, xkv, mask, NULL);
    int lo, hi, rc = ag_graph_status(g) != AG_OK || block_range(g, 0, &lo, &hi);
    if (!rc)
        print_row("textbook, in a block", "`.textbook = 1` in a Transformer block, no dropout", g, lo, hi);
    ag_graph_free(g);
    return rc;
}

/* Rows 7 and 8: the GPT's training step, and one token of cached decoding
 * (recorded with grad mode on, so that the tape holds what runs). */
static int gpt_rows(ag_store *s)
{
    ag_gpt_config cfg = {.vocab = 11, .context = 8, .hidden = C, .heads = H, .ffn = F, .layers = 1,
                         .activation = AG_ACT_GELU};
    ag_gpt m;
    ag_graph *g = ag_graph_new();
    int rc = 1;
    if (!g || ag_gpt_init(&m, s, &cfg, 1) != AG_OK) return ag_graph_free(g), 1;
    const int ids[4] = {1, 2, 3, 4}, targets[4] = {2, 3, 4, 5};
    ag_gpt_loss(g, &m, ids, targets, 1, 4);
    int lo, hi;
    if (ag_graph_status(g) != AG_OK || block_range(g, 0, &lo, &hi)) goto done;
    print_row("fast, GPT training", "`ag_gpt_loss`: a pre-norm block, no dropout", g, lo, hi);
    ag_gpt_cache *c = ag_gpt_cache_new(&m);
    if (!c) goto done;
    ag_graph_reset(g);
    ag_graph_set_training(g, 0);
    ag_gpt_forward_cached(g, &m, c, ids, 3);
    ag_graph_reset(g);
    ag_gpt_forward_cached(g, &m, c, ids + 3, 1);
    if (ag_graph_status(g) == AG_OK && !block_range(g, 0, &lo, &hi)) {
        print_row("cached decoding", "`ag_gpt_forward_cached`, one new token over 3 cached", g, lo, hi);
        rc = 0;
    }
    ag_gpt_cache_free(c);
done:
    ag_gpt_free(&m);
    ag_graph_free(g);
    return rc;
}

/* One row of the second table: the path attention y took, and what it
 * keeps for its backward (ag_attention_path). */
static int path_row(const char *call, const char *when, const ag_tensor *y)
{
    size_t kept;
    const char *path = ag_attention_path(y, &kept);
    if (!path) return 1;
    printf("| %s | %s | %s | %zu |\n", call, when, path, kept);
    return 0;
}

/* Which path each public call takes, on 2 query heads over 1 key/value
 * head (D 8; ag_attention and the textbook broadcast it): at the seam of
 * 256 keys and past it, in the reference mode, asked for the weights, as
 * the textbook writes it. */
static int kernel_rows(void)
{
    enum { D = 8 };
    ag_graph *g = ag_graph_new();
    if (!g) return 1;
    ag_tensor *q = ag_tensor_new(g, AG_SHAPE(1, 2, 256, D)), *k = ag_tensor_new(g, AG_SHAPE(1, 1, 256, D));
    ag_tensor *kl = ag_tensor_new(g, AG_SHAPE(1, 1, 257, D)), *w = NULL;
    ag_sdpa_config causal = {.causal = AG_CAUSAL_TOP_LEFT};
    const char *sdpa = "`ag_scaled_dot_product_attention`";
    int rc = path_row(sdpa, "S = 256 keys", ag_scaled_dot_product_attention(g, q, k, k, &causal));
    rc |= path_row(sdpa, "S = 257 keys", ag_scaled_dot_product_attention(g, q, kl, kl, &causal));
    ag_set_kernels(AG_KERNELS_REFERENCE);
    rc |= path_row(sdpa, "S = 257, `AG_KERNELS=reference`", ag_scaled_dot_product_attention(g, q, kl, kl, &causal));
    ag_set_kernels(AG_KERNELS_FAST);
    rc |= path_row("`ag_attention(..., &w)`", "the weights asked for, S = 256",
                   ag_attention(g, q, k, k, NULL,
                                AG_MASK_NEG_INF, 0, &w));
    rc |= path_row("`ag_attention_textbook`", "S = 256",
                   ag_attention_textbook(g, q, k, k, NULL,
                                         AG_MASK_NEG_INF, 0, NULL));
    ag_attention_stats st;
    ag_graph_attention_stats(g, &st);
    printf("\ngraph: %d flash, %d P kept, %d plain, %d three nodes, %d textbook: %zu bytes kept\n", st.flash,
           st.p_kept, st.plain, st.three_nodes, st.textbook, st.kept_bytes);
    rc |= ag_graph_status(g) != AG_OK;
    ag_graph_free(g);
    return rc;
}

int demo_paths(void)
{
    ag_store *s = ag_store_new();
    if (!s) return 1;
    printf("| path | when | nodes on the tape, from the q projection to the output projection | fused, "
           "backward by hand | their files |\n|---|---|---|---|---|\n");
    int rc = mha_row(s, "textbook", "`ag_mha_layer_forward_textbook`, or `.textbook = 1`", 1, 0, 0);
    rc |= textbook_block_row(s);
    rc |= attention_row();
    rc |= mha_row(s, "fast, weights returned", "`ag_mha_layer_forward(..., &w)`", 0, 1, 0);
    rc |= mha_row(s, "fast, dropout", "training with `dropout > 0`", 0, 0, 0.1);
    rc |= mha_row(s, "fast, default", "`ag_mha_layer_forward(..., NULL)`, no dropout", 0, 0, 0);
    rc |= gpt_rows(s);
    int fused = 0;
    for (int op = 1; op < AG_OP_COUNT; op++) fused += fused_file(op) != NULL;
    printf("\nop table: %d ops, %d primitives and %d fused (one node for a composition, a backward written "
           "by hand):", AG_OP_COUNT - 1, AG_OP_COUNT - 1 - fused, fused);
    for (int op = 1, n = 0; op < AG_OP_COUNT; op++)
        if (fused_file(op)) printf("%s %s", n++ ? "," : "", ag_op_name(op));
    printf("\n\nkernel paths:\n| call | when | path | bytes kept for the backward |\n|---|---|---|---|\n");
    rc |= kernel_rows();
    ag_store_free(s);
    if (rc) fprintf(stderr, "attention_demo: --paths: a path could not be built\n");
    return rc;
}
