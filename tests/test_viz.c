/* tests/test_viz.c: the picture writers (src/viz/dot.c, src/viz/svg.c).
 *
 * Each test writes into its own temporary directory and reads the file
 * back.  Graphviz (dot) checks that the DOT is accepted and xmllint that the
 * SVG is well-formed XML, when they are installed (Debian's graphviz and
 * libxml2-utils); without them those checks are skipped with a note and the
 * rest of each test still runs. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "tmpdir.h"

/* ---- helpers ------------------------------------------------------------- */

/* Each test writes into its own fresh directory, made before the test and
 * removed with what is in it after, even when the test fails. */
static char *dir;

static void make_dir(void)
{
    dir = make_tmpdir("viz");
}

static void remove_dir(void)
{
    rm_dir(dir);
}

TestSuite(viz, .init = make_dir, .fini = remove_dir);

static int count(const char *s, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = strstr(s, needle); p; p = strstr(p + len, needle)) n++;
    return n;
}

#define expect_has(s, needle) cr_assert_not_null(strstr((s), (needle)), "missing %s in:\n%s", (needle), (s))
#define expect_lacks(s, needle) cr_assert_null(strstr((s), (needle)), "unexpected %s in:\n%s", (needle), (s))

/* A node labelled "<name> = <op ...>\n<shape>" (a named op's label). */
static void expect_named(const char *dot, const char *name, const char *shape)
{
    char want[96];
    snprintf(want, sizeof want, "label=\"%s = ", name);
    const char *p = strstr(dot, want);
    cr_assert_not_null(p, "no node named %s in:\n%s", name, dot);
    const char *end = strchr(p + strlen(want), '"');
    cr_assert_not_null(end);
    snprintf(want, sizeof want, "\\n%s", shape);
    size_t n = strlen(want);
    cr_assert((size_t)(end - p) >= n && !strncmp(end - n, want, n), "%s is not %s: %.*s", name, shape,
              (int)(end - p), p);
}

/* The DOT of g (ag_graph_write_dot with root and flags) written to path and
 * read back (free it). */
static char *dot_text(const ag_graph *g, const ag_tensor *root, int flags, const char *path)
{
    char err[256];
    cr_assert_eq(ag_graph_write_dot(g, root, flags, path, err, sizeof err), AG_OK, "%s", err);
    return read_file(path, NULL);
}

/* Run a checker tool on path when it is installed: 1 ran and passed, 0 ran
 * and failed, -1 not installed (a note is printed). */
static int run_tool(const char *tool, const char *args, const char *path)
{
    char exe[64];
    snprintf(exe, sizeof exe, "/usr/bin/%s", tool);
    if (access(exe, X_OK) != 0) {
        fprintf(stderr, "note: %s is not installed; skipping its check of %s\n", tool, path);
        return -1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s '%s' 2>&1", exe, args, path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    if (rc != 0) fprintf(stderr, "%s rejected %s:\n%s\n", tool, path, out);
    return rc == 0;
}

static void expect_dot_accepts(const char *path, const char *dir)
{
    char args[256];
    snprintf(args, sizeof args, "-Tsvg -o '%s/rendered.svg'", dir);
    cr_assert_neq(run_tool("dot", args, path), 0, "dot -Tsvg rejected %s", path);
}

static void expect_well_formed(const char *path)
{
    cr_assert_neq(run_tool("xmllint", "--noout", path), 0, "xmllint rejected %s", path);
}

/* Every number in a geometric attribute of the SVG is finite, and no such
 * attribute spells nan or inf. */
static void expect_finite_coordinates(const char *svg)
{
    static const char *const attrs[] = {" x=\"",     " y=\"",      " x1=\"",     " y1=\"",
                                        " x2=\"",    " y2=\"",     " cx=\"",     " cy=\"",
                                        " r=\"",     " width=\"",  " height=\"", " points=\"",
                                        " viewBox=\"", " transform=\"", " offset=\""};
    int seen = 0;
    for (size_t a = 0; a < sizeof attrs / sizeof *attrs; a++) {
        size_t len = strlen(attrs[a]);
        for (const char *p = strstr(svg, attrs[a]); p; p = strstr(p + 1, attrs[a])) {
            const char *v = p + len, *end = strchr(v, '"');
            cr_assert_not_null(end);
            char val[4096];
            size_t n = (size_t)(end - v) < sizeof val - 1 ? (size_t)(end - v) : sizeof val - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            for (char *c = val; *c; c++) *c = (char)tolower((unsigned char)*c);
            cr_assert(!strstr(val, "nan") && !strstr(val, "inf"), "non-finite %s%s\"", attrs[a], val);
            for (char *c = val; *c;) {
                if (isdigit((unsigned char)*c) || *c == '-' || *c == '.') {
                    char *e;
                    double d = strtod(c, &e);
                    cr_assert(e > c && isfinite(d), "bad number in %s%s\"", attrs[a], val);
                    seen++;
                    c = e;
                } else
                    c++;
            }
        }
    }
    cr_assert_gt(seen, 10, "too few coordinates found");
}

/* ---- the graph as DOT ------------------------------------------------------ */

/* y = tanh(x @ w), loss = mean(y * y), with w = [[1, 0], [0, 1], [0, 0]] so
 * that x @ w keeps x's first two columns. */
typedef struct small_net {
    ag_store *s;
    ag_graph *g;
    ag_tensor *w, *x, *xw, *y, *loss;
} small_net;

static small_net small_graph(void)
{
    small_net n;
    n.s = ag_store_new();
    n.w = ag_param(n.s, "w", AG_SHAPE(3, 2));
    const ag_real wv[6] = {1, 0, 0, 1, 0, 0};
    memcpy(n.w->data, wv, sizeof wv);
    n.g = ag_graph_new();
    const ag_real xs[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    n.x = ag_set_name(ag_tensor_from(n.g, AG_SHAPE(4, 3), xs), "x");
    n.xw = ag_matmul(n.g, n.x, n.w);
    n.y = ag_set_name(ag_tanh(n.g, n.xw), "y");
    n.loss = ag_set_name(ag_mean_all(n.g, ag_mul(n.g, n.y, n.y)), "loss");
    cr_assert_eq(ag_graph_status(n.g), AG_OK, "%s", ag_graph_error(n.g));
    return n;
}

static void free_small(small_net *n)
{
    ag_graph_free(n->g);
    ag_store_free(n->s);
}

Test(viz, dot_has_one_node_per_tensor_with_names_shapes_and_edges)
{
    char path[128];
    snprintf(path, sizeof path, "%s/small.dot", dir);
    small_net n = small_graph();
    char *s = dot_text(n.g, NULL, 0, path);
    expect_has(s, "digraph attograd {");
    /* tape: n0 x, n1 matmul, n2 tanh, n3 mul, n4 mean; off the tape: p0 w */
    expect_has(s, "n0 [shape=ellipse");
    expect_has(s, "label=\"x\\n[4, 3]\"");
    expect_has(s, "p0 [shape=cylinder");
    expect_has(s, "label=\"w\\n[3, 2]\"");
    expect_has(s, "label=\"matmul\\n[4, 2]\"");
    expect_has(s, "label=\"y = tanh\\n[4, 2]\"");
    expect_has(s, "label=\"mul\\n[4, 2]\"");
    expect_has(s, "label=\"loss = mean (all)\\n[]\"");
    /* named tensors stand out: a darker fill and a thicker border */
    cr_assert_eq(count(s, "penwidth=2"), 2, "y and loss are named");
    /* the edges, in input order; y feeds mul twice */
    expect_has(s, "n0 -> n1;\n  p0 -> n1;");
    expect_has(s, "n1 -> n2;");
    cr_assert_eq(count(s, "n2 -> n3;"), 2);
    expect_has(s, "n3 -> n4;");
    cr_assert_eq(count(s, " -> "), 6);
    cr_assert_eq(count(s, "shape=cylinder"), 1, "one parameter node, however often w is used");
    expect_has(s, "label=\"4 ops, 1 input (green), 1 parameter (orange)\"");
    /* no statistics unless asked for, no root without one */
    expect_lacks(s, "min ");
    expect_lacks(s, "peripheries");
    expect_dot_accepts(path, dir);
    free(s);
    free_small(&n);
}

Test(viz, dot_statistics_of_values_and_gradients)
{
    char path[128];
    snprintf(path, sizeof path, "%s/stats.dot", dir);
    small_net n = small_graph();
    ag_graph_set_keep_grads(n.g, 1); /* the picture shows every node's gradient */
    cr_assert_eq(ag_backward(n.g, n.loss), AG_OK);
    char *s = dot_text(n.g, NULL, AG_DOT_VALUES | AG_DOT_GRADS, path);
    /* x @ w = [[1, 2], [4, 5], [7, 8], [10, 11]]: norm sqrt(380) = 19.49 */
    expect_has(s, "label=\"matmul\\n[4, 2]\\nmin 1  max 11  norm 19.5\\ngrad min ");
    /* x: 1..12, norm sqrt(650) = 25.5; an input without gradient has no grad line */
    expect_has(s, "label=\"x\\n[4, 3]\\nmin 1  max 12  norm 25.5\"");
    /* the loss is a scalar: its value, and d loss / d loss = 1 */
    char want[96];
    snprintf(want, sizeof want, "\\nvalue %.4g\\ngrad 1\"", (double)n.loss->data[0]);
    expect_has(s, want);
    /* the parameter's gradient is there too */
    cr_assert_not_null(strstr(strstr(s, "p0 ["), "\\ngrad min "));
    expect_dot_accepts(path, dir);
    /* values only: no gradient lines */
    free(s);
    s = dot_text(n.g, NULL, AG_DOT_VALUES, path);
    expect_has(s, "min 1  max 11  norm 19.5");
    expect_lacks(s, "grad min");
    free(s);
    free_small(&n);
}

Test(viz, dot_root_draws_only_its_ancestors)
{
    char path[128];
    snprintf(path, sizeof path, "%s/root.dot", dir);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_set_name(ag_tensor_new(g, AG_SHAPE(2, 3)), "x");
    ag_tensor *a = ag_set_name(ag_scale(g, x, 0.5), "a");
    ag_set_name(ag_shift(g, x, 1), "b"); /* made from x, but not used by c */
    ag_tensor *c = ag_set_name(ag_tanh(g, a), "c");
    ag_set_name(ag_neg(g, c), "d"); /* made after c, from c */
    char *s = dot_text(g, c, 0, path);
    expect_has(s, "label=\"x\\n[2, 3]\"");
    expect_has(s, "label=\"a = scale \xc3\x97" "0.5\\n[2, 3]\"");
    expect_has(s, "label=\"c = tanh\\n[2, 3]\"");
    expect_lacks(s, "b = shift");
    expect_lacks(s, "d = neg");
    cr_assert_eq(count(s, "peripheries=2"), 1, "the root has a double border");
    expect_has(s, "n3 [shape=box, style=\"rounded,filled\", fillcolor=\"#b3d0f0\", color=\"#2b5f94\", penwidth=2, "
                  "peripheries=2");
    cr_assert_eq(count(s, " -> "), 2);
    expect_has(s, "n0 -> n1;");
    expect_has(s, "n1 -> n3;");
    expect_dot_accepts(path, dir);
    /* the whole tape has all five */
    free(s);
    s = dot_text(g, NULL, 0, path);
    expect_has(s, "b = shift +1");
    expect_has(s, "d = neg");
    cr_assert_eq(count(s, " -> "), 4);
    free(s);
    ag_graph_free(g);
}

/* The block attention_demo draws: the PyTorch tutorial's multi-head
 * self-attention (C 64, 8 heads) and Add&Norm, on x [2, 4, 64]. */
Test(viz, dot_of_a_multi_head_attention_block)
{
    char path[128];
    snprintf(path, sizeof path, "%s/attention.dot", dir);
    ag_store *s = ag_store_new();
    ag_graph *g = ag_graph_new();
    ag_mha_layer mha;
    ag_layer_norm_layer norm;
    cr_assert_eq(ag_mha_layer_init(&mha, s, "mha", 64, 8, 1, 0.0, 1), AG_OK);
    cr_assert_eq(ag_layer_norm_layer_init(&norm, s, "layer_norm", 64), AG_OK);
    ag_graph_set_training(g, 0);
    ag_tensor *x = ag_set_name(ag_tensor_new(g, AG_SHAPE(2, 4, 64)), "x");
    ag_tensor *out = ag_add_norm(g, &norm, x, ag_mha_layer_forward(g, &mha, x, x, NULL, -1e9, NULL), 0);
    ag_exp(g, out); /* a node after the root: not drawn */
    cr_assert_eq(ag_graph_status(g), AG_OK, "%s", ag_graph_error(g));
    char *d = dot_text(g, out, 0, path);
    /* the names the layers give (whatever op made them), with their shapes */
    expect_named(d, "q", "[2, 4, 64]");
    expect_named(d, "k", "[2, 4, 64]");
    expect_named(d, "v", "[2, 4, 64]");
    /* the heads in one node, with the scale 1 / sqrt(D), D = 64 / 8 */
    expect_has(d, "label=\"reshape\\n[2, 4, 8, 8]\""); /* split heads: a view */
    expect_has(d, "label=\"attention \xc3\x97" "0.3536 per head\\n[2, 4, 8, 8]\""); /* heads side by side */
    expect_has(d, "label=\"layer_norm\\n[2, 4, 64]\", tooltip=\"(unnamed): layer_norm [2, 4, 64], requires grad, root\"");
    cr_assert_eq(count(d, "shape=cylinder"), 10, "w_q, w_k, w_v, w_o weights and biases, layer norm gain and bias");
    expect_has(d, "label=\"mha.w_o.weight\\n[64, 64]\"");
    cr_assert_eq(count(d, "shape=ellipse"), 1, "x is the only input");
    expect_lacks(d, "exp");
    expect_dot_accepts(path, dir);
    free(d);
    ag_graph_free(g);
    ag_store_free(s);
}

Test(viz, dot_draws_a_deep_chain_without_recursion)
{
    char path[128];
    snprintf(path, sizeof path, "%s/chain.dot", dir);
    ag_graph *g = ag_graph_new();
    ag_tensor *y = ag_tensor_new(g, AG_SHAPE(1));
    for (int i = 0; i < 20000; i++) y = ag_neg(g, y);
    char *s = dot_text(g, y, 0, path);
    cr_assert_eq(count(s, " -> "), 20000);
    expect_has(s, "n19999 -> n20000;");
    free(s);
    ag_graph_free(g);
}

Test(viz, dot_escapes_names_and_graphviz_accepts_them)
{
    char path[128];
    snprintf(path, sizeof path, "%s/names.dot", dir);
    ag_graph *g = ag_graph_new();
    ag_tensor *x = ag_set_name(ag_tensor_new(g, AG_SHAPE(2)), "say \"hi\" \\ <b>&{x}");
    ag_set_name(ag_exp(g, x), "bad\xff\nbyte");
    char *s = dot_text(g, NULL, 0, path);
    expect_has(s, "label=\"say \\\"hi\\\" \\\\ <b>&{x}\\n[2]\"");
    expect_has(s, "label=\"bad??byte = exp\\n[2]\"");
    expect_dot_accepts(path, dir);
    free(s);
    ag_graph_free(g);
}

Test(viz, dot_of_a_graph_in_error_shows_the_error)
{
    char path[128];
    snprintf(path, sizeof path, "%s/err.dot", dir);
    ag_graph *g = ag_graph_new();
    ag_tensor *a = ag_tensor_new(g, AG_SHAPE(2, 4, 64));
    ag_tensor *b = ag_tensor_new(g, AG_SHAPE(32, 64));
    cr_assert_null(ag_matmul(g, a, b));
    char *s = dot_text(g, NULL, 0, path);
    expect_has(s, "\\ngraph error: matmul: inner dims differ: [2, 4, 64] x [32, 64]\"");
    expect_dot_accepts(path, dir);
    free(s);
    ag_graph_free(g);
}

Test(viz, dot_errors_name_the_path_and_leave_no_files)
{
    char path[160], err[256];
    ag_graph *g = ag_graph_new(), *other = ag_graph_new();
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2));
    ag_exp(g, x);
    /* a directory that does not exist */
    snprintf(path, sizeof path, "%s/no/such/dir/g.dot", dir);
    cr_assert_eq(ag_graph_write_dot(g, NULL, 0, path, err, sizeof err), AG_ERR_IO);
    expect_has(err, path);
    expect_has(err, "dot: ");
    /* a root from another graph */
    snprintf(path, sizeof path, "%s/g.dot", dir);
    ag_tensor *stranger = ag_set_name(ag_tensor_new(other, AG_SHAPE(3)), "stranger");
    cr_assert_eq(ag_graph_write_dot(g, stranger, 0, path, err, sizeof err), AG_ERR_ARG);
    expect_has(err, "stranger [3] is not on the graph's tape");
    cr_assert_eq(ag_graph_write_dot(NULL, NULL, 0, path, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_graph_write_dot(g, NULL, 0, NULL, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_graph_write_dot(g, NULL, 0, "", NULL, 0), AG_ERR_ARG, "empty path, no err buffer");
    cr_assert_eq(count_entries(dir, NULL, 0), 0, "nothing written, no temporary file left");
    /* success replaces an existing file and leaves only it */
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    char *s = dot_text(g, NULL, 0, path);
    expect_has(s, "digraph");
    cr_assert_eq(count_entries(dir, NULL, 0), 1);
    free(s);
    ag_graph_free(g);
    ag_graph_free(other);
}

/* b = a + c where a also feeds a * a: the picture shows b's own gradient
 * (1 everywhere) when it is retained, and no gradient when backward lent
 * b's buffer to a, never a's gradient (1 + 2a) under b's name. */
Test(viz, dot_never_shows_an_input_gradient_as_an_add_gradient)
{
    char path[128];
    snprintf(path, sizeof path, "%s/add.dot", dir);
    ag_store *st = ag_store_new();
    ag_tensor *x = ag_param(st, "x", AG_SHAPE(3));
    x->data[0] = 1, x->data[1] = -0.5, x->data[2] = 2;
    ag_graph *g = ag_graph_new();
    ag_graph_set_keep_grads(g, 1); /* reads intermediates' gradients */
    for (int retain = 0; retain < 2; retain++) {
        ag_graph_reset(g);
        ag_tensor *a = ag_set_name(ag_tanh(g, x), "a");
        ag_tensor *aa = ag_sum_all(g, ag_mul(g, a, a));
        ag_tensor *b = ag_set_name(ag_add(g, a, ag_tensor_new(g, AG_SHAPE(3))), "b");
        if (retain) ag_retain_grad(b);
        cr_assert_eq(ag_backward(g, ag_add(g, aa, ag_sum_all(g, b))), AG_OK, "%s", ag_graph_error(g));
        char *s = dot_text(g, NULL, AG_DOT_GRADS, path);
        if (retain) expect_has(s, "label=\"b = add\\n[3]\\ngrad min 1  max 1  norm 1.73\"");
        else expect_has(s, "label=\"b = add\\n[3]\"");
        expect_has(s, "label=\"a = tanh\\n[3]\\ngrad min ");
        expect_dot_accepts(path, dir);
        free(s);
    }
    ag_graph_free(g);
    ag_store_free(st);
}

/* An op refuses a tensor of another graph: the picture shows the error. */
Test(viz, dot_shows_the_error_of_a_tensor_from_another_graph)
{
    char path[128];
    snprintf(path, sizeof path, "%s/s.dot", dir);
    ag_graph *g = ag_graph_new(), *other = ag_graph_new();
    ag_tensor *e = ag_set_name(ag_tensor_new(other, AG_SHAPE(2)), "enc");
    ag_tensor *x = ag_tensor_new(g, AG_SHAPE(2));
    cr_assert_null(ag_add(g, x, e));
    char *s = dot_text(g, NULL, 0, path);
    expect_has(s, "label=\"input\\n[2]\"");
    expect_has(s, "graph error: add: input 1 'enc' [2] is from another graph");
    expect_lacks(s, "enc\\n[2]");
    expect_dot_accepts(path, dir);
    free(s);
    ag_graph_free(g);
    ag_graph_free(other);
}

/* ---- heatmaps -------------------------------------------------------------------- */

Test(viz, heatmap_is_well_formed_escaped_and_has_tooltips)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/h.svg", dir);
    const char *rows[2] = {"<bos>", "l'homme"};
    const char *cols[3] = {"\"q\"", "a&b", "ok"};
    const ag_real w[6] = {0.25, 0.75, 0, 0.5, 0.125, 0.375};
    cr_assert_eq(ag_svg_heatmap(path, "Cross <attention> & \"co\"", rows, 2, cols, 3, w, err, sizeof err), AG_OK,
                 "%s", err);
    char *s = read_file(path, NULL);
    expect_has(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    expect_has(s, "&lt;bos&gt;");
    expect_has(s, "l&apos;homme");
    expect_has(s, "&quot;q&quot;");
    expect_has(s, "a&amp;b");
    expect_has(s, "Cross &lt;attention&gt; &amp; &quot;co&quot;");
    expect_lacks(s, "<bos>");
    expect_lacks(s, "l'homme");
    expect_lacks(s, "a&b");
    /* one cell per weight, all coloured: a 0 without a mask is a weight like
     * any other; tooltips carry the weight */
    cr_assert_eq(count(s, "class=\"cell"), 6);
    cr_assert_eq(count(s, "class=\"cell\""), 6);
    expect_has(s, "<title>query \"&lt;bos&gt;\" \xe2\x86\x92 key \"a&amp;b\": 0.75</title>");
    expect_has(s, "<title>query \"l&apos;homme\" \xe2\x86\x92 key \"ok\": 0.375</title>");
    expect_has(s, "<title>query \"&lt;bos&gt;\" \xe2\x86\x92 key \"ok\": 0</title>");
    /* a colour scale: the gradient and its ticks, no masked swatch */
    expect_has(s, "fill=\"url(#ag-viridis)\"");
    expect_lacks(s, ">masked</text>");
    /* the scale is 0..1 whatever the weights: 0.75 is not the top colour,
     * and the top tick reads 1.0 */
    expect_lacks(s, "fill=\"#fde725\"");
    expect_has(s, ">1.0</text>");
    expect_has(s, ">0.0</text>");
    expect_finite_coordinates(s);
    expect_well_formed(path);
    cr_assert_eq(count_entries(dir, NULL, 0), 1, "no temporary file left");
    free(s);
}

Test(viz, causal_heatmap_draws_masked_cells_from_the_mask)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/causal.svg", dir);
    /* a causal softmax: row t spreads over keys 0..t */
    enum { T = 5 };
    ag_real w[T * T] = {0};
    for (int t = 0; t < T; t++)
        for (int u = 0; u <= t; u++) w[t * T + u] = (ag_real)(1.0 / (t + 1));
    const char *tok[T] = {"t0", "t1", "t2", "t3", "t4"};
    /* the causal mask, and one allowed weight that is exactly 0 (a
     * saturated row): it must be coloured, not drawn masked */
    ag_real mask[T * T];
    for (int t = 0; t < T; t++)
        for (int u = 0; u < T; u++) mask[t * T + u] = u <= t;
    w[4 * T + 0] = 0;
    ag_heatmap_spec spec = {.rows = T, .cols = T, .row_labels = tok, .col_labels = tok, .w = w, .mask = mask};
    cr_assert_eq(ag_svg_heatmaps(path, &spec, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert_eq(count(s, "class=\"cell masked\""), T * (T - 1) / 2);
    expect_has(s, ">masked</text>");
    expect_has(s, "key \"t0\": 0</title>");
    expect_has(s, "key \"t4\": 0 (masked)</title>");
    /* every masked cell is above the diagonal: key > query */
    int checked = 0;
    for (const char *p = strstr(s, "class=\"cell masked\""); p; p = strstr(p + 1, "class=\"cell masked\"")) {
        const char *q = strstr(p, "<title>query \"t");
        cr_assert_not_null(q);
        int r = -1, c = -1;
        cr_assert_eq(sscanf(q, "<title>query \"t%d\" \xe2\x86\x92 key \"t%d", &r, &c), 2);
        cr_assert_gt(c, r, "empty cell at query %d, key %d", r, c);
        checked++;
    }
    cr_assert_eq(checked, T * (T - 1) / 2);
    /* and every cell on or below it is coloured, its value written in it */
    cr_assert_eq(count(s, "class=\"cell\""), T * (T + 1) / 2);
    expect_has(s, ">0.33</text>");
    expect_finite_coordinates(s);
    expect_well_formed(path);
    free(s);
}

Test(viz, heatmap_grid_has_a_panel_per_head_and_survives_nan)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/grid.svg", dir);
    enum { P = 3, R = 2, C = 4 };
    ag_real w[P * R * C];
    for (int i = 0; i < P * R * C; i++) w[i] = (ag_real)((i % 7) / 7.0);
    w[5] = (ag_real)NAN;
    w[6] = (ag_real)INFINITY;
    const char *titles[P] = {"head <0>", NULL, "head 2"};
    cr_assert_eq(ag_svg_heatmap_grid(path, "grid", P, titles, R, C, NULL, NULL, w, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert_eq(count(s, "<g class=\"panel\">"), P);
    cr_assert_eq(count(s, "class=\"cell"), P * R * C);
    expect_has(s, ">head &lt;0&gt;</text>");
    expect_has(s, ">head 1</text>"); /* the default title */
    expect_has(s, "<title>head 2: query \"1\" \xe2\x86\x92 key \"3\"");
    expect_has(s, ": NaN</title>");
    expect_has(s, ": +inf</title>");
    /* the two non-finite weights are empty; zeros (i % 7 == 0) are coloured */
    cr_assert_eq(count(s, "class=\"cell empty\""), 2);
    expect_finite_coordinates(s);
    expect_well_formed(path);
    free(s);
}

Test(viz, heatmap_replaces_bad_utf8_and_cuts_long_labels)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/utf8.svg", dir);
    const char *rows[2] = {"\xff\x01ok\xc3\xa9", "\xed\xa0\x80x"}; /* junk, control, é; a surrogate */
    const char *cols[1] = {"abcdefghijklmnopqrstuvwxyz"};
    const ag_real w[2] = {0.5, 1};
    cr_assert_eq(ag_svg_heatmap(path, "t", rows, 2, cols, 1, w, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    expect_has(s, ">??ok\xc3\xa9</text>");
    expect_has(s, ">???x</text>");
    /* 16 characters at most in an axis label: 15 and an ellipsis; the
     * tooltip keeps the whole token */
    expect_has(s, ">abcdefghijklmno\xe2\x80\xa6</text>");
    expect_has(s, "key \"abcdefghijklmnopqrstuvwxyz\"");
    expect_well_formed(path);
    free(s);
}

Test(viz, attention_heatmap_from_a_weights_tensor)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/att.svg", dir);
    ag_graph *g = ag_graph_new();
    /* softmax of [B=2, H=2, T=2, S=3] scores: rows sum to 1 */
    ag_tensor *scores = ag_tensor_new(g, AG_SHAPE(2, 2, 2, 3));
    for (size_t i = 0; i < scores->size; i++) scores->data[i] = (ag_real)(i % 5);
    ag_tensor *w = ag_softmax(g, scores);
    const char *q[2] = {"je", "suis"}, *k[3] = {"i", "am", "."};
    cr_assert_eq(ag_svg_attention(path, "layer 1", w, 1, q, k, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert_eq(count(s, "<g class=\"panel\">"), 2);
    /* head 1, query "suis", key ".": element [1, 1, 1, 2] */
    char want[160];
    snprintf(want, sizeof want,
             "<title>head 1: query \"suis\" \xe2\x86\x92 key \".\": %.4g</title>",
             (double)w->data[((1 * 2 + 1) * 2 + 1) * 3 + 2]);
    expect_has(s, want);
    expect_well_formed(path);
    /* errors: batch element out of range, a rank that is no attention */
    cr_assert_eq(ag_svg_attention(path, NULL, w, 2, q, k, err, sizeof err), AG_ERR_SHAPE);
    expect_has(err, "batch element 2 out of range for [2, 2, 2, 3]");
    expect_has(err, path);
    ag_tensor *v = ag_tensor_new(g, AG_SHAPE(3));
    cr_assert_eq(ag_svg_attention(path, NULL, v, 0, NULL, NULL, err, sizeof err), AG_ERR_SHAPE);
    expect_has(err, "got [3]");
    cr_assert_eq(ag_svg_attention(path, NULL, NULL, 0, NULL, NULL, err, sizeof err), AG_ERR_ARG);
    free(s);
    ag_graph_free(g);
}

Test(viz, attention_heatmap_takes_masked_cells_from_a_broadcast_mask)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/attm.svg", dir);
    ag_graph *g = ag_graph_new();
    /* [B=2, H=3, T=2, S=4] weights, a padding mask [B, 1, 1, S]: sentence 1
     * keeps 3 keys, so key 3 is masked in every head and every query */
    ag_tensor *w = ag_tensor_new(g, AG_SHAPE(2, 3, 2, 4));
    ag_init_const(w, 0.25);
    const int valid[2] = {4, 3};
    ag_tensor *mask = ag_padding_mask(g, valid, 2, 0, 2, 4);
    cr_assert_eq(ag_svg_attention_masked(path, NULL, w, 1, mask, NULL, NULL, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert_eq(count(s, "class=\"cell masked\""), 3 * 2);
    cr_assert_eq(count(s, "key \"3\": 0.25 (masked)</title>"), 3 * 2);
    free(s);
    /* sentence 0 keeps every key */
    cr_assert_eq(ag_svg_attention_masked(path, NULL, w, 0, mask, NULL, NULL, err, sizeof err), AG_OK, "%s", err);
    s = read_file(path, NULL);
    cr_assert_eq(count(s, "class=\"cell masked\""), 0);
    free(s);
    /* a mask that does not broadcast; a colour scale upside down */
    ag_tensor *bad = ag_tensor_new(g, AG_SHAPE(2, 1, 1, 5));
    cr_assert_eq(ag_svg_attention_masked(path, NULL, w, 0, bad, NULL, NULL, err, sizeof err), AG_ERR_SHAPE);
    expect_has(err, "mask [2, 1, 1, 5] does not broadcast to the weights [2, 3, 2, 4]");
    ag_heatmap_spec spec = {.rows = 1, .cols = 1, .w = w->data, .lo = 1, .hi = -1};
    cr_assert_eq(ag_svg_heatmaps(path, &spec, err, sizeof err), AG_ERR_ARG);
    expect_has(err, "colour scale [1, -1]");
    ag_graph_free(g);
}

Test(viz, heatmap_errors)
{
    char path[160], err[256];
    const ag_real w[1] = {1};
    snprintf(path, sizeof path, "%s/h.svg", dir);
    cr_assert_eq(ag_svg_heatmap(path, NULL, NULL, 0, NULL, 1, w, err, sizeof err), AG_ERR_ARG);
    expect_has(err, "1 panels of 0 x 1 cells");
    cr_assert_eq(ag_svg_heatmap(path, NULL, NULL, 1, NULL, 1, NULL, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_svg_heatmaps(path, NULL, err, sizeof err), AG_ERR_ARG);
    snprintf(path, sizeof path, "%s/missing/h.svg", dir);
    cr_assert_eq(ag_svg_heatmap(path, NULL, NULL, 1, NULL, 1, w, err, sizeof err), AG_ERR_IO);
    expect_has(err, "heatmap: ");
    expect_has(err, "cannot create the temporary file");
    expect_has(err, path);
    cr_assert_eq(count_entries(dir, NULL, 0), 0);
}

/* A picture aimed at a FIFO or a device is refused, and the FIFO stays one
 * (svg and dot save through the same crash-safe writer as checkpoints). */
Test(viz, pictures_refuse_a_fifo_or_a_device_target)
{
    char path[160], err[256];
    const ag_real w[1] = {1};
    snprintf(path, sizeof path, "%s/pipe", dir);
    cr_assert_eq(mkfifo(path, 0644), 0, "mkfifo: %s", strerror(errno));
    cr_assert_eq(ag_svg_heatmap(path, NULL, NULL, 1, NULL, 1, w, err, sizeof err), AG_ERR_IO);
    expect_has(err, "heatmap: ");
    expect_has(err, "it is a FIFO, not a regular file");
    ag_graph *g = ag_graph_new();
    ag_exp(g, ag_tensor_new(g, AG_SHAPE(2)));
    cr_assert_eq(ag_graph_write_dot(g, NULL, 0, path, err, sizeof err), AG_ERR_IO);
    expect_has(err, "dot: ");
    struct stat sb;
    cr_assert_eq(lstat(path, &sb), 0);
    cr_assert(S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    cr_assert_eq(ag_graph_write_dot(g, NULL, 0, "/dev/full", err, sizeof err), AG_ERR_IO);
    expect_has(err, "character device");
    cr_assert_eq(stat("/dev/full", &sb), 0);
    cr_assert(S_ISCHR(sb.st_mode));
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(count_entries(dir, NULL, 0), 0, "no temporary file left");
    ag_graph_free(g);
}

/* ---- line plots ------------------------------------------------------------------ */

Test(viz, line_plot_has_axes_legend_and_skips_nan)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    const double train[6] = {4.0, 3.2, NAN, 2.5, 2.25, 2.0};
    const double test[4] = {3.5, 3.0, 2.9, INFINITY};
    const double *y[2] = {train, test};
    const int n[2] = {6, 4};
    const char *names[2] = {"training", "held-out <test>"};
    cr_assert_eq(ag_svg_line_plot(path, "loss per epoch", "epoch", "loss", 2, names, y, n, err, sizeof err), AG_OK,
                 "%s", err);
    char *s = read_file(path, NULL);
    expect_has(s, ">loss per epoch</text>");
    expect_has(s, ">epoch</text>");
    expect_has(s, ">loss</text>");
    expect_has(s, ">training</text>");
    expect_has(s, ">held-out &lt;test&gt;</text>");
    /* training breaks at the NaN into two runs; held-out is one run of 3 */
    cr_assert_eq(count(s, "<polyline points=\"") - 1, 3, "two runs + one run, besides the axes");
    cr_assert_eq(count(s, "<circle "), 5 + 3, "a point per finite value");
    expect_has(s, "<title>training, epoch 4: 2.5</title>");
    expect_has(s, "<title>held-out &lt;test&gt;, epoch 3: 2.9</title>");
    expect_lacks(s, "epoch 3: nan");
    /* x ticks 1..6, y ticks at round values spanning 2.0 .. 4.0 */
    expect_has(s, ">6</text>");
    expect_has(s, ">2.0</text>");
    expect_has(s, ">4.0</text>");
    expect_finite_coordinates(s);
    expect_well_formed(path);
    free(s);
}

Test(viz, line_plot_degenerate_series)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/p.svg", dir);
    /* one point; all NaN; empty; a constant series */
    const double one[1] = {7}, nan2[2] = {NAN, NAN}, flat[3] = {0, 0, 0};
    const double *y[4] = {one, nan2, NULL, flat};
    const int n[4] = {1, 2, 0, 3};
    cr_assert_eq(ag_svg_line_plot(path, NULL, NULL, NULL, 4, NULL, y, n, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    expect_has(s, ">series 4</text>");
    cr_assert_eq(count(s, "<circle "), 1 + 3);
    expect_finite_coordinates(s);
    expect_well_formed(path);
    free(s);
    /* huge values keep coordinates finite */
    const double huge[2] = {-1e308, 1e308};
    const double *yh[1] = {huge};
    const int nh[1] = {2};
    cr_assert_eq(ag_svg_line_plot(path, NULL, NULL, NULL, 1, NULL, yh, nh, err, sizeof err), AG_OK, "%s", err);
    s = read_file(path, NULL);
    expect_finite_coordinates(s);
    free(s);
}

Test(viz, line_plot_errors)
{
    char path[160], err[256];
    const double v[2] = {1, 2};
    const double *y[1] = {v};
    const int n[1] = {2}, bad[1] = {-1};
    snprintf(path, sizeof path, "%s/no/dir/loss.svg", dir);
    cr_assert_eq(ag_svg_line_plot(path, NULL, NULL, NULL, 1, NULL, y, n, err, sizeof err), AG_ERR_IO);
    expect_has(err, "plot: ");
    expect_has(err, "cannot create the temporary file");
    expect_has(err, path);
    cr_assert_eq(ag_svg_line_plot(path, NULL, NULL, NULL, 0, NULL, y, n, err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_svg_line_plot(path, NULL, NULL, NULL, 1, NULL, y, bad, err, sizeof err), AG_ERR_ARG);
    expect_has(err, "series 0 has -1 points");
    cr_assert_eq(count_entries(dir, NULL, 0), 0);
}
