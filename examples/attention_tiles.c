/* attention_tiles.c: the picture of the tiles that causal attention at
 * long rows computes and the ones it skips (flash_tiles.svg, with --svg;
 * docs/attention_long.md).
 *
 * For rows of more than 256 keys the attention kernel
 * (src/kernels/attention_flash.c) takes the queries in blocks of 64 and
 * the keys in tiles of 128, a tile's scores at a time.  With a causal mask
 * and fill -inf, block i (queries 64 i .. 64 i + 63) may see keys up to
 * 64 i + 63 only, so the tiles that start past it are never computed,
 * forward or backward; a tile on the diagonal is computed up to the
 * block's last key, its masked weights exactly 0.  One cell per tile: the
 * share of its scores the mask keeps, crossed where the tile is skipped. */
#include "attention_demo.h"

#include <stdio.h>

enum { T = 1024, QB = 64, KB = 128, ROWS = T / QB, COLS = T / KB };

int demo_tiles(const char *svg_dir)
{
    char path[4096], err[512];
    const char *file = demo_svg_path(svg_dir, "flash_tiles.svg", path, sizeof path);
    if (!file) return 0;
    static ag_real kept[ROWS * COLS], computed[ROWS * COLS];
    static char row_text[ROWS][24], col_text[COLS][24];
    const char *rows[ROWS], *cols[COLS];
    for (int i = 0; i < ROWS; i++) snprintf(row_text[i], sizeof row_text[i], "q %d-%d", QB * i, QB * i + QB - 1);
    for (int j = 0; j < COLS; j++) snprintf(col_text[j], sizeof col_text[j], "k %d-%d", KB * j, KB * j + KB - 1);
    int n = 0;
    for (int i = 0; i < ROWS; i++) {
        rows[i] = row_text[i];
        for (int j = 0; j < COLS; j++) {
            cols[j] = col_text[j];
            int keep = 0; /* scores (t, s) of the tile with s <= t */
            for (int t = QB * i; t < QB * (i + 1); t++)
                for (int s = KB * j; s < KB * (j + 1); s++) keep += s <= t;
            kept[i * COLS + j] = (ag_real)keep / (QB * KB);
            computed[i * COLS + j] = KB * j < QB * (i + 1); /* the tile starts before the block's last key */
            n += KB * j < QB * (i + 1);
        }
    }
    char title[128];
    snprintf(title, sizeof title, "%d of %d tiles computed (crossed: never)", n, ROWS * COLS);
    const char *panel[1] = {title};
    ag_heatmap_spec spec = {.title = "Causal attention, T = S = 1024: blocks of 64 queries, tiles of 128 keys",
                            .row_axis = "queries", .col_axis = "keys", .rows = ROWS, .cols = COLS,
                            .row_labels = rows, .col_labels = cols, .panel_titles = panel, .w = kept,
                            .mask = computed, .value_name = "kept"};
    return demo_report(ag_svg_heatmaps(file, &spec, err, sizeof err), file, err);
}
