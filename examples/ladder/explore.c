/* explore.c: `ladder RUNG --html PAGE`: the explorer page (docs/explorer.md)
 * of one rung, trained as the table trains it, reading one line of text
 * (--input TEXT; its last `context` characters): for each layer and head the
 * attention weights, the scores and the queries and keys they came from
 * (ag_attention_qk), the next character's distribution at each
 * position, and (from rung 6, residual) the residual adds and the layer
 * norms (explorer_stream.h).  --json FILE: the page's data alone ("-": stdout); --live PAGE:
 * the page that trains the rung again, for the steps asked in it, and reads
 * the line typed in it, running this program compiled to WebAssembly
 * (make wasm) on the text file it holds. */
#include "ladder.h"
#include "../common/explorer_stream.h"
#include "../common/live_page.h"

#define TITLE "attograd explorer: a rung of the ladder"

/* A character as a label: itself, or a visible stand-in for a space, a
 * newline or a byte that is not printable ASCII. */
static void label(unsigned char c, char out[8])
{
    if (c == ' ') snprintf(out, 8, "\xe2\x90\xa3"); /* U+2423 open box */
    else if (c == '\n') snprintf(out, 8, "\\n");
    else if (c < 0x20 || c >= 0x7f) snprintf(out, 8, "0x%02x", c);
    else snprintf(out, 8, "%c", c);
}

/* The line as ids of t's characters, its last T at most: ids[0..*n).  0, or
 * 1 after a message (empty, or a character the text never uses). */
static int line_ids(const text *t, const char *line, int T, int *ids, int *n)
{
    size_t len = strlen(line), from = len > (size_t)T ? len - (size_t)T : 0;
    if (!len) return fprintf(stderr, "%s: --input: the line is empty\n", prog), 1;
    for (size_t i = from; i < len; i++) {
        int id = -1;
        for (int v = 0; v < t->V; v++) id = t->chars[v] == (unsigned char)line[i] ? v : id;
        if (id < 0) {
            char c[8];
            label((unsigned char)line[i], c);
            fprintf(stderr, "%s: --input: the text never uses the character '%s'\n", prog, c);
            return 1;
        }
        ids[i - from] = id;
    }
    *n = (int)(len - from);
    return 0;
}

/* The maps and the output of ids[0..T) on g, after a forward that kept the
 * weights w[l]: the page's "attention" data. */
static int write_data(FILE *f, ag_graph *g, const ladder_model *m, const text *t, const int *ids, int T,
                      ag_tensor *const *w, const ag_tensor *logits, const explore_opts *o)
{
    int V = t->V, next[64];
    char lab[64][8], voc[256][8], name[64];
    const char *labs[64], *vocab[256];
    for (int i = 0; i < T; i++) label(t->chars[ids[i]], lab[i]), labs[i] = lab[i], next[i] = i + 1 < T ? ids[i + 1] : -1;
    for (int v = 0; v < V; v++) label(t->chars[v], voc[v]), vocab[v] = voc[v];
    char line[65];
    for (int i = 0; i < T; i++) line[i] = (char)t->chars[ids[i]];
    line[T] = '\0';
    const ladder_config *c = &m->cfg; /* what the rung has, for the page's overview */
    fprintf(f, "{\"kind\": \"attention\", \"model\": \"ladder\", \"config\": {\"layers\": %d, \"heads\": %d, "
               "\"hidden\": %d, \"ffn\": %d, \"vocab\": %d, \"context\": %d, \"positions\": \"learned\", "
               "\"residual\": %d, \"norm\": %d, \"pre_norm\": %d}, ",
            c->layers, c->rung >= HEADS ? c->heads : 1, c->hidden, c->rung >= FEED_FORWARD ? c->ffn : 0, V, c->context,
            c->rung >= RESIDUAL, c->rung >= POST_NORM, c->rung == PRE_NORM);
    fprintf(f, "\"rung\": %d, \"idea\": ", c->rung);
    json_string(f, rung_idea[m->cfg.rung]);
    fprintf(f, ", \"steps\": %d, \"seed\": %llu, \"inputs\": [{\"name\": ", o->steps, (unsigned long long)o->seed);
    json_string(f, line), fprintf(f, ", \"maps\": [");
    for (int l = 0; l < m->cfg.layers; l++) {
        snprintf(name, sizeof name, "rung %d causal self-attention", m->cfg.rung);
        explorer_map map = {name, "self", l, "character (query)", "character (key)", labs, labs};
        fprintf(f, "%s\n", l ? "," : "");
        if (json_attention_map(f, g, w[l], 0, &map)) return 1;
    }
    ag_tensor *probs = ag_softmax(g, (ag_tensor *)logits);
    if (!probs) return 1;
    fprintf(f, "],\n\"output\": ");
    json_output(f, logits->data, probs->data, T, V, vocab, labs, next, "the line");
    if (c->rung >= RESIDUAL) { /* the residual stream: its adds, and its layer norms from rung 7 on */
        static const char *const self[] = {"self"};
        const ag_tensor *tok, *pos, *x = NULL;
        explorer_stack st = {"blocks", "block", self, 1, c->layers, c->rung >= FEED_FORWARD, c->rung == PRE_NORM,
                             c->rung >= POST_NORM, c->rung >= POST_NORM ? m->layers[0].norm1.eps : 0, labs, T};
        explorer_embedding(g, m->tokens, &tok, &pos, &x);
        if (json_streams(f, g, &x, &st, 1, prog)) return 1;
    }
    fprintf(f, "}]}\n");
    return 0;
}

int explore_rung(const ladder_model *m, const text *t, const explore_opts *o)
{
    int ids[64], T = 0, rc = 1;
    ag_tensor *w[16] = {0};
    if (m->cfg.rung < ONE_HEAD || m->cfg.layers > 16 || m->cfg.context > 64) {
        fprintf(stderr, "%s: rung %d has no attention to show (rungs %d to %d have)\n", prog, m->cfg.rung, ONE_HEAD,
                NRUNGS);
        return 1;
    }
    if (line_ids(t, o->input, m->cfg.context, ids, &T)) return 1;
    ag_graph *g = ag_graph_new();
    explorer_out x = {0};
    if (!g) return fprintf(stderr, "%s: out of memory\n", prog), 1;
    ag_graph_set_training(g, 0); /* grad mode kept: the tape holds the nodes the page reads (explorer_stream.h) */
    ag_tensor *logits = ladder_forward(g, m, ids, 1, T, w); /* [1, T, V] */
    if (!logits || !explorer_open(&x, prog)) {
        if (!logits) fprintf(stderr, "%s: %s\n", prog, ag_graph_error(g));
        ag_graph_free(g);
        return 1;
    }
    if (write_data(x.f, g, m, t, ids, T, w, logits, o)) {
        fprintf(stderr, "%s: the page's data: %s\n", prog, ag_graph_error(g));
        fclose(x.f), free(x.buf);
    } else if (fclose(x.f) != 0) {
        fprintf(stderr, "%s: the page's data: %s\n", prog, strerror(errno)), free(x.buf);
    } else {
        /* the page runs: ladder RUNG --steps N --seed S --data /text.tsv --input LINE --json - --progress
         * (in a worker: the progress on stderr, and its stop button) */
        char rung[16], seed[32];
        snprintf(rung, sizeof rung, "%d", m->cfg.rung);
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
        const char *const args[] = {rung, "--steps", "{steps}", "--seed", seed, "--data", "/text.tsv",
                                    "--input", "{input}", "--json", "-", "--progress", NULL};
        live_spec live = {"ladder", o->argv0, o->wasm, o->live, TITLE, "text.tsv", o->data, args, o->input};
        rc = explorer_write(prog, x.buf, x.len, &(explorer_dest){o->html, o->json, o->live ? &live : NULL, TITLE});
        free(x.buf);
    }
    ag_graph_free(g);
    return rc;
}
