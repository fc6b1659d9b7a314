/* eval.c: `gpt eval`: the model's cross-entropy per character on a text
 * (the held-out tenth by default, the whole text with --all), in nats and
 * in bits per character.  dataset_loss is also the held-out loss of
 * `gpt train`. */
#include "gpt.h"
#include "../common/report_file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

ag_status dataset_loss(const model *m, ag_graph *g, const int *ids, size_t n, int B, double *loss, size_t *count)
{
    *loss = 0, *count = 0;
    if (n < 2) return AG_OK;
    int T = (size_t)m->cfg.context < n - 1 ? m->cfg.context : (int)(n - 1);
    size_t windows = (n - 1) / (size_t)T; /* window w: ids[w T .. w T + T], its targets one further */
    int was_training = ag_graph_training(g);
    ag_graph_set_training(g, 0);
    double total = 0;
    for (size_t w = 0; w < windows; w += (size_t)B) {
        int b = windows - w < (size_t)B ? (int)(windows - w) : B;
        const int *x = ids + w * (size_t)T;
        /* the b windows lie end to end, so their targets are x shifted by one */
        ag_graph_reset(g);
        ag_tensor *logits = ag_gpt_forward(g, &m->net, x, b, T);
        ag_tensor *sum = ag_cross_entropy_ex(g, logits, x + 1, -1, 0, AG_REDUCTION_SUM);
        if (!sum) break;
        total += (double)sum->data[0];
        *count += (size_t)b * T;
    }
    ag_graph_set_training(g, was_training);
    *loss = *count ? total / (double)*count : 0;
    return ag_graph_status(g);
}

int cmd_eval(const opts *o)
{
    if (!o->model || !o->data) {
        fprintf(stderr, "%s: eval needs --model MODEL and --data FILE\n", prog);
        usage(stderr);
        return 2;
    }
    model m;
    unsigned char *text = NULL;
    size_t n = 0, count = 0;
    int *ids = NULL, rc = 1;
    ag_graph *g = NULL;
    if (model_load(&m, o->model, NULL)) return 1;
    if (text_load(o->data, &text, &n)) goto done;
    ids = malloc(n * sizeof *ids);
    g = ag_graph_new();
    if (!ids || !g) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (text_encode(&m.voc, text, n, ids, o->data)) goto done;
    size_t from = o->all ? 0 : held_out_start(n, m.cfg.context);
    double loss;
    if (dataset_loss(&m, g, ids + from, n - from, o->batch, &loss, &count) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, ag_graph_error(g));
        goto done;
    }
    printf("%s: %zu characters%s: loss %.4f, %.4f bits per character\n", o->data, count,
           from ? " (the held-out tenth)" : "", loss, loss / log(2.0));
    if (o->json) {
        report_file out;
        if (!report_open(&out, prog, o->json)) goto done;
        fprintf(out.f, "{\"characters\": %zu, \"loss\": %.6f, \"bits_per_char\": %.6f, \"held_out\": %s}\n", count,
                loss, loss / log(2.0), from ? "true" : "false");
        if (report_close(&out, prog)) goto done;
    }
    rc = 0;
done:
    ag_graph_free(g);
    model_free(&m);
    ag_file_free((char *)text), free(ids);
    return rc;
}
