/* seq2seq_team.c: the translator's data-parallel team (ag_seq2seq_team).
 *
 * A batch of sentence pairs is cut into runs of sentences of about equal
 * work, one run per worker of a generic ag_team (src/core/team.c); each part
 * weighs its share of the batch's target tokens, so the weighted sum of the
 * parts' mean losses is the batch's mean loss.
 *
 * Invariant: worker k > 0 has a model of its own (rep[k]) whose parameters
 * borrow the values of the caller's model. */
#include "nn/nn_internal.h"

enum { MAX_WORKERS = 256 }; /* as many as ag_team_new allows */


struct ag_seq2seq_team {
    ag_team *team;
    const ag_seq2seq *m;
    ag_seq2seq rep[MAX_WORKERS]; /* rep[k], k > 0: worker k's model */
};

static ag_status seq2seq_init(void *ctx, int k, ag_store *replica)
{
    ag_seq2seq_team *st = ctx;
    return ag_seq2seq_init(&st->rep[k], replica, &st->m->cfg, 0);
}

int ag_seq2seq_team_size(const ag_seq2seq_team *t) { return t ? ag_team_size(t->team) : 0; }

void ag_seq2seq_team_free(ag_seq2seq_team *t)
{
    if (!t) return;
    for (int k = 1; k < MAX_WORKERS; k++) ag_seq2seq_free(&t->rep[k]);
    ag_team_free(t->team);
    ag__free(t);
}

ag_seq2seq_team *ag_seq2seq_team_new(const ag_seq2seq *m, ag_store *s, int n, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    if (!m) {
        snprintf(err, errlen, "team: the model is NULL");
        return NULL;
    }
    ag_seq2seq_team *t = ag__calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "team: out of memory for %d workers", n);
        return NULL;
    }
    t->m = m;
    t->team = ag_team_new(s, n, seq2seq_init, t, err, errlen);
    if (!t->team) {
        ag_seq2seq_team_free(t);
        return NULL;
    }
    return t;
}

/* One step's batch, cut into parts: part k is sentences [lo[k], lo[k + 1])
 * with tokens[k] target tokens. */
typedef struct seq2seq_parts {
    const ag_seq2seq_team *t;
    const int *src, *src_valid, *tgt_in, *tgt_out;
    int S, T;
    int lo[MAX_WORKERS + 1];
    long tokens[MAX_WORKERS], total;
} seq2seq_parts;

/* Sentence b's target tokens (not <pad>). */
static long target_tokens(const seq2seq_parts *p, int b)
{
    long n = 0;
    for (int i = 0; i < p->T; i++) n += p->tgt_out[(long)b * p->T + i] != 0;
    return n;
}

/* Sentence b's share of a step's work: its source tokens, and twice its
 * target tokens. */
static long sentence_work(const seq2seq_parts *p, int b)
{
    int v = p->src_valid[b];
    return (v < 0 ? 0 : v > p->S ? p->S : v) + 2 * target_tokens(p, b);
}

static ag_tensor *seq2seq_part_loss(void *ctx, ag_graph *g, ag_store *s, int k, int nparts, double *weight)
{
    (void)s;
    const seq2seq_parts *p = ctx;
    const ag_seq2seq *m = k ? &p->t->rep[k] : p->t->m;
    int b0 = p->lo[k], nb = p->lo[k + 1] - b0, S = p->S, T = p->T;
    *weight = (double)p->tokens[k] / (double)p->total;
    if (!p->tokens[k]) return NULL; /* only padding: skipped */
    ag_tensor *l = ag_seq2seq_loss(g, m, p->src + (size_t)b0 * S, p->src_valid + b0, p->tgt_in + (size_t)b0 * T,
                                   p->tgt_out + (size_t)b0 * T, nb, S, T);
    if (nparts > 1) ag__graph_prefix(g, "sentences %d..%d of the batch: ", b0, b0 + nb - 1);
    return l;
}

/* The cut into min(n, B) parts of about equal work: a source token's
 * (encoder, and the cross-attentions' keys and values) plus twice its target
 * tokens' (decoder and output layer: at the defaults 80K and 174K
 * multiply-adds a token, with a target vocabulary of 1225).  Bad batches
 * go to one part, whose ag_seq2seq_loss names the problem.  Returns the
 * number of parts. */
static int cut_batch(seq2seq_parts *p, const ag_seq2seq *m, int B, int n)
{
    int nw = n < B ? n : B;
    p->total = 0;
    if (nw > 1 && p->src_valid && p->tgt_out && p->T > 0 && p->T <= m->cfg.max_len) {
        long work = 0, done = 0;
        for (int b = 0; b < B; b++) work += sentence_work(p, b);
        int k = 1; /* lo[k]: after the sentence that brings the work done to k / nw of it */
        for (int b = 0; b < B && k < nw; b++)
            for (done += sentence_work(p, b); k < nw && done * nw >= work * k; k++) p->lo[k] = b + 1;
        for (; k < nw; k++) p->lo[k] = B;
        p->lo[0] = 0, p->lo[nw] = B;
        for (k = 0; k < nw; k++) {
            p->tokens[k] = 0;
            for (int b = p->lo[k]; b < p->lo[k + 1]; b++) p->tokens[k] += target_tokens(p, b);
            p->total += p->tokens[k];
        }
    }
    if (nw <= 1 || p->total == 0) { /* one part: the plain step */
        nw = 1, p->lo[0] = 0, p->lo[1] = B, p->tokens[0] = p->total = 1;
    }
    return nw;
}

int ag_seq2seq_cut(const ag_seq2seq *m, const int *src_valid, const int *tgt_out, int B, int S, int T, int n, int *lo,
                   double *w)
{
    if (!m || !lo || !w || B < 1 || n < 1 || n > MAX_WORKERS) return 0;
    seq2seq_parts p = {.src_valid = src_valid, .tgt_out = tgt_out, .S = S, .T = T};
    int nw = cut_batch(&p, m, B, n);
    for (int k = 0; k < nw; k++) lo[k] = p.lo[k], w[k] = (double)p.tokens[k] / (double)p.total;
    lo[nw] = B;
    return nw;
}

ag_status ag_seq2seq_team_step(ag_seq2seq_team *t, ag_graph *g, const int *src, const int *src_valid,
                               const int *tgt_in, const int *tgt_out, int B, int S, int T, double *loss)
{
    if (!g) return AG_ERR_ARG;
    if (!t) return ag_graph_fail(g, AG_ERR_ARG, "seq2seq_team_step: the team is NULL");
    if (loss) *loss = NAN;
    seq2seq_parts p = {.t = t, .src = src, .src_valid = src_valid, .tgt_in = tgt_in, .tgt_out = tgt_out, .S = S, .T = T};
    int nw = cut_batch(&p, t->m, B, ag_team_size(t->team));
    return ag_team_step(t->team, g, nw, seq2seq_part_loss, &p, loss);
}
