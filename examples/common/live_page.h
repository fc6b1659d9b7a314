/* live_page.h: the two other ends of an explorer_out (explorer_json.h)
 * besides the page: the JSON alone (--json FILE, "-" for stdout: what the
 * live page reads from the program it runs), and the live page (--live
 * PAGE.html: the explorer page holding the program compiled to
 * WebAssembly, docs/explorer.md); explorer_write sends one JSON to each
 * of --html, --json and --live asked for.
 *
 *   live_spec live = {"gpt", argv[0], wasm_flag, "page.html", title, "model.safetensors", weights_path, args, input};
 *   explorer_write(prog, json, len, &(explorer_dest){html, json_path, &live, title});
 *
 * The module is build/wasm/<prog>.wasm (make wasm), found beside the
 * program (<its directory>/wasm/<prog>.wasm) unless a path is given. */
#ifndef EXAMPLES_LIVE_PAGE_H
#define EXAMPLES_LIVE_PAGE_H

#include "explorer_json.h"

/* The JSON written so far, to path ("-": stdout); 0, or 1 after a message. */
static inline int explorer_close_json(explorer_out *x, const char *prog, const char *path)
{
    char err[512];
    int rc = 1;
    if (fclose(x->f) != 0) fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
    else if (!strcmp(path, "-")) rc = fwrite(x->buf, 1, x->len, stdout) != x->len || fflush(stdout) != 0;
    else if (ag_file_write(path, x->buf, x->len, err, sizeof err) != AG_OK) fprintf(stderr, "%s: %s\n", prog, err);
    else rc = 0;
    if (rc && !strcmp(path, "-")) fprintf(stderr, "%s: stdout: %s\n", prog, strerror(errno));
    free(x->buf);
    return rc;
}

typedef struct live_spec {
    const char *prog;      /* "translate": the module is <prog>.wasm */
    const char *argv0;     /* the program's path, to find the module beside it */
    const char *wasm;      /* the module's path, or NULL: beside the program */
    const char *path;      /* the page */
    const char *title;
    const char *file_name; /* the file the page gives the program, or NULL */
    const char *file_path; /* where its bytes are read from */
    const char *const *args; /* what the page runs (ag_live_program) */
    const char *input;
} live_spec;

/* The live page of the JSON written so far; 0, or 1 after a message. */
static inline int live_close(explorer_out *x, const live_spec *s)
{
    char err[512], wasm[4096];
    const char *slash = strrchr(s->argv0, '/');
    if (s->wasm) snprintf(wasm, sizeof wasm, "%s", s->wasm);
    else snprintf(wasm, sizeof wasm, "%.*swasm/%s.wasm", slash ? (int)(slash - s->argv0 + 1) : 0, s->argv0, s->prog);
    char *mod = NULL, *file = NULL;
    size_t mod_len = 0, file_len = 0;
    int rc = 1;
    if (fclose(x->f) != 0) fprintf(stderr, "%s: %s: %s\n", s->prog, s->path, strerror(errno));
    else if (ag_file_read(wasm, &mod, &mod_len, err, sizeof err) != AG_OK)
        fprintf(stderr, "%s: --live: %s (build it with: make wasm)\n", s->prog, err);
    else if (s->file_name && ag_file_read(s->file_path, &file, &file_len, err, sizeof err) != AG_OK)
        fprintf(stderr, "%s: --live: %s\n", s->prog, err);
    else {
        ag_live_program p = {s->prog, (const unsigned char *)mod, mod_len, s->file_name,
                             (const unsigned char *)file, file_len, s->args, s->input};
        if (ag_html_live(s->path, s->title, x->buf, &p, err, sizeof err) != AG_OK)
            fprintf(stderr, "%s: %s\n", s->prog, err);
        else rc = 0;
    }
    ag_file_free(mod), ag_file_free(file), free(x->buf);
    return rc;
}

/* Where the explorer's data goes, each NULL when not asked for. */
typedef struct explorer_dest {
    const char *html, *json; /* --html PAGE.html, --json FILE */
    const live_spec *live;   /* --live PAGE.html */
    const char *title;
} explorer_dest;

/* json (len bytes) to each destination; 0, or 1 after a message. */
static inline int explorer_write(const char *prog, const char *json, size_t len, const explorer_dest *d)
{
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        explorer_out x;
        if (!(k == 0 ? d->html != NULL : k == 1 ? d->json != NULL : d->live != NULL)) continue;
        if (!explorer_open(&x, prog)) return 1;
        fwrite(json, 1, len, x.f);
        rc = k == 0 ? explorer_close(&x, prog, d->html, d->title)
             : k == 1 ? explorer_close_json(&x, prog, d->json)
                      : live_close(&x, d->live);
    }
    return rc;
}

#endif /* EXAMPLES_LIVE_PAGE_H */
