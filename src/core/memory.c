/* memory.c: the allocation hook and the arena.
 *
 * Every byte the library takes from the system goes through ag__malloc, so a
 * test can fail the N-th allocation and a benchmark can count them.
 *
 * The arena is a chain of blocks.  Allocation bumps an offset in the current
 * block and moves on to the next block (or mallocs a new one, at least twice
 * the last) when it does not fit.  Reset rewinds to the first block and keeps
 * them all: a step that asks for the same sizes in the same order as the one
 * before it is served from the same blocks and calls malloc zero times. */
#include "core/internal.h"

#include <stdatomic.h>
#include <stdlib.h>

static void *sys_alloc(size_t bytes, void *user) { (void)user; return malloc(bytes); }
static void sys_release(void *p, void *user) { (void)user; free(p); }

static ag_allocator hook = {sys_alloc, sys_release, NULL};
static _Atomic uint64_t alloc_count; /* workers of a team allocate at once */

void ag_set_allocator(const ag_allocator *a)
{
    if (a) hook = *a;
    else hook = (ag_allocator){sys_alloc, sys_release, NULL};
}

uint64_t ag_alloc_count(void) { return atomic_load_explicit(&alloc_count, memory_order_relaxed); }

void *ag__malloc(size_t bytes)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return hook.alloc(bytes ? bytes : 1, hook.user);
}

void ag__free(void *p)
{
    if (p) hook.release(p, hook.user);
}

void *ag__calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = ag__malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

/* ---- arena --------------------------------------------------------------- */

#define ARENA_ALIGN 64
#define ARENA_FIRST_BLOCK (1u << 20)

typedef struct block {
    struct block *next;
    size_t cap, used;
    unsigned char *base; /* ARENA_ALIGN-aligned start of the usable bytes */
} block;

struct ag_arena {
    block *first, *cur;
    size_t reserved;
};

ag_arena *ag__arena_new(void)
{
    ag_arena *a = ag__calloc(1, sizeof *a);
    return a;
}

void ag__arena_free(ag_arena *a)
{
    if (!a) return;
    for (block *b = a->first, *n; b; b = n) {
        n = b->next;
        ag__free(b);
    }
    ag__free(a);
}

void ag__arena_reset(ag_arena *a)
{
    for (block *b = a->first; b; b = b->next) b->used = 0;
    a->cur = a->first;
}

static block *block_new(size_t cap)
{
    if (cap > SIZE_MAX - sizeof(block) - ARENA_ALIGN) return NULL;
    unsigned char *raw = ag__malloc(sizeof(block) + ARENA_ALIGN + cap);
    if (!raw) return NULL;
    block *b = (block *)raw;
    uintptr_t p = (uintptr_t)(raw + sizeof(block));
    p = (p + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1);
    b->base = (unsigned char *)p;
    b->cap = cap;
    b->used = 0;
    b->next = NULL;
    return b;
}

void *ag__arena_alloc(ag_arena *a, size_t bytes)
{
    if (bytes > SIZE_MAX - ARENA_ALIGN) return NULL;
    bytes = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (bytes == 0) bytes = ARENA_ALIGN;
    /* walk the kept blocks first: after a reset they are reused in order */
    block *b = a->cur;
    while (b && b->cap - b->used < bytes) {
        if (!b->next) break;
        b = b->next;
    }
    if (!b || b->cap - b->used < bytes) {
        size_t cap = ARENA_FIRST_BLOCK;
        if (b && b->cap <= SIZE_MAX / 2 && 2 * b->cap > cap) cap = 2 * b->cap;
        if (cap < bytes) cap = bytes;
        block *nb = block_new(cap);
        if (!nb) return NULL;
        if (b) b->next = nb;
        else a->first = nb;
        a->reserved += cap;
        b = nb;
    }
    a->cur = b;
    void *p = b->base + b->used;
    b->used += bytes;
    return p;
}

size_t ag__arena_reserved(const ag_arena *a) { return a->reserved; }

size_t ag__arena_used(const ag_arena *a)
{
    size_t u = 0;
    for (const block *b = a->first; b; b = b->next) u += b->used;
    return u;
}
