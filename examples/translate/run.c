/* examples/translate/run.c: translate run: the sentences given as arguments,
 * or each line of stdin, translated to one output line each; with
 * --attention DIR, every layer's attention drawn for each sentence.
 *
 * Input is held to the data reader's rules (ag_pairs_load): a line with a
 * NUL byte or with invalid UTF-8 is skipped with a warning "stdin:LINE:
 * why; line skipped" (for arguments "argument N: ..."), and answered by an
 * empty output line, so that output line i always answers input line i.
 * A line of more than AG_PAIRS_MAX_LINE bytes is cut to its words in the
 * first AG_PAIRS_MAX_LINE bytes, far more than the model's max_len tokens
 * (which the encoding cuts to anyway), with a warning naming the line.  A
 * line of any length is read as one line, in bounded memory.  Exit 1 when
 * no line was good.
 *
 * The explorer's data (every sentence's attention maps) goes to --html
 * PAGE.html (the page), --json FILE (the JSON alone; "-": stdout, which
 * then carries nothing else) and --live PAGE.html (the page that runs this
 * program, compiled to WebAssembly, on the sentences a learner types: it
 * holds build/wasm/translate.wasm and the model's weights).
 *
 * --head-off KIND:LAYER:HEAD switches a head off: its output is multiplied
 * by 0 before the layer's output map W_o, by setting the head's D columns
 * of W_o to 0.  Its weights are still computed and drawn; what the layer
 * passes on no longer holds them, so the translation may change. */
#include "translate.h"
#include "../common/explorer_stream.h"
#include "../common/live_page.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- input lines ------------------------------------------------------------- */

/* Offset of the first byte of s[0..n) that does not begin a well-formed
 * UTF-8 sequence (RFC 3629: no overlong form, no surrogate, nothing past
 * U+10FFFF), or n: the data reader's rule. */
static size_t utf8_bad_at(const unsigned char *s, size_t n)
{
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* smallest code point per length */
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
        if (!len || n - i < (size_t)len) return i;
        uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += (size_t)len;
    }
    return n;
}

/* Why the data reader would refuse line s[0..n), in why; NULL when it
 * would not. */
static const char *line_problem(const char *s, size_t n, char *why, size_t len)
{
    const char *nul = n <= AG_PAIRS_MAX_LINE ? memchr(s, '\0', n) : NULL;
    size_t bad = n <= AG_PAIRS_MAX_LINE && !nul ? utf8_bad_at((const unsigned char *)s, n) : n;
    if (n > AG_PAIRS_MAX_LINE) snprintf(why, len, "line is %zu bytes long, more than %d", n, AG_PAIRS_MAX_LINE);
    else if (nul) snprintf(why, len, "NUL byte at column %zu", (size_t)(nul - s) + 1);
    else if (bad < n) snprintf(why, len, "invalid UTF-8 at column %zu", bad + 1);
    else return NULL;
    return why;
}

/* Where a line s of n bytes is cut to fit AG_PAIRS_MAX_LINE: n when it
 * fits; else at the last space or tab of its first AG_PAIRS_MAX_LINE bytes,
 * so that no word is cut in half, or (one word longer than that) at the
 * last character boundary.  s holds at least AG_PAIRS_MAX_LINE + 1 bytes. */
static size_t fit_length(const char *s, size_t n)
{
    if (n <= AG_PAIRS_MAX_LINE) return n;
    size_t cut = AG_PAIRS_MAX_LINE;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--; /* s[cut] begins a character */
    for (size_t i = cut; i > 0; i--)
        if (s[i] == ' ' || s[i] == '\t') return i;
    return cut;
}

/* Cut line s (n bytes, in a buffer of at least AG_PAIRS_MAX_LINE + 1) to
 * what the model can take, with a warning naming it (where: "stdin:3"). */
static size_t cut_long_line(char *s, size_t n, const char *where, int max_len)
{
    size_t k = fit_length(s, n);
    if (k < n)
        fprintf(stderr, "%s: warning: %s: line is %zu bytes long; translating its first %zu bytes (the model reads "
                "at most %d tokens)\n", prog, where, n, k, max_len);
    s[k] = '\0';
    return k;
}

/* The next line of f, its '\n' and a final '\r' removed: its first
 * AG_PAIRS_MAX_LINE + 1 bytes into buf (NUL-terminated), its full length in
 * *n.  Returns 0 at the end of the input. */
static int read_line(FILE *f, char buf[AG_PAIRS_MAX_LINE + 2], size_t *n)
{
    int c, last = 0;
    size_t len = 0;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (len <= AG_PAIRS_MAX_LINE) buf[len] = (char)c;
        len++, last = c;
    }
    if (c == EOF && len == 0) return 0;
    if (last == '\r') len--;
    buf[len <= AG_PAIRS_MAX_LINE ? len : AG_PAIRS_MAX_LINE + 1] = '\0';
    *n = len;
    return 1;
}

/* ---- attention pictures --------------------------------------------------------- */

/* One sentence's forward pass with every layer's attention weights: the
 * source as encoded, the decoder's input (<bos> + the output), the labels
 * of both (what each position reads). */
typedef struct traced {
    int S, T;
    const char *src_lab[MAX_LEN_MAX], *tgt_lab[MAX_LEN_MAX];
    ag_seq2seq_weights w;
    ag_tensor *logits; /* [1, T, Vt] */
} traced;

static int trace_sentence(const model *m, ag_graph *g, const char *const *src, int ns, const char *const *out, int no,
                          traced *tr)
{
    int L = m->cfg.max_len, valid, ids[MAX_LEN_MAX], tin[MAX_LEN_MAX];
    tr->T = no + 1 < L ? no + 1 : L;
    ag_encode(m->sv, src, ns, L, ids, &valid);
    tr->S = valid;
    for (int s = 0; s < tr->S; s++) tr->src_lab[s] = s < ns ? src[s] : "<eos>";
    tin[0] = AG_BOS;
    tr->tgt_lab[0] = "<bos>";
    for (int t = 1; t < tr->T; t++) tin[t] = ag_vocab_id(m->tv, out[t - 1]), tr->tgt_lab[t] = out[t - 1];
    ag_graph_reset(g);
    tr->logits = ag_seq2seq_trace(g, &m->net, ids, &valid, 1, tr->S, tin, tr->T, &tr->w);
    if (ag_graph_status(g) != AG_OK) {
        fprintf(stderr, "%s: attention: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    return 0;
}

/* Heatmaps of every layer's attention for sentence i: dir/<i>-encoder-<l>.svg
 * (source x source), dir/<i>-decoder-<l>.svg (causal, target x target) and
 * dir/<i>-cross-<l>.svg (target x source). */
static int write_attention(const model *m, ag_graph *g, const char *dir, int index, const char *const *src, int ns,
                           const char *const *out, int no)
{
    char err[512], path[4096], title[256];
    traced tr;
    if (trace_sentence(m, g, src, ns, out, no, &tr)) return 1;
    int T = tr.T;
    const ag_seq2seq_weights w = tr.w;
    const char *const *src_lab = tr.src_lab, *const *tgt_lab = tr.tgt_lab;
    /* the decoder's self-attention was computed under the causal mask: its
     * cells above the diagonal are drawn masked (one sentence: no padding) */
    ag_tensor *causal = ag_causal_mask(g, T, T);
    if (!causal) {
        fprintf(stderr, "%s: attention: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    for (int l = 0; l < w.layers; l++) {
        struct {
            const char *kind, *what;
            const ag_tensor *t, *mask;
            const char *const *rows, *const *cols;
        } maps[3] = {{"encoder", "encoder self-attention", w.enc_self[l], NULL, src_lab, src_lab},
                     {"decoder", "decoder causal self-attention", w.dec_self[l], causal, tgt_lab, tgt_lab},
                     {"cross", "cross-attention (rows: target, columns: source)", w.dec_cross[l], NULL, tgt_lab,
                      src_lab}};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/%d-%s-%d.svg", dir, index, maps[k].kind, l);
            snprintf(title, sizeof title, "layer %d %s", l, maps[k].what);
            if (ag_svg_attention_masked(path, title, maps[k].t, 0, maps[k].mask, maps[k].rows, maps[k].cols, err,
                                        sizeof err) != AG_OK) {
                fprintf(stderr, "%s: %s\n", prog, err);
                return 1;
            }
        }
    }
    return 0;
}


/* The embeddings, the feed-forward layers and the output of a traced
 * sentence (on g), for the explorer's other views: "embeddings", "ffn",
 * "output", "norms" and "residuals" (explorer_stream.h).  Row t of the decoder predicts target token t + 1: the
 * translation's, then <eos> (greedy decoding stops there, or at max_len). */
static int explore_inside(const model *m, ag_graph *g, FILE *f, const traced *tr, const char *const *out, int no)
{
    int S = tr->S, T = tr->T, V = ag_vocab_size(m->tv), next[MAX_LEN_MAX], bad = 0;
    char name[64];
    const char **vocab = malloc((size_t)V * sizeof *vocab);
    ag_tensor *probs = ag_softmax(g, tr->logits);
    if (!vocab || !probs) {
        free(vocab);
        fprintf(stderr, "%s: --html: %s\n", prog, vocab ? ag_graph_error(g) : "out of memory");
        return 1;
    }
    for (int v = 0; v < V; v++) vocab[v] = ag_vocab_token(m->tv, v);
    for (int t = 0; t < T; t++) next[t] = t < no ? ag_vocab_id(m->tv, out[t]) : AG_EOS;
    fprintf(f, ",\n\"embeddings\": [");
    bad |= json_embedding(f, g, m->net.src_embedding, "encoder input (source)", tr->src_lab, S, "E[token] * sqrt(C)",
                          "sinusoidal position");
    fprintf(f, ",\n");
    bad |= json_embedding(f, g, m->net.tgt_embedding, "decoder input (target)", tr->tgt_lab, T, "E[token] * sqrt(C)",
                          "sinusoidal position");
    fprintf(f, "],\n\"ffn\": [");
    for (int l = 0; l < m->cfg.layers; l++) {
        snprintf(name, sizeof name, "encoder layer %d", l);
        fprintf(f, "%s\n", l ? "," : ""), bad |= json_ffn(f, g, &m->net.enc[l].ffn, name, l, tr->src_lab, S);
    }
    for (int l = 0; l < m->cfg.layers; l++) {
        snprintf(name, sizeof name, "decoder layer %d", l);
        fprintf(f, ",\n"), bad |= json_ffn(f, g, &m->net.dec[l].ffn, name, l, tr->tgt_lab, T);
    }
    fprintf(f, "],\n\"output\": ");
    json_output(f, tr->logits->data, probs->data, T, V, vocab, tr->tgt_lab, next, "the translation, then <eos>");
    free(vocab);
    if (bad) fprintf(stderr, "%s: --html: the embeddings or a feed-forward layer are not on the graph\n", prog);
    static const char *const enc[] = {"encoder"}, *const dec[] = {"decoder", "cross"};
    const ag_seq2seq_config *c = &m->cfg;
    double eps = m->net.enc[0].norm1.eps;
    const explorer_stack st[2] = {{"encoder", "encoder block", enc, 1, c->layers, 1, c->pre_norm, 1, eps, tr->src_lab, S},
                                  {"decoder", "decoder block", dec, 2, c->layers, 1, c->pre_norm, 1, eps, tr->tgt_lab, T}};
    const ag_tensor *tok, *pos, *x[2] = {NULL, NULL};
    explorer_embedding(g, m->net.src_embedding, &tok, &pos, &x[0]);
    explorer_embedding(g, m->net.tgt_embedding, &tok, &pos, &x[1]);
    bad |= json_streams(f, g, x, st, 2, prog);
    return bad;
}

/* Sentence index's views for the explorer page (--html): every layer's
 * encoder self-attention, decoder causal self-attention and
 * cross-attention, each head's weights, scores, q and k; the embeddings,
 * the feed-forward layers, the output distribution. */
static int explore_sentence(const model *m, ag_graph *g, FILE *f, int index, const char *line,
                            const char *const *src, int ns, const char *const *out, int no)
{
    traced tr;
    if (trace_sentence(m, g, src, ns, out, no, &tr)) return 1;
    fprintf(f, "%s\n{\"name\": ", index ? "," : ""), json_string(f, line);
    fprintf(f, ", \"translation\": "), json_strings(f, out, no), fprintf(f, ", \"maps\": [");
    for (int l = 0; l < tr.w.layers; l++) {
        explorer_map maps[3] = {
            {"encoder self-attention", "encoder", l, "source (query)", "source (key)", tr.src_lab, tr.src_lab},
            {"decoder causal self-attention", "decoder", l, "target (query)", "target (key)", tr.tgt_lab, tr.tgt_lab},
            {"cross-attention", "cross", l, "target (query)", "source (key)", tr.tgt_lab, tr.src_lab}};
        const ag_tensor *P[3] = {tr.w.enc_self[l], tr.w.dec_self[l], tr.w.dec_cross[l]};
        for (int k = 0; k < 3; k++) {
            fprintf(f, "%s\n", l || k ? "," : "");
            if (json_attention_map(f, g, P[k], 0, &maps[k])) {
                fprintf(stderr, "%s: --html: %s\n", prog, ag_graph_error(g));
                return 1;
            }
        }
    }
    fprintf(f, "]");
    if (explore_inside(m, g, f, &tr, out, no)) return 1;
    fprintf(f, "}");
    return 0;
}

/* ---- translating -------------------------------------------------------------- */

/* Where the pictures of each sentence go: --attention's directory, the
 * --html page's JSON (sentences written so far in `inputs`). */
typedef struct pictures {
    const char *dir;
    FILE *html;
    int inputs;
    FILE *out; /* the translations: stdout, or NULL when the JSON takes it */
} pictures;

/* Translate lines[0..n) (UTF-8, checked) in one batch and print one line
 * each; the pictures of line i are numbered first + i. */
static int run_sentences(const model *m, ag_graph *g, char **lines, int n, pictures *pic, int first)
{
    int rc = 1;
    char **bufs = calloc((size_t)n, sizeof *bufs);
    const char ***toks = calloc((size_t)n, sizeof *toks);
    int *lens = calloc((size_t)n, sizeof(int)), *olen = calloc((size_t)n, sizeof(int));
    const char ***out = calloc((size_t)n, sizeof *out);
    if (!bufs || !toks || !lens || !olen || !out) goto nomem;
    for (int i = 0; i < n; i++) {
        size_t cap = 2 * strlen(lines[i]) + 2;
        bufs[i] = malloc(cap);
        toks[i] = malloc(MAX_LEN_MAX * sizeof(char *));
        out[i] = malloc((size_t)m->cfg.max_len * sizeof(char *));
        if (!bufs[i] || !toks[i] || !out[i]) goto nomem;
        ag_text_preprocess(lines[i], bufs[i], cap);
        /* more tokens than positions are cut by the encoding anyway */
        int k = ag_text_tokenize(bufs[i], (char **)toks[i], MAX_LEN_MAX);
        lens[i] = k < 0 ? MAX_LEN_MAX : k;
    }
    if (translate_batch(m, g, (const char *const *const *)toks, lens, n, out, olen)) goto free_all;
    for (int i = 0; i < n; i++) {
        for (int t = 0; pic->out && t < olen[i]; t++) fprintf(pic->out, "%s%s", t ? " " : "", out[i][t]);
        if (pic->out) fprintf(pic->out, "\n");
    }
    fflush(stdout);
    for (int i = 0; pic->dir && i < n; i++)
        if (write_attention(m, g, pic->dir, first + i, toks[i], lens[i], out[i], olen[i])) goto free_all;
    for (int i = 0; pic->html && i < n; i++)
        if (explore_sentence(m, g, pic->html, pic->inputs++, lines[i], toks[i], lens[i], out[i], olen[i]))
            goto free_all;
    rc = 0;
    goto free_all;
nomem:
    fprintf(stderr, "%s: out of memory translating %d sentences\n", prog, n);
free_all:
    for (int i = 0; bufs && i < n; i++) {
        free(bufs[i]);
        if (toks) free(toks[i]);
        if (out) free(out[i]);
    }
    free(bufs), free(toks), free(lens), free(olen), free(out);
    return rc;
}

/* The good arguments in one batch; a bad one gets a warning and an empty
 * line, in its place. */
static int run_arguments(const model *m, ag_graph *g, char **sentences, int n, pictures *pic, int *good,
                         int *skipped)
{
    char why[128], where[32];
    for (int i = 0; i < n; i++) { /* arguments are ours to cut: argv's strings are writable */
        snprintf(where, sizeof where, "argument %d", i + 1);
        cut_long_line(sentences[i], strlen(sentences[i]), where, m->cfg.max_len);
    }
    for (int at = 0; at < n;) {
        int end = at; /* [at, end): a run of good ones */
        while (end < n && !line_problem(sentences[end], strlen(sentences[end]), why, sizeof why)) end++;
        if (end > at && run_sentences(m, g, sentences + at, end - at, pic, at)) return 1;
        *good += end - at;
        if (end < n) {
            fprintf(stderr, "%s: warning: argument %d: %s; line skipped\n", prog, end + 1, why);
            if (pic->out) fprintf(pic->out, "\n");
            ++*skipped;
        }
        at = end + 1;
    }
    return 0;
}

/* Each line of stdin, one at a time (a pipe gets its answers as it goes). */
static int run_stdin(const model *m, ag_graph *g, pictures *pic, int *good, int *skipped)
{
    static char line[AG_PAIRS_MAX_LINE + 2];
    char why[128], where[32];
    size_t n;
    for (int k = 0; read_line(stdin, line, &n); k++) {
        snprintf(where, sizeof where, "stdin:%d", k + 1);
        n = cut_long_line(line, n, where, m->cfg.max_len);
        if (line_problem(line, n, why, sizeof why)) {
            fprintf(stderr, "%s: warning: stdin:%d: %s; line skipped\n", prog, k + 1, why);
            if (pic->out) fprintf(pic->out, "\n");
            ++*skipped;
            continue;
        }
        char *one[1] = {line};
        if (run_sentences(m, g, one, 1, pic, k)) return 1;
        ++*good;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "%s: stdin: %s\n", prog, strerror(errno));
        return 1;
    }
    return 0;
}

/* The model's shape, from which the page draws its overview: N encoder and
 * N decoder blocks of H heads, widths C and F, post- or pre-norm. */
static void json_config(FILE *f, const ag_seq2seq_config *c)
{
    fprintf(f, "\"config\": {\"layers\": %d, \"heads\": %d, \"hidden\": %d, \"ffn\": %d, \"vocab\": %d, "
               "\"src_vocab\": %d, \"positions\": \"sinusoidal\", \"pre_norm\": %d, \"qk_norm\": %d}, ",
            c->layers, c->heads, c->hidden, c->ffn, c->tgt_vocab, c->src_vocab, c->pre_norm != 0, c->qk_norm != 0);
}

#define TITLE "attograd explorer: inside the translator"

/* The explorer's data (len bytes of JSON) to each output asked for:
 * --html, --json, --live.  The live page gets the weights saved at
 * `weights` and the command it runs on the sentence typed.  0, or 1 after
 * a message. */
static int write_outputs(const opts *o, const char *json, size_t len, const char *first, const char *weights)
{
    static const char *const args[] = {"run", "--model", "/model.safetensors", "--json", "-", "{input}", NULL};
    live_spec live = {"translate", o->argv0, o->wasm, o->live, TITLE, "model.safetensors", weights, args, first};
    return explorer_write(prog, json, len, &(explorer_dest){o->html, o->json, o->live ? &live : NULL, TITLE});
}

/* The heads of o->head_off switched off in m, and their names as the
 * JSON list f gets ("heads_off").  0, or 2 after a message. */
static int heads_off(const opts *o, model *m, FILE *f)
{
    static const char *const kinds[3] = {"encoder", "decoder", "cross"};
    int H = m->cfg.heads, D = m->cfg.hidden / m->cfg.heads, C = m->cfg.hidden;
    if (f) fputc('[', f);
    for (int i = 0; i < o->heads_off; i++) {
        char kind[16];
        int layer, head, end = 0, k = 0;
        if (sscanf(o->head_off[i], "%15[a-z]:%d:%d%n", kind, &layer, &head, &end) != 3 || o->head_off[i][end])
            k = -1;
        while (k >= 0 && k < 3 && strcmp(kind, kinds[k])) k++;
        if (k < 0 || k == 3 || layer < 0 || layer >= m->cfg.layers || head < 0 || head >= H)
            return bad("--head-off wants encoder|decoder|cross:LAYER:HEAD within the model, got '%s'%s",
                       o->head_off[i], "");
        const ag_mha_layer *a = k == 0 ? &m->net.enc[layer].attention
                                : k == 1 ? &m->net.dec[layer].self_attention : &m->net.dec[layer].cross_attention;
        for (int r = 0; r < C; r++) /* W_o [C, C]: y = x W_o^T, head h's outputs are x[h D .. h D + D) */
            memset(a->w_o.weight->data + (size_t)r * C + (size_t)head * D, 0, (size_t)D * sizeof(ag_real));
        if (f) fprintf(f, "%s\"%s:%d:%d\"", i ? ", " : "", kinds[k], layer, head);
    }
    if (f) fputs("], ", f);
    return 0;
}

int cmd_run(const opts *o, char **sentences, int n)
{
    if (!o->model) return bad("run needs --model MODEL%s%s", "", "");
    if (o->stdin_uses && n == 0)
        return bad("run reads its sentences from stdin: with --model -, give them as arguments%s%s", "", "");
    model m;
    ag_set_threads(o->threads);
    if (o->attention && mkdir(o->attention, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: --attention %s: %s\n", prog, o->attention, strerror(errno));
        return 1;
    }
    if (load_model(&m, o->model, NULL)) return 1;
    /* the live page's weights: without the training state a checkpoint may
     * hold (a smaller page), every head on (the page switches them), saved
     * beside the page for as long as it takes to read them back */
    char weights[4096] = "";
    if (o->live) snprintf(weights, sizeof weights, "%s.weights.tmp", o->live);
    int st = o->live && save_model(&m, NULL, NULL, weights) ? 1 : heads_off(o, &m, NULL);
    if (st) {
        if (*weights) remove(weights);
        model_free(&m);
        return st;
    }
    ag_graph *g = ag_graph_new();
    int rc = 1, good = 0, skipped = 0;
    pictures pic = {.dir = o->attention, .out = o->json && !strcmp(o->json, "-") ? NULL : stdout};
    explorer_out page = {0};
    if (!g) fprintf(stderr, "%s: out of memory\n", prog);
    else if ((o->html || o->json || o->live) && !explorer_open(&page, prog)) rc = 1;
    else {
        if ((pic.html = page.f)) {
            fprintf(page.f, "{\"kind\": \"attention\", \"model\": \"translator\", ");
            json_config(page.f, &m.cfg);
            fprintf(page.f, "\"heads_off\": ");
            heads_off(o, &m, page.f); /* checked above: the names only (zeros again) */
            fprintf(page.f, "\"inputs\": [");
        }
        rc = n > 0 ? run_arguments(&m, g, sentences, n, &pic, &good, &skipped)
                   : run_stdin(&m, g, &pic, &good, &skipped);
    }
    fflush(stdout);
    if (rc == 0 && good == 0 && skipped > 0) {
        fprintf(stderr, "%s: no line to translate (%d skipped)\n", prog, skipped);
        rc = 1;
    }
    if (page.f) {
        fprintf(page.f, "]}\n");
        if (fclose(page.f) != 0) fprintf(stderr, "%s: explorer page: %s\n", prog, strerror(errno)), rc = 1;
        else if (rc == 0) rc = write_outputs(o, page.buf, page.len, n > 0 ? sentences[0] : NULL, weights);
        free(page.buf);
    }
    if (*weights) remove(weights);
    ag_graph_free(g);
    model_free(&m);
    return rc;
}
