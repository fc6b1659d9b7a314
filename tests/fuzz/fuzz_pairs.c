/* tests/fuzz/fuzz_pairs.c: libFuzzer target for the sentence-pair reader.
 *
 * Any bytes go to ag_pairs_parse as the contents of a data file.  Either it
 * fails with a message naming the file, or every pair it returns holds
 * non-empty token lists whose tokens are non-empty and space-free, with
 * increasing line numbers, and the rest of the text pipeline (vocabularies,
 * their serialization, encoding, grouping, BLEU) runs on it cleanly.
 *
 *   make fuzz                       (tests/fuzz/fuzz.mk)
 *   build-fuzz/fuzz_pairs build-fuzz/corpus/pairs */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) __builtin_trap();                                                               \
    } while (0)

static void check_tokens(const char *const *tok, int n)
{
    CHECK(n > 0);
    for (int i = 0; i < n; i++) CHECK(tok[i][0] != '\0' && !strchr(tok[i], ' '));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ag_pairs *p = (ag_pairs *)&size;
    char err[512] = "";
    ag_status st = ag_pairs_parse((const char *)data, size, "fuzz.tsv", &p, err, sizeof err);
    if (st != AG_OK) {
        CHECK(p == NULL);
        CHECK(st == AG_ERR_FORMAT || st == AG_ERR_NOMEM);
        CHECK(strncmp(err, "fuzz.tsv: ", 10) == 0);
        return 0;
    }
    CHECK(p && p->n > 0);
    CHECK(p->n_warnings_kept >= 0 && p->n_warnings_kept <= AG_PAIRS_MAX_WARNINGS);
    CHECK(p->n_warnings_kept == (p->n_skipped < AG_PAIRS_MAX_WARNINGS ? p->n_skipped : AG_PAIRS_MAX_WARNINGS));
    for (int i = 0; i < p->n_warnings_kept; i++) CHECK(strncmp(p->warnings[i], "fuzz.tsv:", 9) == 0);
    int last_line = 0;
    for (int i = 0; i < p->n; i++) {
        const ag_pair *pr = &p->pairs[i];
        CHECK(pr->line > last_line);
        last_line = pr->line;
        check_tokens(pr->src, pr->src_len);
        check_tokens(pr->tgt, pr->tgt_len);
        CHECK(pr->src_text && pr->tgt_text);
    }

    /* the rest of the pipeline on what was read */
    char msg[256];
    ag_vocab *sv = NULL, *tv = NULL, *back = NULL;
    CHECK(ag_vocab_from_pairs(p, AG_SOURCE, 1, &sv, msg, sizeof msg) == AG_OK);
    CHECK(ag_vocab_from_pairs(p, AG_TARGET, 2, &tv, msg, sizeof msg) == AG_OK);
    size_t len = ag_vocab_serialize(sv, NULL, 0);
    char *text = malloc(len + 1);
    CHECK(text);
    CHECK(ag_vocab_serialize(sv, text, len + 1) == len);
    CHECK(ag_vocab_parse(text, len, &back, msg, sizeof msg) == AG_OK);
    CHECK(ag_vocab_size(back) == ag_vocab_size(sv));
    free(text);
    enum { L = 8 };
    int ids[L], valid;
    for (int i = 0; i < p->n && i < 64; i++) {
        const ag_pair *pr = &p->pairs[i];
        CHECK(ag_encode(sv, pr->src, pr->src_len, L, ids, &valid) == AG_OK);
        CHECK(valid >= 1 && valid <= L);
        for (int t = 0; t < L; t++) CHECK(ids[t] >= 0 && ids[t] < ag_vocab_size(sv));
        double b = ag_bleu(pr->src, pr->src_len, pr->tgt, pr->tgt_len, 2);
        CHECK(b >= 0 && b <= 1);
    }
    ag_groups *gr = NULL;
    CHECK(ag_groups_build(p, NULL, 0, &gr, msg, sizeof msg) == AG_OK);
    int refs = 0;
    for (int i = 0; i < gr->n; i++) refs += gr->groups[i].nrefs;
    CHECK(refs == p->n);
    ag_groups_free(gr);
    ag_vocab_free(back);
    ag_vocab_free(sv);
    ag_vocab_free(tv);
    ag_pairs_free(p);
    return 0;
}
