/* sample.c: `gpt sample`: text from a trained model, one character at a
 * time (ag_gpt_sample): temperature, top-k and a seed, so the same seed
 * gives the same text. */
#include "gpt.h"

#include <stdlib.h>
#include <string.h>

int cmd_sample(const opts *o)
{
    if (!o->model) {
        fprintf(stderr, "%s: sample needs --model MODEL\n", prog);
        usage(stderr);
        return 2;
    }
    model m;
    if (model_load(&m, o->model, NULL)) return 1;
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
    ag_sample_opts so = {.temperature = o->temperature, .top_k = o->top_k, .seed = o->seed};
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
    if ((o->html || o->json || o->live) && explore_sample(&m, out, (int)np + o->length, o)) {
        free(out);
        goto done;
    }
    int text = !o->json || strcmp(o->json, "-"); /* --json - takes stdout */
    for (size_t i = 0; text && i < np + (size_t)o->length; i++) putchar(m.voc.chars[out[i]]);
    if (text && np + (size_t)o->length > 0 && m.voc.chars[out[np + (size_t)o->length - 1]] != '\n') putchar('\n');
    free(out);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(ids);
    ag_graph_free(g);
    model_free(&m);
    return rc;
}
