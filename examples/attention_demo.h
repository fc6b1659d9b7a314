/* attention_demo.h: the parts of build/attention_demo that live in files of
 * their own (attention_demo.c has main and the tutorials). */
#ifndef ATTENTION_DEMO_H
#define ATTENTION_DEMO_H

#include "attograd.h"

#include <stdint.h>

/* attention_paths.c: --paths, the table of which node runs when, built
 * from real graphs. */
int demo_paths(void);

/* attention_walk.c: the shape walk with distinct sizes (and the pictures
 * of its block: attention.dot, walk.svg), a fully masked row under each
 * fill, and the positional encodings' wavelengths. */
int demo_walk(uint64_t seed, const char *svg_dir);
int demo_masked_row(void);
void demo_wavelengths(void);

/* attention_tiles.c: with a DIR, flash_tiles.svg, the tiles of causal
 * attention at long rows that the kernel computes and skips. */
int demo_tiles(const char *svg_dir);

/* attention_demo.c: DIR/name, or name in the current directory (NULL when
 * the path is too long); DIR/name only with a DIR (svg_path). */
const char *demo_out_path(const char *dir, const char *name, char *buf, size_t len);
const char *demo_svg_path(const char *dir, const char *name, char *buf, size_t len);
int demo_report(ag_status st, const char *path, const char *err);

#endif
