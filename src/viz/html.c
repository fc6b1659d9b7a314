/* html.c: the explorer page, one self-contained HTML file: the style, the
 * caller's numbers as JSON, and the scripts that draw them (the drawing
 * functions of explorer_draw_js.c, the page of explorer_js.c).
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
    ".note,.file{color:#555;margin:2px 0;max-width:980px}.formula{font-family:monospace;margin:2px 0}\n"
    ".row{display:flex;gap:24px;align-items:flex-start}\n"
    ".row>.heatwrap{flex:0 1 auto;min-width:0}.row>table{flex:none}\n"
    "table{border-collapse:collapse}td,th{padding:2px 5px;font-size:12px}\n"
    ".heatwrap{overflow:auto;max-width:100%;max-height:72vh;width:max-content;border:1px solid #eee}\n"
    "table.heat td{width:var(--cell);min-width:var(--cell);height:calc(var(--cell) * 0.75);padding:0;text-align:center;\n"
    "border:1px solid #fff;font-size:11px}\n"
    "table.heat.small td{height:var(--cell);border:0;font-size:0}\n"
    "table.heat th{position:sticky;background:#fff;font-weight:normal;z-index:1}\n"
    "table.heat thead th{top:0;vertical-align:bottom}table.heat th.rowlab,table.heat th.corner{left:0;text-align:right}\n"
    "table.heat th.corner{z-index:2;font-size:10px;color:#777;text-align:left}\n"
    "th.corner span{display:block;white-space:nowrap}\n"
    "table.heat th.col{padding:2px 0}th.col span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}\n"
    "table.heat.small th.col span,table.heat.small th.rowlab,table.heat.small th.corner{font-size:9px}\n"
    "table.heat td.after,table.heat th.after{width:auto;text-align:left;color:#555;padding:0 6px;white-space:nowrap}\n"
    "table.heat.small td.after{font-size:12px;height:auto}\n"
    "p.said{font-size:15px;margin:4px 0 10px}p.said span{white-space:pre-wrap;font-family:monospace}"
    "p.said mark{background:#fff3c4;outline:1px solid #d9b000}\n"
    "table.heat tr.sel th.rowlab{background:#fff3c4;outline:2px solid #d62728}table.heat tr.sel td{outline:1px solid #d62728}\n"
    "table.heat tr[data-pick-token]{cursor:pointer}\n"
    "table.nums td{text-align:right;font-family:monospace;border:1px solid #eee}table.nums th{text-align:left}\n"
    "td.masked,tr.masked td,.swatch.masked{background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 3px,#bbb 3px,#bbb 5px)!important;\n"
    "color:#666!important;text-align:center}\n"
    ".swatch{display:inline-block;width:14px;height:14px;vertical-align:middle;border:1px solid #999}\n"
    ".legend{display:flex;align-items:center;gap:6px;font-size:12px;margin:6px 0;color:#333}\n"
    ".legend-bar{display:inline-block;width:180px;height:12px;border:1px solid #999}.legend-mid{color:#777}\n"
    ".legend-label{font-weight:bold}\n"
    "tr.k th,tr.q th{color:#555;font-weight:normal}tr.prod th{font-weight:bold}\n"
    ".panels{display:flex;flex-wrap:wrap;gap:18px}.panel{border:1px solid #ddd;padding:8px;border-radius:4px;max-width:100%}\n"
    ".panels.heads .panel{cursor:pointer;padding:4px}.check{font-size:12px}\n"
    ".panel.sel{border-color:#d62728}.check.ok{color:#2a7d2a}.check.bad{color:#c00;font-weight:bold}\n"
    ".group{margin:8px 0 16px}\n"
    ".bars{display:flex;gap:4px 14px}.bar-item{display:flex;align-items:center;gap:4px;font-family:monospace}\n"
    ".bar-label{display:inline-block;min-width:2ch;text-align:right}.bar{display:inline-block;height:11px}\n"
    ".panel .note{max-width:340px}\n"
    ".bar-item.hit .bar-label{font-weight:bold;text-decoration:underline}\n"
    "table.output td,table.output th{vertical-align:middle;white-space:nowrap}\n"
    "svg.chart{display:block;margin:10px 0}svg.chart text{font-size:11px}svg.chart .title{font-size:13px;font-weight:bold}\n"
    "table.nums tr.sel td,table.nums tr.sel th{background:#fff3c4}\n";

/* A JSON object whose "kind" is one the script draws: the checked text, or
 * a message.  *attention (when not NULL): 1 when the kind is "attention",
 * the pages that draw the model at a glance (overview_js.c). */
ag_status ag__explorer_check_json(const char *path, const char *json, int *attention, char *err, size_t errlen)
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
    if (attention) *attention = kind && !strcmp(kind, "attention");
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
    int glance = 0;
    ag_status st = ag__explorer_check_json(path, data_json, &glance, err, errlen);
    if (st != AG_OK) return st;
    ag__text t = {0};
    ag__text_puts(&t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                      "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n<title>");
    ag__text_xml(&t, title ? title : "attograd explorer", 0);
    ag__text_printf(&t, "</title>\n<style>\n%s%s</style>\n</head>\n<body>\n<h1>", ag__explorer_css,
                    glance ? ag__overview_css : "");
    ag__text_xml(&t, title ? title : "attograd explorer", 0);
    ag__text_puts(&t, "</h1>\n<div id=\"app\"></div>\n<script type=\"application/json\" id=\"data\">\n");
    ag__explorer_put_json(&t, data_json);
    ag__text_printf(&t, "\n</script>\n<script>\n%s\n%s\n%s</script>\n</body>\n</html>\n", ag__explorer_draw_js,
                    ag__explorer_js, glance ? ag__overview_js : "");
    st = ag__text_save(&t, "explorer", path, err, errlen);
    ag__text_free(&t);
    return st;
}
