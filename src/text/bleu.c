/* bleu.c: d2l.ai's sentence BLEU (section "Encoder-Decoder Seq2Seq for
 * Machine Translation", function `bleu`), on token arrays.
 *
 *   BLEU = exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..min(k, len_pred)} p_n^(1/2^n)
 *
 * p_n is the share of the prediction's len_pred - n + 1 n-grams that match
 * the label, where matching is clipped: an n-gram that the label holds c
 * times matches at most c times.  d2l counts the label's n-grams in a
 * dictionary and subtracts one per match; here the i-th prediction n-gram
 * matches when the n-grams equal to it before position i are fewer than its
 * copies in the label, which is the same count with no allocation.  The
 * weights 1/2^n favour long matches less than the usual geometric mean does:
 * d2l's choice, kept so numbers compare with the book.
 *
 * Cost: O(len_pred * (len_pred + len_label) * n) per order, fine for
 * sentences. */
#include "core/alloc.h"

#include <string.h>

#include <math.h>

#include "attograd_text.h"

/* a[0..n) and b[0..n) hold the same tokens. */
static int ngram_eq(const char *const *a, const char *const *b, int n)
{
    for (int t = 0; t < n; t++)
        if (strcmp(a[t], b[t]) != 0) return 0;
    return 1;
}

double ag_bleu(const char *const *pred, int len_pred, const char *const *label, int len_label,
               int k)
{
    if (!pred || len_pred <= 0) return 0.0;
    if (!label || len_label < 0) len_label = 0;
    double score = exp(fmin(0.0, 1.0 - (double)len_label / (double)len_pred));
    int orders = k < len_pred ? k : len_pred;
    for (int n = 1; n <= orders; n++) {
        int matches = 0;
        for (int i = 0; i + n <= len_pred; i++) {
            int before = 0, in_label = 0;
            for (int j = 0; j < i; j++) before += ngram_eq(pred + j, pred + i, n);
            for (int j = 0; j + n <= len_label; j++) in_label += ngram_eq(label + j, pred + i, n);
            if (before < in_label) matches++;
        }
        score *= pow((double)matches / (double)(len_pred - n + 1), pow(0.5, n));
    }
    return score;
}

double ag_bleu_best(const char *const *pred, int len_pred, const char *const *const *refs,
                    const int *ref_lens, int nrefs, int k)
{
    double best = 0.0;
    if (!refs || !ref_lens) return 0.0;
    for (int r = 0; r < nrefs; r++) {
        double b = ag_bleu(pred, len_pred, refs[r], ref_lens[r], k);
        if (b > best) best = b;
    }
    return best;
}
