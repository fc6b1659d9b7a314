/* tests/test_explorer_html.c: ag_html_explorer (src/viz/html.c), the page
 * writer; what a browser shows of the pages is tests/explorer/'s.
 *   - the page holds the caller's JSON as it is, each '<' as \u003c (a
 *     token "</script>" cannot end the data block), the script and the
 *     style inline, a Content-Security-Policy allowing nothing outside, and
 *     no URL;
 *   - data that is not JSON, not UTF-8, or not an object of a known "kind"
 *     is refused with a message naming the file, and nothing is written. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tmpdir.h"

static char *dir;

static void make_dir(void) { dir = make_tmpdir("explorer"); }
static void remove_dir(void) { rm_dir(dir); }

TestSuite(explorer_html, .init = make_dir, .fini = remove_dir);

Test(explorer_html, keeps_the_json_and_loads_nothing)
{
    char *path = join(dir, "p.html"), err[256];
    const char *json = "{\"kind\": \"training\", \"x_label\": \"epoch\", \"series\": "
                       "[{\"name\": \"</script><b>\", \"group\": \"loss\", \"y\": [1.5, 0.25]}]}";
    cr_assert_eq(ag_html_explorer(path, "a <title>", json, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert(strstr(s, "{\"kind\": \"training\", \"x_label\": \"epoch\", \"series\": [{\"name\": "
                        "\"\\u003c/script>\\u003cb>\", \"group\": \"loss\", \"y\": [1.5, 0.25]}]}"),
              "the JSON, '<' escaped");
    cr_assert_eq(strstr(s, "</script><b>"), NULL);
    cr_assert(strstr(s, "<title>a &lt;title&gt;</title>"));
    cr_assert(strstr(s, "<script type=\"application/json\" id=\"data\">"));
    cr_assert(strstr(s, "content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'\""));
    cr_assert(strstr(s, "JSON.parse(document.getElementById(\"data\").textContent)"), "the script is inline");
    cr_assert_eq(strstr(s, "http:"), NULL);
    cr_assert_eq(strstr(s, "https:"), NULL);
    cr_assert_eq(strstr(s, " src="), NULL, "nothing loaded from a file");
    free(s);
    free(path);
}

static void refused(const char *json, const char *why)
{
    char *path = join(dir, "bad.html"), err[256] = "";
    cr_assert_eq(ag_html_explorer(path, NULL, json, err, sizeof err), AG_ERR_ARG, "%s accepted", json);
    cr_assert(strstr(err, "bad.html") && strstr(err, why), "message '%s' lacks '%s'", err, why);
    cr_assert_eq(count_entries(dir, NULL, 0), 0, "a file was written");
    free(path);
}

Test(explorer_html, refuses_bad_data)
{
    refused("{\"kind\": \"training\",}", "not JSON");
    refused("{\"kind\": \"attention\"", "not JSON");
    refused("{\"kind\": \"\xff\"}", "not UTF-8 at byte 10");
    refused("{\"kind\": \"pictures\"}", "\"kind\"");
    refused("[1, 2]", "\"kind\"");
    refused("{\"kind\": 3}", "\"kind\"");
    char err[256];
    cr_assert_eq(ag_html_explorer(NULL, NULL, "{}", err, sizeof err), AG_ERR_ARG);
    cr_assert_eq(ag_html_explorer("x.html", NULL, NULL, err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "data is NULL"), "%s", err);
}
