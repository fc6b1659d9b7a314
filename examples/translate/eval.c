/* examples/translate/eval.c: greedy decoding of many sentences, and
 * translate eval: exact match and BLEU over a data file's distinct sources.
 *
 * Exact match counts a source whose translation equals one of its
 * references; the ceiling counts the sources one of whose references the
 * model could produce at all (every token in its vocabulary, room for
 * <eos>): exact match / ceiling is how much of the reachable it gets. */
#include "translate.h"
#include "../common/report_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int translate_batch(const model *m, ag_graph *g, const char *const *const *src, const int *src_len, int n,
                    const char ***out_tok, int *out_len)
{
    int L = m->cfg.max_len, chunk = 64;
    int *ids = malloc((size_t)chunk * L * sizeof(int)), *valid = malloc((size_t)chunk * sizeof(int));
    int *outs = malloc((size_t)chunk * L * sizeof(int)), *lens = malloc((size_t)chunk * sizeof(int));
    int rc = 1;
    if (!ids || !valid || !outs || !lens) {
        fprintf(stderr, "%s: out of memory decoding\n", prog);
        goto done;
    }
    for (int at = 0; at < n; at += chunk) {
        int B = n - at < chunk ? n - at : chunk, S = 1;
        for (int i = 0; i < B; i++) {
            ag_encode(m->sv, src[at + i], src_len[at + i], L, ids + (size_t)i * L, &valid[i]);
            if (valid[i] > S) S = valid[i];
        }
        /* trim the padding columns beyond the longest source */
        for (int i = 0; i < B; i++) memmove(ids + (size_t)i * S, ids + (size_t)i * L, (size_t)S * sizeof(int));
        ag_status st = ag_seq2seq_greedy(g, &m->net, ids, valid, B, S, AG_BOS, AG_EOS, L, outs, lens);
        if (st != AG_OK) {
            fprintf(stderr, "%s: decoding failed: %s\n", prog, ag_graph_error(g));
            goto done;
        }
        for (int i = 0; i < B; i++) {
            out_len[at + i] = lens[i];
            for (int t = 0; t < lens[i]; t++) out_tok[at + i][t] = ag_vocab_token(m->tv, outs[(size_t)i * L + t]);
        }
    }
    rc = 0;
done:
    free(ids), free(valid), free(outs), free(lens);
    return rc;
}

/* Add one group's exact match (0/1), reachability (0/1) and BLEU to r. */
static void score(const model *m, const ag_group *grp, const char *const *out, int olen, metrics *r)
{
    int hit = 0, reachable = 0, L = m->cfg.max_len;
    for (int k = 0; k < grp->nrefs; k++) {
        if (ag_tokens_equal(out, olen, grp->ref[k], grp->ref_len[k])) hit = 1;
        /* reachable: every token in the vocabulary and room for <eos> */
        int ok = grp->ref_len[k] + 1 <= L;
        for (int t = 0; ok && t < grp->ref_len[k]; t++) ok = ag_vocab_id(m->tv, grp->ref[k][t]) != AG_UNK;
        reachable |= ok;
    }
    r->exact += hit;
    r->ceiling += reachable;
    r->bleu += ag_bleu_best(out, olen, grp->ref, grp->ref_len, grp->nrefs, 2);
}

int evaluate(const model *m, ag_graph *g, const ag_pairs *p, metrics *r)
{
    char err[256];
    ag_groups *gr = NULL;
    if (ag_groups_build(p, NULL, 0, &gr, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    int n = gr->n, L = m->cfg.max_len, rc = 1;
    const char ***src = calloc((size_t)n, sizeof *src);
    int *slen = calloc((size_t)n, sizeof(int)), *olen = calloc((size_t)n, sizeof(int));
    const char ***out = malloc((size_t)n * sizeof *out);
    const char **pool = malloc((size_t)n * L * sizeof *pool);
    if (!src || !slen || !olen || !out || !pool) {
        fprintf(stderr, "%s: out of memory evaluating %d sources\n", prog, n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        src[i] = (const char **)gr->groups[i].src;
        slen[i] = gr->groups[i].src_len;
        out[i] = pool + (size_t)i * L;
    }
    if (translate_batch(m, g, (const char *const *const *)src, slen, n, out, olen)) goto done;
    *r = (metrics){.sources = n};
    for (int i = 0; i < n; i++) score(m, &gr->groups[i], out[i], olen[i], r);
    if (n) r->exact /= n, r->bleu /= n, r->ceiling /= n;
    rc = 0;
done:
    free(src), free(slen), free(olen), free(out), free(pool);
    ag_groups_free(gr);
    return rc;
}

static int write_json(const char *path, const metrics *r)
{
    report_file out;
    if (!report_open(&out, prog, path)) return 1;
    fprintf(out.f, "{\"sources\": %d, \"exact_match\": %.6f, \"bleu\": %.6f, \"ceiling\": %.6f}\n", r->sources,
            r->exact, r->bleu, r->ceiling);
    return report_close(&out, prog);
}

int cmd_eval(const opts *o)
{
    if (!o->model || !o->data) return bad("eval needs --model MODEL and --data FILE%s%s", "", "");
    model m;
    ag_pairs *p = NULL;
    ag_graph *g = NULL;
    metrics r;
    int rc = 1;
    ag_set_threads(o->threads);
    if (load_model(&m, o->model, NULL)) return 1;
    if (load_pairs(o->data, &p)) goto done;
    if (!(g = ag_graph_new())) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (evaluate(&m, g, p, &r)) goto done;
    printf("sources %d  exact match %.3f  BLEU %.3f  ceiling %.3f (exact match / ceiling %.3f)\n", r.sources, r.exact,
           r.bleu, r.ceiling, r.ceiling > 0 ? r.exact / r.ceiling : 0);
    if (o->json && write_json(o->json, &r)) goto done;
    rc = 0;
done:
    ag_graph_free(g);
    ag_pairs_free(p);
    model_free(&m);
    return rc;
}
