/* explore.c: `gpt sample --html PAGE`: the explorer page (docs/explorer.md)
 * of the sampled text (--json FILE: its data alone; --live PAGE: the page
 * that samples again from the prompt typed in it, running this program
 * compiled to WebAssembly).  The model reads the last `context` characters of
 * the text (prompt and sample) once more, with every block's attention
 * weights kept; for each layer and head the page shows the weights, the
 * scores and the queries and keys they came from (ag_attention_qk); and,
 * from the same graph, the embeddings, each block's feed-forward hidden
 * units and, from ag_gpt_forward on the same window, the top 5 next
 * characters at each position, and the first sampled character's
 * distribution before and after the sampler's filters (sample_dist.c).  `gpt train --html` gets from here each
 * layer's attention entropy at each evaluation, and writes the training
 * page. */
#include "gpt.h"
#include "../common/explorer_stream.h"
#include "../common/live_page.h"

/* A character as a label: itself, or a visible stand-in for a space, a
 * newline or a byte that is not printable ASCII. */
void char_label(unsigned char c, char out[8])
{
    if (c == ' ') snprintf(out, 8, "\xe2\x90\xa3"); /* U+2423 open box */
    else if (c == '\n') snprintf(out, 8, "\\n");
    else if (c < 0x20 || c >= 0x7f) snprintf(out, 8, "0x%02x", c);
    else snprintf(out, 8, "%c", c);
}

/* The forward pass of ag_gpt_forward up to the last block, on one window
 * win[0..T), eval mode: w[l] gets block l's weights [1, H, T, T].  NULL,
 * with g's error, on failure. */
static ag_tensor *blocks(ag_graph *g, const model *m, const int *win, int T, ag_tensor **w)
{
    ag_graph_set_training(g, 0);
    ag_tensor *h = ag_embedding_layer_forward(g, &m->net.embedding, win, 1, T);
    for (int l = 0; l < m->cfg.layers; l++) h = ag_decoder_only_block_forward(g, &m->net.blocks[l], h, &w[l]);
    return h;
}

int attention_entropy(const model *m, const int *ids, int T, double *out)
{
    ag_graph *g = ag_graph_new();
    ag_tensor **w = calloc((size_t)m->cfg.layers, sizeof *w);
    int rc = !g || !w || !blocks(g, m, ids, T, w);
    if (rc) fprintf(stderr, "%s: attention entropy: %s\n", prog, g ? ag_graph_error(g) : "out of memory");
    for (int l = 0; !rc && l < m->cfg.layers; l++) {
        int H = w[l]->shape[1];
        double e = 0;
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int s = 0; s <= t; s++) { /* query t sees keys s <= t */
                    double p = w[l]->data[((size_t)h * T + t) * T + s];
                    if (p > 0) e -= p * log(p);
                }
        out[l] = e / ((double)H * T);
    }
    free(w);
    ag_graph_free(g);
    return rc;
}

/* The embeddings, the feed-forward layers and the next character's
 * distribution of window win[0..T) (labels lab), after blocks() on g: the
 * page's "embeddings", "ffn" and "output"; and "norms" and "residuals"
 * (explorer_stream.h).  Row t predicts character
 * t + 1. */
static int explore_inside(const model *m, ag_graph *g, FILE *f, const int *win, int T, const char *const *lab)
{
    int V = m->voc.V, bad = 0, *next = malloc((size_t)T * sizeof *next);
    char (*vbuf)[8] = malloc((size_t)V * sizeof *vbuf), name[32];
    const char **vocab = malloc((size_t)V * sizeof *vocab);
    ag_tensor *logits = ag_gpt_forward(g, &m->net, win, 1, T), *probs = ag_softmax(g, logits);
    if (!next || !vbuf || !vocab || !probs) {
        fprintf(stderr, "%s: --html: %s\n", prog, probs ? "out of memory" : ag_graph_error(g));
        free(next), free(vbuf), free(vocab);
        return 1;
    }
    for (int v = 0; v < V; v++) char_label(m->voc.chars[v], vbuf[v]), vocab[v] = vbuf[v];
    for (int t = 0; t < T; t++) next[t] = t + 1 < T ? win[t + 1] : -1;
    fprintf(f, ",\n\"embeddings\": [");
    bad |= json_embedding(f, g, m->net.embedding.tokens, "the characters' embeddings", lab, T, "token embedding",
                          "learned position");
    fprintf(f, "],\n\"ffn\": [");
    for (int l = 0; l < m->cfg.layers; l++) {
        snprintf(name, sizeof name, "block %d", l);
        fprintf(f, "%s\n", l ? "," : ""), bad |= json_ffn(f, g, &m->net.blocks[l].ffn, name, l, lab, T);
    }
    fprintf(f, "],\n\"output\": ");
    json_output(f, logits->data, probs->data, T, V, vocab, lab, next, "the text");
    if (bad) fprintf(stderr, "%s: --html: the embeddings or a feed-forward layer are not on the graph\n", prog);
    /* the layer norms and residual adds of ag_gpt_forward's pass (the one with the final norm) */
    static const char *const self[] = {"self"};
    const ag_tensor *tok, *pos, *x = NULL;
    explorer_embedding_at(g, m->net.embedding.tokens, 1, &tok, &pos, &x);
    explorer_stack st = {"blocks", "block", self, 1, m->cfg.layers, 1, 1, 1, m->net.norm.eps, lab, T};
    bad |= json_streams(f, g, &x, &st, 1, prog);
    free(next), free(vbuf), free(vocab);
    return bad;
}

#define TITLE "attograd explorer: inside the GPT"

/* The data (len bytes of JSON) to o's outputs; the live page gets the
 * weights saved at `weights` and the command that samples as this one did
 * from the prompt typed (the page adds the heads it switches off).  0, or 1
 * after a message. */
static int write_outputs(const opts *o, const char *json, size_t len, const char *weights)
{
    char length[16], seed[32], temperature[32], top_k[16], top_p[32];
    snprintf(length, sizeof length, "%d", o->length), snprintf(top_k, sizeof top_k, "%d", o->top_k);
    snprintf(top_p, sizeof top_p, "%.17g", o->top_p);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(temperature, sizeof temperature, "%.17g", o->temperature);
    const char *const args[] = {"sample", "--model", "/model.safetensors", "--prompt", "{input}", "--length", length,
                                "--seed", seed, "--temperature", temperature, "--top-k", top_k, "--top-p", top_p, "--json", "-", NULL};
    live_spec live = {"gpt", o->argv0, o->wasm, o->live, TITLE, "model.safetensors", weights, args,
                      o->prompt ? o->prompt : "\n"};
    return explorer_write(prog, json, len, &(explorer_dest){o->html, o->json, o->live ? &live : NULL, TITLE});
}

/* The heads switched off (o's --head-off, checked by cmd_sample) as the
 * JSON list f gets: the live page shows its head switch when it has one. */
static void json_heads_off(FILE *f, const model *m, const opts *o)
{
    fprintf(f, "\"heads_off\": [");
    for (int i = 0, layer, head; i < o->heads_off; i++)
        if (!head_off_parse(o->head_off[i], m, &layer, &head))
            fprintf(f, "%s\"self:%d:%d\"", i ? ", " : "", layer, head);
    fprintf(f, "], ");
}

/* ids[0..n) as a JSON string of the characters they stand for, a byte that
 * does not complete a UTF-8 character (a character-level model may sample
 * half of one) as U+FFFD. */
static void json_chars(FILE *f, const model *m, const int *ids, int n)
{
    char *s = malloc((size_t)n * 3 + 1), *p = s;
    if (!s) {
        fputs("\"\"", f);
        return;
    }
    for (int i = 0; i < n;) {
        unsigned char c = m->voc.chars[ids[i]];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0, k = 1;
        while (len > 1 && k < len && i + k < n && (m->voc.chars[ids[i + k]] & 0xc0) == 0x80) k++;
        if (len && k == len)
            for (int j = 0; j < len; j++) *p++ = (char)m->voc.chars[ids[i + j]];
        else p += sprintf(p, "\xef\xbf\xbd"), k = len > 1 ? k : 1;
        i += k;
    }
    *p = '\0';
    json_string(f, s);
    free(s);
}

int explore_sample(const model *m, const int *ids, int n, int prompt_len, const opts *o, const char *weights)
{
    int T = n < m->cfg.context ? n : m->cfg.context, L = m->cfg.layers, rc = 1;
    const int *win = ids + (n - T);
    char (*buf)[8] = malloc((size_t)T * sizeof *buf), *text = malloc((size_t)T + 1);
    const char **lab = malloc((size_t)T * sizeof *lab);
    ag_graph *g = ag_graph_new();
    ag_tensor **w = calloc((size_t)L, sizeof *w);
    explorer_out x = {0};
    if (!buf || !text || !lab || !g || !w) {
        fprintf(stderr, "%s: --html: out of memory\n", prog);
        goto done;
    }
    for (int t = 0; t < T; t++) {
        char_label(m->voc.chars[win[t]], buf[t]);
        lab[t] = buf[t], text[t] = (char)m->voc.chars[win[t]];
    }
    text[T] = '\0';
    if (!blocks(g, m, win, T, w)) {
        fprintf(stderr, "%s: --html: %s\n", prog, ag_graph_error(g));
        goto done;
    }
    if (!explorer_open(&x, prog)) goto done;
    fprintf(x.f, "{\"kind\": \"attention\", \"model\": \"gpt\", \"config\": {\"layers\": %d, \"heads\": %d, "
                 "\"hidden\": %d, \"ffn\": %d, \"vocab\": %d, \"context\": %d, \"positions\": \"learned\", "
                 "\"pre_norm\": 1}, ", L, m->cfg.heads, m->cfg.hidden, m->cfg.ffn, m->cfg.vocab, m->cfg.context);
    json_heads_off(x.f, m, o);
    fprintf(x.f, "\"inputs\": [{\"name\": "), json_string(x.f, text);
    fprintf(x.f, ", \"prompt\": "), json_chars(x.f, m, ids, prompt_len);
    fprintf(x.f, ", \"sample\": "), json_chars(x.f, m, ids + prompt_len, n - prompt_len);
    fprintf(x.f, ", \"maps\": [");
    for (int l = 0; l < L; l++) {
        explorer_map map = {"causal self-attention", "self", l, "character (query)", "character (key)", lab, lab};
        fprintf(x.f, "%s\n", l ? "," : "");
        if (json_attention_map(x.f, g, w[l], 0, &map)) {
            fprintf(stderr, "%s: --html: %s\n", prog, ag_graph_error(g));
            fclose(x.f), free(x.buf), x.f = NULL;
            goto done;
        }
    }
    fprintf(x.f, "]");
    if (explore_inside(m, g, x.f, win, T, lab) ||
        (fprintf(x.f, ",\n\"sampling\": "), json_sampling(x.f, m, ids, prompt_len, n, o))) {
        fclose(x.f), free(x.buf), x.f = NULL;
        goto done;
    }
    fprintf(x.f, "}]}\n");
    if (fclose(x.f) != 0) fprintf(stderr, "%s: the page's data: %s\n", prog, strerror(errno));
    else rc = write_outputs(o, x.buf, x.len, weights);
    free(x.buf);
    x.f = NULL;
done:
    free(buf), free(text), free(lab), free(w);
    ag_graph_free(g);
    return rc;
}
