/* examples/translate/curves.c: what translate train draws and writes of
 * its run once it ends: the loss per epoch (--plot), each attention
 * layer's entropy per epoch (--entropy-plot), the probe's figures in the
 * json, and the explorer's training page (--html).  Each reads the run
 * through a train_curves view (translate.h) and writes nothing else. */
#include "translate.h"
#include "../common/explorer_json.h"

#include <math.h>
#include <stdlib.h>

int write_loss_plot(const train_curves *c)
{
    const double *ys[2] = {c->loss, c->test_loss};
    const char *names[2] = {"training", "held-out"};
    int ns[2] = {c->o->epochs, c->o->epochs};
    char err[512];
    if (ag_svg_line_plot(c->o->plot, "translator loss (cross-entropy per target token)", "epoch", "loss",
                         c->has_test ? 2 : 1, names, ys, ns, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (!c->o->quiet) printf("wrote %s\n", c->o->plot);
    return 0;
}

/* The entropy of each attention layer per epoch (--entropy-plot). */
int write_entropy_plot(const train_curves *c)
{
    int L = probe_layers(c->m), n = 3 * L, E = c->o->epochs;
    double *ys = malloc((size_t)n * E * sizeof(double));
    const double **series = malloc((size_t)n * sizeof *series);
    const char **names = malloc((size_t)n * sizeof *names);
    char *labels = malloc((size_t)n * 32), err[512];
    int *ns = malloc((size_t)n * sizeof(int)), rc = 1;
    if (!ys || !series || !names || !labels || !ns) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    for (int k = 0; k < n; k++) {
        for (int e = 0; e < E; e++) /* x = epoch e + 1 */
            ys[(size_t)k * E + e] = c->probed[e + 1] ? c->probe[(size_t)(e + 1) * n + k].entropy : NAN;
        snprintf(labels + 32 * k, 32, "%s %d", probe_kind(k / L), k % L);
        series[k] = ys + (size_t)k * E, names[k] = labels + 32 * k, ns[k] = E;
    }
    if (ag_svg_line_plot(c->o->entropy_plot, "attention entropy per layer (mean over rows, probe batch)", "epoch",
                         "entropy (nats)", n, names, series, ns, err, sizeof err) != AG_OK)
        fprintf(stderr, "%s: %s\n", prog, err);
    else {
        if (!c->o->quiet) printf("wrote %s\n", c->o->entropy_plot);
        rc = 0;
    }
done:
    free(ys), free(series), free(names), free(labels), free(ns);
    return rc;
}

/* ", KEY: x", null when x is not finite (NaN is not JSON) */
static void json_real(FILE *f, const char *key, double x)
{
    if (isfinite(x)) fprintf(f, ", \"%s\": %.6g", key, x);
    else fprintf(f, ", \"%s\": null", key);
}

/* "attention": [{"epoch": e, "layers": [{"layer", "entropy", ...}]}];
 * max_score and max_gap are null when the scores were not on the graph */
void json_probe(FILE *f, const train_curves *c)
{
    int L = probe_layers(c->m), n = 3 * L, first = 1;
    fprintf(f, ", \"attention\": [");
    for (int e = 0; e <= c->o->epochs; e++) {
        if (!c->probed[e]) continue;
        fprintf(f, "%s\n  {\"epoch\": %d, \"layers\": [", first ? "" : ",", e);
        for (int k = 0; k < n; k++) {
            const layer_stats *s = &c->probe[(size_t)e * n + k];
            fprintf(f, "%s{\"layer\": \"%s.%d\"", k ? ", " : "", probe_kind(k / L), k % L);
            json_real(f, "entropy", s->entropy);
            json_real(f, "max_score", s->max_score);
            json_real(f, "max_gap", s->max_gap);
            fprintf(f, "}");
        }
        fprintf(f, "]}");
        first = 0;
    }
    fprintf(f, "]");
}

/* The explorer's training page (--html): the loss per epoch (and the
 * held-out loss), each attention layer's entropy after each epoch, and the
 * final scores. */
int write_training_page(const train_curves *c, const metrics *tr, const metrics *te, double test_loss)
{
    int L = probe_layers(c->m), n = 3 * L, E = c->o->epochs;
    explorer_out x;
    FILE *f = explorer_open(&x, prog);
    if (!f) return 1;
    fprintf(f, "{\"kind\": \"training\", \"model\": \"translator\", \"x_label\": \"epoch\", \"series\": [");
    fprintf(f, "\n{\"name\": \"training loss\", \"group\": \"loss (cross-entropy per target token)\", \"y\": ");
    json_doubles(f, c->loss, E);
    if (c->has_test) {
        fprintf(f, "},\n{\"name\": \"held-out loss\", \"group\": \"loss (cross-entropy per target token)\", \"y\": ");
        json_doubles(f, c->test_loss, E);
    }
    for (int k = 0; k < n; k++) {
        fprintf(f, "},\n{\"name\": \"%s.%d\", \"group\": \"attention entropy per layer (nats, probe batch)\", \"y\": [",
                probe_kind(k / L), k % L);
        for (int e = 1; e <= E; e++)
            fputs(e > 1 ? ", " : "", f), json_number(f, c->probed[e] ? c->probe[(size_t)e * n + k].entropy : NAN);
        fputc(']', f);
    }
    fprintf(f, "}]");
    if (c->has_test) {
        fprintf(f, ", \"summary\": {\"held-out loss\": "), json_number(f, test_loss);
        fprintf(f, ", \"held-out exact match\": "), json_number(f, te->exact);
        fprintf(f, ", \"held-out BLEU\": "), json_number(f, te->bleu);
        fprintf(f, ", \"training exact match\": "), json_number(f, tr->exact);
        fprintf(f, ", \"training BLEU\": "), json_number(f, tr->bleu), fputc('}', f);
    }
    fprintf(f, "}\n");
    int rc = explorer_close(&x, prog, c->o->html, "attograd explorer: training the translator");
    if (!rc && !c->o->quiet) printf("wrote %s\n", c->o->html);
    return rc;
}
