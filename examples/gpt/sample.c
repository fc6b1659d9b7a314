/* sample.c: `gpt sample`: text from a trained model, one character at a
 * time (ag_gpt_sample): temperature, top-k, top-p and a seed, so the same seed
 * gives the same text.  --head-off self:LAYER:HEAD switches a head off
 * before sampling: its D columns of the block's W_o are zeroed, so its
 * output is multiplied by 0 (the translator's --head-off, on the GPT's
 * self-attention). */
#include "gpt.h"

#include <stdlib.h>
#include <string.h>

int head_off_parse(const char *s, const model *m, int *layer, int *head)
{
    int end = 0;
    if (sscanf(s, "self:%d:%d%n", layer, head, &end) == 2 && !s[end] && *layer >= 0 && *layer < m->cfg.layers &&
        *head >= 0 && *head < m->cfg.heads)
        return 0;
    fprintf(stderr, "%s: --head-off wants self:LAYER:HEAD with LAYER in 0..%d and HEAD in 0..%d, got '%s'\n", prog,
            m->cfg.layers - 1, m->cfg.heads - 1, s);
    return 2;
}

/* The heads of o->head_off switched off in m.  0, or 2 after a message. */
static int switch_heads_off(const opts *o, model *m)
{
    int C = m->cfg.hidden, D = C / m->cfg.heads;
    for (int i = 0; i < o->heads_off; i++) {
        int layer, head;
        if (head_off_parse(o->head_off[i], m, &layer, &head)) return 2;
        ag_tensor *w_o = m->net.blocks[layer].attention.w_o.weight;
        for (int r = 0; r < C; r++) /* W_o [C, C]: y = x W_o^T, head h's outputs are x[h D .. h D + D) */
            memset(w_o->data + (size_t)r * C + (size_t)head * D, 0, (size_t)D * sizeof(ag_real));
    }
    return 0;
}

int cmd_sample(const opts *o)
{
    if (!o->model) {
        fprintf(stderr, "%s: sample needs --model MODEL\n", prog);
        usage(stderr);
        return 2;
    }
    model m;
    if (model_load(&m, o->model, NULL)) return 1;
    /* the live page's weights: without a checkpoint's training state, every
     * head on (the page switches them), beside the page until it is written */
    char weights[4096] = "";
    if (o->live) snprintf(weights, sizeof weights, "%s.weights.tmp", o->live);
    int st = o->live && model_save(&m, NULL, NULL, weights) ? 1 : switch_heads_off(o, &m);
    if (st) {
        if (*weights) remove(weights);
        model_free(&m);
        return st;
    }
    /* the prompt, or a newline (the start of a sentence) when none is given */
    const char *prompt = o->prompt ? o->prompt : "\n";
    size_t np = strlen(prompt);
    int rc = 1;
    int *ids = malloc((np ? np : 1) * sizeof *ids);
    ag_graph *g = ag_graph_new();
    if (!ids || !g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (np == 0) {
        fprintf(stderr, "%s: --prompt is empty\n", prog);
        rc = 2;
        goto done;
    }
    if (text_encode(&m.voc, (const unsigned char *)prompt, np, ids, "--prompt")) goto done;
    ag_sample_opts so = {.temperature = o->temperature, .top_k = o->top_k, .seed = o->seed, .top_p = o->top_p};
    int *out = malloc((np + (size_t)o->length) * sizeof *out);
    if (!out) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (ag_gpt_sample(g, &m.net, ids, (int)np, o->length, &so, out) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, ag_graph_error(g));
        free(out);
        goto done;
    }
    if ((o->html || o->json || o->live) && explore_sample(&m, out, (int)np + o->length, (int)np, o, weights)) {
        free(out);
        goto done;
    }
    int text = !o->json || strcmp(o->json, "-"); /* --json - takes stdout */
    if (text && o->show_dist && print_dist(&m, out, (int)np, o)) {
        free(out);
        goto done;
    }
    for (size_t i = 0; text && i < np + (size_t)o->length; i++) putchar(m.voc.chars[out[i]]);
    if (text && np + (size_t)o->length > 0 && m.voc.chars[out[np + (size_t)o->length - 1]] != '\n') putchar('\n');
    free(out);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    if (*weights) remove(weights);
    free(ids);
    ag_graph_free(g);
    model_free(&m);
    return rc;
}
