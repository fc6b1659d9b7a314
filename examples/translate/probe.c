/* examples/translate/probe.c: how peaked each attention layer is, measured
 * on a fixed probe batch (the first PROBE_PAIRS training pairs), dropout
 * off.  Per layer (encoder self-attention, decoder self-attention, decoder
 * cross-attention, each layer i):
 *
 *   entropy    the mean over the heads and the real query rows of the row
 *              entropy  H = -sum_j P_j log P_j  (nats): log(keys) when a
 *              row is uniform, 0 when all its weight is on one key;
 *   max_score  the largest scaled score z_j = q.k_j / sqrt(D) that a real
 *              query gives a key it may see (the mask's other keys aside);
 *   max_gap    the largest row gap, max_j z_j - min_j z_j over those keys.
 *
 * A row whose gap is g puts at most e^-g of the top key's weight on the
 * bottom one: past a gap of about 100 (float) that weight is exactly 0, the
 * softmax is saturated and its gradient, P_j (dP_j - sum_k P_k dP_k),
 * vanishes for every key but the top one.
 *
 * The scores are read from the graph: the weights tensor's input, the
 * scores before the scale (ops/masked_softmax.c keeps the scale as its
 * real argument 0), or already scaled when a plain softmax made them. */
#include "translate.h"
#include "seq2seq_data.h"

#include <math.h>
#include <stdlib.h>

static const char *const kinds[3] = {"encoder.self", "decoder.self", "decoder.cross"};

const char *probe_kind(int k)
{
    return kinds[k];
}

/* The statistics of one weights tensor P [B, H, Tq, Tk]; row (b, t) is a
 * real query when t < qlen[b], key j is seen when j < klen[b] (and j <= t
 * when causal). */
static layer_stats stats(const ag_tensor *P, const int *qlen, const int *klen, int causal)
{
    layer_stats r = {0, -INFINITY, -INFINITY};
    const ag_tensor *x = P->nsrc > 0 ? P->src[0] : NULL;
    double scale = P->op == AG_OP_MASKED_SOFTMAX ? ag_tensor_farg(P, 0) : 1;
    if (!x || (P->op != AG_OP_MASKED_SOFTMAX && P->op != AG_OP_SOFTMAX) || x->size != P->size)
        r.max_score = r.max_gap = NAN; /* scores not on the graph */
    int B = P->shape[0], H = P->shape[1], Tq = P->shape[2], Tk = P->shape[3];
    long rows = 0;
    double ent = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < qlen[b] && t < Tq; t++) {
                size_t at = (((size_t)b * H + h) * Tq + t) * Tk;
                int keys = causal ? t + 1 : klen[b];
                double hi = -INFINITY, lo = INFINITY, e = 0;
                for (int j = 0; j < keys && j < Tk; j++) {
                    double p = P->data[at + j];
                    if (p > 0) e -= p * log(p);
                    if (isnan(r.max_score)) continue;
                    double z = scale * x->data[at + j];
                    hi = z > hi ? z : hi, lo = z < lo ? z : lo;
                }
                ent += e, rows++;
                if (isnan(r.max_score) || keys < 1) continue;
                if (hi > r.max_score) r.max_score = hi;
                if (hi - lo > r.max_gap) r.max_gap = hi - lo;
            }
    r.entropy = rows ? ent / rows : NAN;
    return r;
}

int probe_attention(const model *m, ag_graph *g, const dataset *d, batch *b, int cap, layer_stats *out)
{
    int n = d->n < PROBE_PAIRS ? d->n : PROBE_PAIRS, idx[PROBE_PAIRS], tgt_len[PROBE_PAIRS];
    if (n > cap) n = cap;
    for (int i = 0; i < n; i++) idx[i] = i;
    batch_fill(b, d, idx, n);
    for (int i = 0; i < n; i++) tgt_len[i] = d->tgt_valid[i];
    ag_seq2seq_weights w;
    ag_graph_reset(g);
    if (!ag_seq2seq_trace(g, &m->net, b->src, b->src_valid, b->B, b->S, b->tgt_in, b->T, &w)) {
        fprintf(stderr, "%s: attention probe: %s\n", prog, ag_graph_error(g));
        return 1;
    }
    int L = probe_layers(m);
    for (int i = 0; i < L; i++) {
        out[i] = stats(w.enc_self[i], b->src_valid, b->src_valid, 0);
        out[L + i] = stats(w.dec_self[i], tgt_len, tgt_len, 1);
        out[2 * L + i] = stats(w.dec_cross[i], tgt_len, b->src_valid, 0);
    }
    ag_graph_reset(g);
    return 0;
}

int probe_layers(const model *m)
{
    return m->cfg.layers < AG_SEQ2SEQ_MAX_LAYERS ? m->cfg.layers : AG_SEQ2SEQ_MAX_LAYERS;
}
