/* sample_dist.c: the distribution the first sampled character is drawn
 * from, before and after the sampler's filters (temperature, top-k,
 * top-p: ag_sample_dist, the code ag_gpt_sample draws with): the live
 * page's "sampling" data (`gpt sample --json`) and `--show-dist N`.
 *
 * The logits are those of the last position of the prompt's last
 * `context` characters (ag_gpt_forward, eval mode, the heads switched off
 * as the sample had them): the row the first new character comes from. */
#include "gpt.h"
#include "../common/explorer_json.h"

#include <stdlib.h>

/* before[V], after[V] of the character after ids[0..prompt_len).  0, or 1
 * after a message. */
static int first_dist(const model *m, const int *ids, int prompt_len, const opts *o, double *before, double *after)
{
    int T = prompt_len < m->cfg.context ? prompt_len : m->cfg.context, V = m->voc.V;
    ag_graph *g = ag_graph_new();
    char err[160] = "";
    int rc = 1;
    if (!g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    ag_graph_set_training(g, 0);
    ag_graph_set_grad(g, 0);
    ag_tensor *logits = ag_gpt_forward(g, &m->net, ids + (prompt_len - T), 1, T); /* [1, T, V] */
    ag_sampling s = {o->temperature, o->top_k, o->top_p};
    if (!logits) fprintf(stderr, "%s: the first token's distribution: %s\n", prog, ag_graph_error(g));
    else if (ag_sample_dist(logits->data + (size_t)(T - 1) * V, V, &s, before, after, err, sizeof err) != AG_OK)
        fprintf(stderr, "%s: the first token's distribution: %s\n", prog, err);
    else rc = 0;
    ag_graph_free(g);
    return rc;
}

int json_sampling(FILE *f, const model *m, const int *ids, int prompt_len, int n, const opts *o)
{
    int V = m->voc.V;
    double *p = malloc(2 * (size_t)V * sizeof *p);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (first_dist(m, ids, prompt_len, o, p, p + V)) {
        free(p);
        return 1;
    }
    char label[8];
    fprintf(f, "{\"temperature\": "), json_number(f, o->temperature);
    fprintf(f, ", \"top_k\": %d, \"top_p\": ", o->top_k), json_number(f, o->top_p);
    fprintf(f, ", \"seed\": %llu, \"position\": %d, \"drawn\": %d,\n \"tokens\": [", (unsigned long long)o->seed,
            prompt_len, n > prompt_len ? ids[prompt_len] : -1);
    for (int v = 0; v < V; v++) char_label(m->voc.chars[v], label), fputs(v ? ", " : "", f), json_string(f, label);
    fprintf(f, "],\n \"before\": [");
    for (int v = 0; v < V; v++) fputs(v ? ", " : "", f), json_number(f, p[v]);
    fprintf(f, "],\n \"after\": [");
    for (int v = 0; v < V; v++) fputs(v ? ", " : "", f), json_number(f, p[V + v]);
    fprintf(f, "]}");
    free(p);
    return 0;
}

/* ids 0..V-1 by p descending, the lower id first on ties */
static const double *by_p;
static int more_probable(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return by_p[x] != by_p[y] ? (by_p[x] < by_p[y]) - (by_p[x] > by_p[y]) : (x > y) - (x < y);
}

int print_dist(const model *m, const int *ids, int prompt_len, const opts *o)
{
    int V = m->voc.V, N = o->show_dist < V ? o->show_dist : V, kept = 0;
    double *p = malloc(2 * (size_t)V * sizeof *p);
    int *order = malloc((size_t)V * sizeof *order);
    if (!p || !order || first_dist(m, ids, prompt_len, o, p, p + V)) {
        if (!p || !order) fprintf(stderr, "%s: out of memory\n", prog);
        free(p), free(order);
        return 1;
    }
    for (int v = 0; v < V; v++) order[v] = v, kept += p[V + v] > 0;
    by_p = p;
    qsort(order, (size_t)V, sizeof *order, more_probable);
    printf("the first sampled character: temperature %g, top-k %d, top-p %g keep %d of %d\n", o->temperature,
           o->top_k, o->top_p, kept, V);
    printf("%-6s %-12s %s\n", "char", "p before", "p after");
    for (int i = 0; i < N; i++) {
        char label[8];
        char_label(m->voc.chars[order[i]], label);
        int w = 0; /* characters, not bytes: U+2423 stands for a space */
        for (const char *c = label; *c; c++) w += (*c & 0xc0) != 0x80;
        printf("%s%*s %-12.6f %.6f\n", label, 6 - w, "", p[order[i]], p[V + order[i]]);
    }
    free(p), free(order);
    return 0;
}
