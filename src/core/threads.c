/* threads.c: how many threads the kernels may use.
 *
 * One number for the whole library, 1 by default.  The heavy loops (gemm,
 * softmax, layer_norm, the element-wise ops) split their work into pieces
 * whose boundaries never decide how an output element is computed: each is
 * computed by one thread, in a fixed order, so results are the same
 * whatever the count.  Every such loop goes through ag__parallel_for: its
 * body is written once, and runs on OpenMP's threads when the library is
 * built with OpenMP, on pthreads otherwise (started per loop and joined at
 * its end: the loops that split are large enough to repay that too).
 *
 * A loop runs on one thread, without starting any, when it is small
 * (under ~1M values) or already inside a parallel loop.  A fork and join
 * is cheap on an idle machine, but waking a sleeping helper
 * (OMP_WAIT_POLICY=passive, below) costs more than a smaller loop gains
 * from it (a lower threshold: docs/benchmarks.md).  (A team of one would
 * even call malloc.)
 *
 * Built for WebAssembly without threads (wasm32-wasi: make wasm, the live
 * pages of docs/explorer.md) there is neither: the blocks of a loop run one
 * after another on the calling thread, in the order t = 0, 1, ..., which
 * gives the same numbers (each output element is computed the same way
 * whatever the count).
 *
 * On a machine shared with other busy programs, run with
 * OMP_WAIT_POLICY=passive: a thread that has finished its share then sleeps
 * instead of spinning on a core its partner may need. */
#include "core/internal.h"

#ifdef _OPENMP
#include <omp.h>
#elif !AG_NO_THREADS
#include <pthread.h>
#endif

enum { MAX_THREADS = 256 };
static int nthreads = 1;

/* The least work worth a team of threads (tests lower it, so that their
 * small cases take the threaded paths). */
size_t ag__thread_min_work = 1048576;

void ag_set_threads(int n) { nthreads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n; }

int ag_get_threads(void) { return nthreads; }

#ifdef _OPENMP
static int in_parallel(void) { return omp_in_parallel(); }
#else
static _Thread_local int inside; /* this thread runs a block of a parallel loop */
static int in_parallel(void) { return inside; }
#endif

/* Threads for a loop that touches about `work` values. */
int ag__threads_for(size_t work)
{
    if (nthreads <= 1 || work < ag__thread_min_work || in_parallel()) return 1;
    return nthreads;
}

typedef struct loop {
    size_t n;
    int nt;
    ag_loop_fn body;
    void *ctx;
} loop;

/* Block t of nt: i in [n t / nt, n (t + 1) / nt). */
static void run_block(const loop *l, int t)
{
    size_t i1 = l->n * (size_t)(t + 1) / (size_t)l->nt;
    for (size_t i = l->n * (size_t)t / (size_t)l->nt; i < i1; i++) l->body(l->ctx, i);
}

#ifdef _OPENMP
static void run_blocks(const loop *l)
{
    /* schedule(static) gives each thread one contiguous block of t */
#pragma omp parallel for schedule(static) num_threads(l->nt)
    for (int t = 0; t < l->nt; t++) run_block(l, t);
}
#elif AG_NO_THREADS
static void run_blocks(const loop *l)
{
    int was = inside;
    inside = 1;
    for (int t = 0; t < l->nt; t++) run_block(l, t);
    inside = was;
}
#else
typedef struct block {
    const loop *l;
    int t;
    int slot; /* the gemm packing slot it takes first */
} block;

static void *block_main(void *arg)
{
    const block *b = arg;
    inside = 1;
    ag__pack_slot_claim(b->slot);
    run_block(b->l, b->t);
    return NULL;
}

/* Block 0 on the calling thread, the others on threads of their own; a
 * block whose thread cannot start runs on the calling thread instead.  The
 * threads live for one loop: block t takes gemm's packing slot t places
 * after the caller's (ag__pack_slot_claim), the slot it took in every
 * earlier loop, already grown, whichever thread starts first. */
static void run_blocks(const loop *l)
{
    int base = ag__pack_slot_claim(0);
    pthread_t th[MAX_THREADS];
    block arg[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int t = 1; t < l->nt; t++) {
        arg[t] = (block){l, t, base + t};
        started[t] = pthread_create(&th[t], NULL, block_main, &arg[t]) == 0;
    }
    int was = inside;
    inside = 1;
    run_block(l, 0);
    for (int t = 1; t < l->nt; t++)
        if (started[t]) pthread_join(th[t], NULL);
        else run_block(l, t);
    inside = was;
}
#endif

bool ag__threads_off = false;

void ag__parallel_for(size_t n, int nt, ag_loop_fn body, void *ctx)
{
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (ag__threads_off) nt = 1;
    if ((size_t)nt > n) nt = (int)n;
    if (nt <= 1) {
        for (size_t i = 0; i < n; i++) body(ctx, i);
        return;
    }
    loop l = {n, nt, body, ctx};
    run_blocks(&l);
}
