/* groups.c: the pairs that share a source sentence, gathered so that a
 * translation can be scored against every reference (d2l's data has many
 * sources with several translations).
 *
 * Invariant: a group's references are one run of the shared arrays, in the
 * order of the file; building takes two blocks (kept, and a temporary hash
 * table) and fails whole. */
#include "core/alloc.h"

#include "attograd_text.h"
#include "text/text.h"

/* ------------------------------------------------------------------------ */
/* Grouping by source                                                         */
/* ------------------------------------------------------------------------ */

void ag_groups_free(ag_groups *g)
{
    if (!g) return;
    ag__free(g->storage_);
    ag__free(g);
}

/* The arrays of a groups object: kept (the groups, then the reference
 * pointers, pair indices and lengths, at most one of each per pair) and a
 * temporary (the hash table and, per pair, its group and a fill cursor). */
typedef struct group_arrays {
    size_t cap;              /* hash table slots */
    const char *const **ref; /* [n] */
    int *ref_pair, *ref_len; /* [n] */
    int *table, *group_of, *fill;
} group_arrays;

/* Step 1: each pair finds (or opens) the group of its source; returns the
 * number of groups. */
static int find_groups(const ag_pairs *p, const int *idx, int nidx, ag_groups *g, group_arrays *a)
{
    int ng = 0;
    for (size_t i = 0; i < a->cap; i++) a->table[i] = -1;
    for (int i = 0; i < nidx; i++) {
        const ag_pair *pr = &p->pairs[idx ? idx[i] : i];
        size_t h = (size_t)ag__hash_tokens(pr->src, pr->src_len) & (a->cap - 1);
        while (a->table[h] >= 0 && !ag_tokens_equal(g->groups[a->table[h]].src, g->groups[a->table[h]].src_len,
                                                    pr->src, pr->src_len))
            h = (h + 1) & (a->cap - 1);
        if (a->table[h] < 0) {
            a->table[h] = ng;
            g->groups[ng++] = (ag_group){.first = idx ? idx[i] : i, .src = pr->src, .src_len = pr->src_len};
        }
        a->group_of[i] = a->table[h];
        g->groups[a->table[h]].nrefs++;
    }
    return ng;
}

/* Step 2: each group's references are a run of the arrays, in file order. */
static void fill_references(const ag_pairs *p, const int *idx, int nidx, ag_groups *g, group_arrays *a)
{
    int start = 0;
    for (int k = 0; k < g->n; k++) {
        a->fill[k] = start;
        g->groups[k].ref_pair = a->ref_pair + start;
        g->groups[k].ref = a->ref + start;
        g->groups[k].ref_len = a->ref_len + start;
        start += g->groups[k].nrefs;
    }
    for (int i = 0; i < nidx; i++) {
        int pi = idx ? idx[i] : i, at = a->fill[a->group_of[i]]++;
        a->ref_pair[at] = pi;
        a->ref[at] = p->pairs[pi].tgt;
        a->ref_len[at] = p->pairs[pi].tgt_len;
    }
}

ag_status ag_groups_build(const ag_pairs *p, const int *idx, int nidx, ag_groups **out,
                          char *err, size_t errlen)
{
    if (!out) return ag__errf(err, errlen, AG_ERR_ARG, "groups: out is NULL");
    *out = NULL;
    if (!p) return ag__errf(err, errlen, AG_ERR_ARG, "groups: pairs is NULL");
    if (!idx) nidx = p->n;
    if (nidx < 0) return ag__errf(err, errlen, AG_ERR_ARG, "groups: %d indices", nidx);
    for (int i = 0; idx && i < nidx; i++)
        if (idx[i] < 0 || idx[i] >= p->n)
            return ag__errf(err, errlen, AG_ERR_ARG, "groups: index %d is pair %d, outside [0, %d)", i, idx[i], p->n);

    size_t n = (size_t)nidx, cap = ag__table_cap(n);
    size_t off_ref = n * sizeof(ag_group);
    size_t off_pair = off_ref + n * sizeof(const char *const *);
    size_t off_len = off_pair + n * sizeof(int);
    ag_groups *g = ag__calloc(1, sizeof *g);
    char *keep = ag__malloc(off_len + n * sizeof(int));
    int *tmp = ag__malloc((cap + 2 * n) * sizeof(int));
    if (!g || !keep || !tmp) {
        ag__free(g), ag__free(keep), ag__free(tmp);
        return ag__errf(err, errlen, AG_ERR_NOMEM, "groups: out of memory for %d pairs", nidx);
    }
    g->storage_ = keep;
    g->groups = (ag_group *)keep;
    group_arrays a = {cap, (const char *const **)(keep + off_ref), (int *)(keep + off_pair), (int *)(keep + off_len),
                      tmp, tmp + cap, tmp + cap + n};
    g->n = find_groups(p, idx, nidx, g, &a);
    fill_references(p, idx, nidx, g, &a);
    ag__free(tmp);
    *out = g;
    return AG_OK;
}
