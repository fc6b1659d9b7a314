/* html.c: the explorer page, one self-contained HTML file: the style, the
 * caller's numbers as JSON, and the script that draws them
 * (explorer_js.c).
 *
 * Invariant: the page loads nothing.  Its Content-Security-Policy allows
 * inline script and style only (no fetch, no image, no font from anywhere),
 * and nothing in it names another file, so it works from file:// on a
 * machine without network.  The JSON is checked (strict, UTF-8) before it
 * is written, and each '<' in it becomes \u003c (the same JSON string), so
 * that no "</script>" inside a token can end the data block. */
#include "viz/viz.h"
#include "io/json.h"

const char ag__explorer_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}\n"
    "h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:12px 0 4px}h3{font-size:14px;margin:14px 0 4px}\n"
    ".controls label{margin-right:14px}.controls select{font:inherit}\n"
    ".note,.file{color:#555;margin:2px 0}.formula{font-family:monospace;margin:2px 0}\n"
    ".row{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}\n"
    "table{border-collapse:collapse}td,th{padding:2px 5px;font-size:12px}\n"
    "table.heat td{width:34px;height:26px;text-align:center;border:1px solid #fff}\n"
    "table.heat tr.sel th,table.heat tr.sel td{outline:2px solid #d62728}\n"
    "table.heat tr[data-pick-token]{cursor:pointer}th.col{writing-mode:vertical-rl;transform:rotate(180deg);"
    "font-weight:normal}\n"
    "th.rowlab{text-align:right;font-weight:normal}\n"
    "table.nums td{text-align:right;font-family:monospace;border:1px solid #eee}table.nums th{text-align:left}\n"
    "td.masked,tr.masked td{background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 4px,#ddd 4px,#ddd 6px);"
    "color:#888;text-align:center}\n"
    "tr.k th,tr.q th{color:#555;font-weight:normal}tr.prod th{font-weight:bold}\n"
    ".panels{display:flex;flex-wrap:wrap;gap:18px}.panel{border:1px solid #ddd;padding:8px;border-radius:4px;"
    "max-width:300px}\n.check{font-size:12px}\n"
    ".panel.sel{border-color:#d62728}.check.ok{color:#2a7d2a}.check.bad{color:#c00;font-weight:bold}\n"
    "svg.chart{display:block;margin:10px 0}svg.chart text{font-size:11px}svg.chart .title{font-size:13px;"
    "font-weight:bold}\n"
    "tr.sel td,tr.sel th{background:#fff3c4}\n";

/* A JSON object whose "kind" is one the script draws: the checked text, or
 * a message. */
ag_status ag__explorer_check_json(const char *path, const char *json, char *err, size_t errlen)
{
    size_t n = strlen(json), bad = ag__utf8_check((const unsigned char *)json, n);
    if (bad < n)
        return ag__errf(err, errlen, AG_ERR_ARG, "explorer: %s: the data is not UTF-8 at byte %zu", path, bad);
    ag__json j;
    char why[256];
    if (ag__json_parse(json, n, &j, why, sizeof why) != AG_OK)
        return ag__errf(err, errlen, AG_ERR_ARG, "explorer: %s: the data is not JSON: %s", path, why);
    const char *kind = NULL;
    if (j.nodes[0].type == AG__JSON_OBJECT)
        for (uint32_t c = j.nodes[0].first; c; c = j.nodes[c].next)
            if (!strcmp(j.pool + j.nodes[c].key, "kind") && j.nodes[c].type == AG__JSON_STRING)
                kind = j.pool + j.nodes[c].str;
    int known = kind && (!strcmp(kind, "attention") || !strcmp(kind, "backward") || !strcmp(kind, "training"));
    ag__json_free(&j);
    if (!known)
        return ag__errf(err, errlen, AG_ERR_ARG,
                        "explorer: %s: the data must be an object whose \"kind\" is \"attention\", \"backward\" "
                        "or \"training\"",
                        path);
    return AG_OK;
}

/* json with each '<' as \u003c (only inside strings in valid JSON) */
void ag__explorer_put_json(ag__text *t, const char *json)
{
    for (const char *p = json; *p;) {
        size_t run = strcspn(p, "<"), k = run < (1u << 30) ? run : (1u << 30);
        if (k) ag__text_printf(t, "%.*s", (int)k, p), p += k;
        else ag__text_puts(t, "\\u003c"), p++;
    }
}

ag_status ag_html_explorer(const char *path, const char *title, const char *data_json, char *err, size_t errlen)
{
    if (!path || !data_json)
        return ag__errf(err, errlen, AG_ERR_ARG, "explorer: %s is NULL", path ? "the data" : "the path");
    ag_status st = ag__explorer_check_json(path, data_json, err, errlen);
    if (st != AG_OK) return st;
    ag__text t = {0};
    ag__text_puts(&t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                      "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n<title>");
    ag__text_xml(&t, title ? title : "attograd explorer", 0);
    ag__text_printf(&t, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", ag__explorer_css);
    ag__text_xml(&t, title ? title : "attograd explorer", 0);
    ag__text_puts(&t, "</h1>\n<div id=\"app\"></div>\n<script type=\"application/json\" id=\"data\">\n");
    ag__explorer_put_json(&t, data_json);
    ag__text_printf(&t, "\n</script>\n<script>\n%s</script>\n</body>\n</html>\n", ag__explorer_js);
    st = ag__text_save(&t, "explorer", path, err, errlen);
    ag__text_free(&t);
    return st;
}
