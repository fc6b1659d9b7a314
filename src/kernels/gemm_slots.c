/* kernels/gemm_slots.c: the product's packing buffers, one pair per
 * thread (kernels/gemm.c packs B's panels and A's edge rows into them). */
#include "kernels/gemm.h"

#include <stdint.h>
#if !AG_NO_THREADS
#include <pthread.h>
#endif

/* Packing buffers, grown once and kept (a training step after the first
 * allocates nothing).  Each thread packs into its own pair, held in a slot
 * of one global table: a thread claims a free slot on first use and gives
 * it back when it exits (a pthread key's destructor), so the next thread
 * reuses the buffers.  Held globally, they stay reachable: nothing leaks
 * when a thread pool shrinks, and leak checkers see no lost blocks. */
#define PACK_SLOTS 256
typedef struct pack_slot {
    ag_real *a, *b;
    size_t cap_a, cap_b;
    int used;
} pack_slot;
static pack_slot slots[PACK_SLOTS];
#if AG_NO_THREADS
/* One thread, one slot (index `from` is the only thread's, whichever it
 * is: slot 0). */
static pack_slot *claim_slot(int from)
{
    (void)from;
    slots[0].used = 1;
    return &slots[0];
}
#else
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

static void slot_release(void *p)
{
    pthread_mutex_lock(&slots_mu);
    ((pack_slot *)p)->used = 0;
    pthread_mutex_unlock(&slots_mu);
}

static void slot_key_make(void) { pthread_key_create(&slot_key, slot_release); }

/* The calling thread's slot, or NULL when every slot is taken: taken on
 * first use, the first free one from index `from` on (then from 0). */
static pack_slot *claim_slot(int from)
{
    pthread_once(&slot_once, slot_key_make);
    pack_slot *sl = pthread_getspecific(slot_key);
    if (sl) return sl;
    pthread_mutex_lock(&slots_mu);
    for (int k = 0; k < PACK_SLOTS && !sl; k++) {
        int i = (from + k) % PACK_SLOTS;
        if (!slots[i].used) slots[i].used = 1, sl = &slots[i];
    }
    pthread_mutex_unlock(&slots_mu);
    if (sl && pthread_setspecific(slot_key, sl) != 0) {
        slot_release(sl);
        sl = NULL;
    }
    return sl;
}
#endif

static pack_slot *my_slot(void) { return claim_slot(0); }

/* Short-lived threads (threads.c without OpenMP: one per block of a loop)
 * take their slots by block, not in the order they happen to start: block
 * t of every loop then packs into the same slot, the one its first loop
 * grew, and a later step allocates nothing.  Returns the index taken. */
int ag__pack_slot_claim(int from)
{
    pack_slot *sl = claim_slot(from < 0 ? 0 : from % PACK_SLOTS);
    return sl ? (int)(sl - slots) : -1;
}

/* A buffer of n values, 64-byte aligned: *raw keeps what to free. */
static ag_real *reserve(ag_real **raw, size_t *cap, size_t n)
{
    if (n > *cap) {
        ag_real *p = ag__malloc(n * sizeof(ag_real) + 64);
        if (!p) return NULL;
        ag__free(*raw);
        *raw = p;
        *cap = n;
    }
    return (ag_real *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63);
}

bool ag__gemm_buffers(size_t na, size_t nb, ag_real **a, ag_real **b)
{
    pack_slot *sl = my_slot();
    *b = sl ? reserve(&sl->b, &sl->cap_b, nb) : NULL;
    *a = sl ? reserve(&sl->a, &sl->cap_a, na) : NULL;
    return *a && *b;
}
