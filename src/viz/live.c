/* live.c: the live page, the explorer page that runs its program.
 *
 * The page is html.c's (the same style, data block and script) with three
 * more blocks: the program compiled to WebAssembly (make wasm) and the one
 * file it may read (a model), both base64; and the program's name and its
 * file's name as JSON.  live_js.c runs the program in the page as a shell
 * would (arguments, stdout, stderr, exit status) and draws what it prints.
 *
 * Invariant: as html.c's, the page loads nothing.  Its
 * Content-Security-Policy adds 'wasm-unsafe-eval' (compiling the module it
 * holds) to inline script and style, and blob: for its worker (made from
 * its own script, in memory); no fetch, no other file, so it works from
 * file:// on a machine without network. */
#include "viz/viz.h"
#include "io/json.h"

/* n bytes as base64 (RFC 4648, padded), in lines of 76 characters (the
 * page's script ignores the newlines). */
static void put_base64(ag__text *t, const unsigned char *p, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char line[80];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        line[k++] = A[v >> 18 & 63], line[k++] = A[v >> 12 & 63];
        line[k++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        line[k++] = i + 2 < n ? A[v & 63] : '=';
        if (k == 76 || i + 3 >= n) line[k++] = '\n', line[k] = '\0', ag__text_puts(t, line), k = 0;
    }
}

/* s as a JSON string: the names are the caller's (quotes, backslashes and
 * controls escaped; '<' as \u003c, as in the data block). */
static void put_json_string(ag__text *t, const char *s)
{
    ag__text_puts(t, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '"' || *p == '\\') ag__text_printf(t, "\\%c", *p);
        else if (*p < 0x20 || *p == '<') ag__text_printf(t, "\\u%04x", *p);
        else ag__text_printf(t, "%c", *p);
    ag__text_puts(t, "\"");
}

static int utf8(const char *s) { return ag__utf8_check((const unsigned char *)s, strlen(s)) == strlen(s); }

ag_status ag_html_live(const char *path, const char *title, const char *data_json, const ag_live_program *prog,
                       char *err, size_t errlen)
{
    if (!path || !data_json || !prog)
        return ag__errf(err, errlen, AG_ERR_ARG, "live page: %s is NULL",
                        !path ? "the path" : !data_json ? "the data" : "the program");
    if (!prog->name || !*prog->name || !prog->wasm || prog->wasm_len < 8 || memcmp(prog->wasm, "\0asm", 4))
        return ag__errf(err, errlen, AG_ERR_ARG, "live page: %s: the program needs a name and a WebAssembly module",
                        path);
    if (prog->file_name && (!*prog->file_name || strchr(prog->file_name, '/') || !prog->file))
        return ag__errf(err, errlen, AG_ERR_ARG, "live page: %s: the program's file needs a plain name and bytes",
                        path);
    if (!prog->args) return ag__errf(err, errlen, AG_ERR_ARG, "live page: %s: the program's arguments are NULL", path);
    const char *bad = prog->input && !utf8(prog->input) ? "input" : NULL;
    for (int i = 0; !bad && prog->args[i]; i++)
        if (!utf8(prog->args[i])) bad = "arguments";
    if (bad) return ag__errf(err, errlen, AG_ERR_ARG, "live page: %s: the program's %s: not UTF-8", path, bad);
    int glance = 0; /* the model at a glance: on the attention pages only */
    ag_status st = ag__explorer_check_json(path, data_json, &glance, err, errlen);
    if (st != AG_OK) return st;
    const char *name = title ? title : "attograd explorer";
    ag__text t = {0};
    ag__text_puts(&t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                      "script-src 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; worker-src blob:\">\n"
                      "<title>");
    ag__text_xml(&t, name, 0);
    ag__text_printf(&t, "</title>\n<style>\n%s%s", ag__explorer_css, glance ? ag__overview_css : "");
    ag__text_puts(&t, "#live{border:1px solid #ccc;border-radius:4px;padding:8px;margin:0 0 12px}\n"
                      "#live input[type=text]{font:inherit;width:28em}#live button{font:inherit;margin-left:6px}\n"
                      "table.mask td{width:26px;height:22px;text-align:center;cursor:pointer;border:1px solid #bbb}\n"
                      "table.mask td.on{background:#2a7d2a;color:#fff}table.mask td.off{background:#eee;color:#888}\n"
                      "table.mask td.edited{outline:2px solid #d62728}#live-status{color:#555}\n"
                      "table.mask th{font-weight:normal;padding:0 4px}.mkey{display:inline-block;padding:0 5px;margin:0 4px;border:1px solid #bbb}\n"
                      ".mkey.on{background:#2a7d2a;color:#fff}.mkey.off{background:#eee;color:#888}"
                      ".mkey.edited{outline:2px solid #d62728}\n"
                      "#live-error{color:#c00}#live-stale{color:#8a5a00;font-weight:bold}.invalid{color:#c00}\n"
                      "body.live-stale #app,body.live-stale #live-extra{opacity:.45}\n"
                      "button.head-off{background:#c00;color:#fff}.head-off{outline:3px solid #c00}\n"
                      /* the progress line changes every half second: its layout stays its own, not the page's */
                      "#live-progress{display:inline-block;width:34em;height:1.3em;overflow:hidden;vertical-align:bottom;"
                      "contain:strict}\n</style>\n</head>\n<body>\n<h1>");
    ag__text_xml(&t, name, 0);
    ag__text_puts(&t, "</h1>\n<div id=\"live\"></div>\n<div id=\"app\"></div>\n"
                      "<script type=\"application/json\" id=\"data\">\n");
    ag__explorer_put_json(&t, data_json);
    ag__text_puts(&t, "\n</script>\n<script type=\"application/json\" id=\"live-program\">{\"name\": ");
    put_json_string(&t, prog->name);
    ag__text_puts(&t, ", \"file\": ");
    if (prog->file_name) put_json_string(&t, prog->file_name);
    else ag__text_puts(&t, "null");
    ag__text_puts(&t, ", \"args\": [");
    for (int i = 0; prog->args[i]; i++) {
        if (i) ag__text_puts(&t, ", ");
        put_json_string(&t, prog->args[i]);
    }
    ag__text_puts(&t, "], \"input\": ");
    if (prog->input) put_json_string(&t, prog->input);
    else ag__text_puts(&t, "null");
    ag__text_printf(&t, ", \"wasm_bytes\": %zu, \"file_bytes\": %zu}</script>\n", prog->wasm_len,
                    prog->file_name ? prog->file_len : 0);
    ag__text_puts(&t, "<script type=\"application/octet-stream\" id=\"live-wasm\">\n");
    put_base64(&t, prog->wasm, prog->wasm_len);
    ag__text_puts(&t, "</script>\n<script type=\"application/octet-stream\" id=\"live-file\">\n");
    if (prog->file_name) put_base64(&t, prog->file, prog->file_len);
    ag__text_printf(&t, "</script>\n<script>\n%s\n%s\n%s</script>\n<script id=\"live-wasi\">\n%s</script>\n<script>\n%s%s"
                        "</script>\n</body>\n</html>\n",
                    ag__explorer_draw_js, ag__explorer_js, glance ? ag__overview_js : "", ag__live_wasi_js, ag__sampling_js, ag__live_js);
    st = ag__text_save(&t, "live page", path, err, errlen);
    ag__text_free(&t);
    return st;
}
