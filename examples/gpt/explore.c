/* explore.c: `gpt sample --html PAGE`: the explorer page (docs/explorer.md)
 * of the sampled text's attention.  The model reads the last `context`
 * characters (as ag_gpt_sample's last step did) once more, with every
 * block's attention weights kept; for each layer and head the page shows
 * the weights, the scores and the queries and keys they came from
 * (ag_attention_qk). */
#include "gpt.h"
#include "../common/explorer_json.h"

/* A character as a label: itself, or a visible stand-in for a space, a
 * newline or a byte that is not printable ASCII. */
static void label(unsigned char c, char out[8])
{
    if (c == ' ') snprintf(out, 8, "\xe2\x90\xa3"); /* U+2423 open box */
    else if (c == '\n') snprintf(out, 8, "\\n");
    else if (c < 0x20 || c >= 0x7f) snprintf(out, 8, "0x%02x", c);
    else snprintf(out, 8, "%c", c);
}

int explore_sample(const model *m, const int *ids, int n, const char *path)
{
    int T = n < m->cfg.context ? n : m->cfg.context, L = m->cfg.layers, rc = 1;
    const int *win = ids + (n - T);
    char (*buf)[8] = malloc((size_t)T * sizeof *buf), *text = malloc((size_t)T + 1);
    const char **lab = malloc((size_t)T * sizeof *lab);
    ag_graph *g = ag_graph_new();
    explorer_out x = {0};
    if (!buf || !text || !lab || !g) {
        fprintf(stderr, "%s: --html: out of memory\n", prog);
        goto done;
    }
    for (int t = 0; t < T; t++) label(m->voc.chars[win[t]], buf[t]), lab[t] = buf[t], text[t] = (char)m->voc.chars[win[t]];
    text[T] = '\0';
    ag_graph_set_training(g, 0);
    if (!explorer_open(&x, prog)) goto done;
    fprintf(x.f, "{\"kind\": \"attention\", \"model\": \"gpt\", \"inputs\": [{\"name\": "), json_string(x.f, text);
    fprintf(x.f, ", \"maps\": [");
    /* the forward pass of ag_gpt_forward up to the last block */
    ag_tensor *h = ag_embedding_layer_forward(g, &m->net.embedding, win, 1, T);
    for (int l = 0; l < L; l++) {
        ag_tensor *w = NULL;
        h = ag_decoder_only_block_forward(g, &m->net.blocks[l], h, &w);
        explorer_map map = {"causal self-attention", "self", l, "character (query)", "character (key)", lab, lab};
        fprintf(x.f, "%s\n", l ? "," : "");
        if (!h || json_attention_map(x.f, g, w, 0, &map)) {
            fprintf(stderr, "%s: --html: %s\n", prog, ag_graph_error(g));
            fclose(x.f), free(x.buf), x.f = NULL;
            goto done;
        }
    }
    fprintf(x.f, "]}]}\n");
    rc = explorer_close(&x, prog, path, "attograd explorer: the GPT's attention");
    x.f = NULL;
done:
    free(buf), free(text), free(lab);
    ag_graph_free(g);
    return rc;
}
