/* alloc.h: the library's allocator, through the ag_set_allocator hooks.
 *
 * The one internal header that every layer may include: io, text and viz
 * use the public API and this, nothing else (as Lua's lauxlib uses only
 * the official API). */
#ifndef AG_ALLOC_H
#define AG_ALLOC_H

#include <stddef.h>

void *ag__malloc(size_t bytes);          /* NULL when out of memory */
void ag__free(void *p);                  /* NULL is fine */
void *ag__calloc(size_t n, size_t size); /* zeroed; NULL on overflow */

#endif /* AG_ALLOC_H */
