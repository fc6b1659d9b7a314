/* kernels/matmul.c: matmul's products by the blocked gemm (kernels/gemm.c),
 * batch entries shared among the threads.  The math and the reference
 * loops are ops/matmul.c; the batch layout (ag__products) is made by
 * core/products.c.  p->bf16: the products of the operands rounded to bf16
 * (ops/bf16.c), by ag__gemm_bf16 or on rounded copies. */
#include "core/internal.h"
#include "kernels/kernels.h"

/* A product's batch and operands, for its entries on the threads. */
typedef struct mm_job {
    const ag__products *p;
    const ag_real *a, *b, *dy;
    ag_real *y, *da, *db;
    ag_real beta_a, beta_b;
    bool vdp; /* bf16 products by ag__gemm_bf16 (else a, b, dy are rounded copies) */
} mm_job;

/* bf16 products (p->bf16): ag__gemm_bf16 rounds the operands as it packs
 * them where the CPU has AVX512_BF16 (true); elsewhere ag__gemm multiplies
 * rounded copies (ag__k_bf16_copies), which replace *a, *b and *dy (n
 * values each; dy may be NULL).  false: no memory (the failure on g). */
static bool bf16_operands(ag_graph *g, const ag_real **a, size_t na, const ag_real **b, size_t nb, const ag_real **dy,
                          size_t ny, bool *vdp)
{
    if ((*vdp = ag__isa_bf16())) return true;
    return ag__k_bf16_copies(g, dy ? 3 : 2, (const ag_real **[]){a, b, dy}, (size_t[]){na, nb, ny});
}

/* Batch entry r of the forward: y[r] = a[r] b[r] (b[r]^T when tb). */
static void matmul_entry(void *ctx, size_t r)
{
    const mm_job *j = ctx;
    const ag__products *p = j->p;
    const int nb = p->nb;
    (j->vdp ? ag__gemm_bf16 : ag__gemm)(0, p->tb, p->M, p->N, p->K, j->a + ag__products_at(p, p->a, r), (int)p->a[nb], j->b + ag__products_at(p, p->b, r),
             (int)p->b[nb], 0, j->y + ag__products_at(p, p->y, r), (int)p->y[nb]);
}

bool ag__k_matmul_forward(ag_graph *g, const ag__products *p, const ag_tensor *ta, const ag_tensor *tb, ag_real *y)
{
    const ag_real *a = ta->data, *b = tb->data;
    bool vdp = false;
    if (p->bf16 && !bf16_operands(g, &a, ta->size, &b, tb->size, NULL, 0, &vdp)) return true;
    /* many small products (attention's heads): one per thread at a time;
     * a large one is split inside ag__gemm instead */
    size_t my = (size_t)p->M * p->N;
    int nt = p->count > 1 ? ag__threads_for(p->count * my * (size_t)p->K / 16) : 1;
    mm_job j = {.p = p, .a = a, .b = b, .y = y, .vdp = vdp};
    ag__parallel_for(p->count, nt, matmul_entry, &j);
    return true;
}

/* Batch entry r of the backward.  beta_a = 0 (beta_b = 0) when da (db) held
 * nothing yet and this entry is the only one to write its matrix: the
 * product is stored, not added. */
static void matmul_entry_backward(void *ctx, size_t r)
{
    const mm_job *j = ctx;
    const ag__products *p = j->p;
    const int M = p->M, N = p->N, K = p->K, nb = p->nb;
    const ag_real *a = j->a, *b = j->b, *dy = j->dy;
    ag_real *da = j->da, *db = j->db, beta_a = j->beta_a, beta_b = j->beta_b;
    void (*gemm)(int, int, int, int, int, const ag_real *, int, const ag_real *, int, ag_real, ag_real *, int) =
        j->vdp ? ag__gemm_bf16 : ag__gemm;
    size_t ia = ag__products_at(p, p->a, r), ib = ag__products_at(p, p->b, r), iy = ag__products_at(p, p->y, r);
    int lda = (int)p->a[nb], ldb = (int)p->b[nb], ldy = (int)p->y[nb];
    dy += iy;
    if (!p->tb) {
        /* y = a b:  da += dy b^T  [M, N] x [N, K] */
        if (da) gemm(0, 1, M, K, N, dy, ldy, b + ib, ldb, beta_a, da + ia, lda);
        /* y = a b:  db += a^T dy  [K, M] x [M, N] */
        if (db) gemm(1, 0, K, N, M, a + ia, lda, dy, ldy, beta_b, db + ib, ldb);
    } else {
        /* y = a b^T:  da += dy b  [M, N] x [N, K] */
        if (da) gemm(0, 0, M, K, N, dy, ldy, b + ib, ldb, beta_a, da + ia, lda);
        /* y = a b^T:  db += dy^T a  [N, M] x [M, K] */
        if (db) gemm(1, 0, N, K, M, dy, ldy, a + ia, lda, beta_b, db + ib, ldb);
    }
}

/* x's gradient for a product in which each batch entry of x is read `own`
 * (once) or not: fresh and own, the entries store into it (*beta = 0);
 * otherwise they add (*beta = 1), into zeros if it was fresh. */
static ag_real *grad_for(ag_graph *g, ag_tensor *x, bool own, ag_real *beta)
{
    bool fresh;
    ag_real *dx = ag__grad_fresh(g, x, &fresh);
    *beta = fresh && own ? 0 : 1;
    if (dx && fresh && !own) memset(dx, 0, x->size * sizeof(ag_real));
    return dx;
}

bool ag__k_matmul_backward(ag_graph *g, const ag__products *p, ag_tensor *a, ag_tensor *b, const ag_real *dy)
{
    size_t ma = (size_t)p->M * p->K, mb = (size_t)p->K * p->N, my = (size_t)p->M * p->N;
    /* an operand is its own when no batch axis of it was stretched: then
     * each batch entry writes its own matrix of da (db), and threads may
     * share the batch (a stretched one sums over r) */
    bool own_a = a->size / (ma ? ma : 1) == p->count, own_b = b->size / (mb ? mb : 1) == p->count;
    ag_real beta_a = 1, beta_b = 1;
    ag_real *da = a->requires_grad ? grad_for(g, a, own_a, &beta_a) : NULL;
    ag_real *db = b->requires_grad ? grad_for(g, b, own_b, &beta_b) : NULL;
    if ((a->requires_grad && !da) || (b->requires_grad && !db)) return true;
    int nt = own_a && own_b && p->count > 1 ? ag__threads_for(p->count * my * (size_t)p->K / 8) : 1;
    const ag_real *av = a->data, *bv = b->data;
    bool vdp = false; /* bf16: dy holds count M N values, in heads layout or not */
    if (p->bf16 && !bf16_operands(g, &av, a->size, &bv, b->size, &dy, p->count * my, &vdp)) return true;
    mm_job j = {p, av, bv, dy, NULL, da, db, beta_a, beta_b, vdp};
    ag__parallel_for(p->count, nt, matmul_entry_backward, &j);
    return true;
}
