/* tests/test_live_html.c: ag_html_live (src/viz/live.c), the live page
 * writer; what a browser computes in the pages is tests/live/'s.
 *   - the page holds the caller's JSON as ag_html_explorer does, the module
 *     and the file as base64 that decodes to their bytes, the program's
 *     name, arguments and input and the file's name as JSON (quotes and '<'
 *     escaped), both scripts inline,
 *     a Content-Security-Policy that adds only 'wasm-unsafe-eval', and no
 *     URL;
 *   - a program without a name, a module or arguments, a file name with a
 *     '/', text that is not UTF-8 and bad data are refused with a message,
 *     and nothing is written. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tmpdir.h"

static char *dir;

static void make_dir(void) { dir = make_tmpdir("live"); }
static void remove_dir(void) { rm_dir(dir); }

TestSuite(live_html, .init = make_dir, .fini = remove_dir);

/* The bytes of the base64 block after `after` in s (newlines skipped);
 * their count in *n, or -1 at a character outside the alphabet. */
static unsigned char *decode_after(const char *s, const char *after, long *n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strstr(s, after);
    cr_assert(p, "no '%s'", after);
    p += strlen(after);
    unsigned char *out = malloc(strlen(p));
    unsigned v = 0;
    int bits = 0;
    *n = 0;
    for (; *p && *p != '<'; p++) {
        if (*p == '\n' || *p == '=') continue;
        const char *c = strchr(A, *p);
        if (!c) {
            *n = -1;
            return out;
        }
        v = v << 6 | (unsigned)(c - A), bits += 6;
        if (bits >= 8) bits -= 8, out[(*n)++] = (unsigned char)(v >> bits & 255);
    }
    return out;
}

Test(live_html, holds_the_module_and_the_file)
{
    char *path = join(dir, "p.html"), err[256];
    unsigned char wasm[100], file[301];
    memcpy(wasm, "\0asm\1\0\0\0", 8);
    for (int i = 8; i < 100; i++) wasm[i] = (unsigned char)(i * 37);
    for (int i = 0; i < 301; i++) file[i] = (unsigned char)(255 - i);
    const char *const args[] = {"run", "--json", "-", "{input}", NULL};
    ag_live_program prog = {"tr<anslate", wasm, sizeof wasm, "model.safetensors", file, sizeof file, args, "i \"lost\""};
    const char *json = "{\"kind\": \"backward\", \"panels\": [], \"note\": \"</script>\"}";
    cr_assert_eq(ag_html_live(path, "a <title>", json, &prog, err, sizeof err), AG_OK, "%s", err);
    char *s = read_file(path, NULL);
    cr_assert(strstr(s, "{\"kind\": \"backward\", \"panels\": [], \"note\": \"\\u003c/script>\"}"), "the JSON");
    cr_assert(strstr(s, "<script type=\"application/json\" id=\"live-program\">{\"name\": \"tr\\u003canslate\", "
                        "\"file\": \"model.safetensors\", \"args\": [\"run\", \"--json\", \"-\", \"{input}\"], "
                        "\"input\": \"i \\\"lost\\\"\", \"wasm_bytes\": 100, \"file_bytes\": 301}</script>"));
    long n;
    unsigned char *b = decode_after(s, "id=\"live-wasm\">\n", &n);
    cr_assert(n == 100 && !memcmp(b, wasm, 100), "the module, %ld bytes back", n);
    free(b);
    b = decode_after(s, "id=\"live-file\">\n", &n);
    cr_assert(n == 301 && !memcmp(b, file, 301), "the file, %ld bytes back", n);
    free(b);
    /* nothing from outside the page; the worker that runs a long program
     * is made from the page's own script (a blob) */
    cr_assert(strstr(s, "content=\"default-src 'none'; script-src 'unsafe-inline' 'wasm-unsafe-eval'; "
                        "style-src 'unsafe-inline'; worker-src blob:\""));
    cr_assert(strstr(s, "const data = JSON.parse("), "the explorer's script");
    cr_assert(strstr(s, "new WebAssembly.Module(bytesOf(\"live-wasm\"))"), "the live script");
    cr_assert_eq(strstr(s, "http:"), NULL);
    cr_assert_eq(strstr(s, "https:"), NULL);
    cr_assert_eq(strstr(s, " src="), NULL, "nothing loaded from a file");
    free(s);
    free(path);
}

static void refused(const ag_live_program *prog, const char *json, const char *why)
{
    char *path = join(dir, "bad.html"), err[256] = "";
    cr_assert_eq(ag_html_live(path, NULL, json, prog, err, sizeof err), AG_ERR_ARG, "accepted (%s)", why);
    cr_assert(strstr(err, why), "message '%s' lacks '%s'", err, why);
    cr_assert_eq(count_entries(dir, NULL, 0), 0, "a file was written");
    free(path);
}

Test(live_html, refuses_a_bad_program_or_data)
{
    const unsigned char wasm[8] = {0, 'a', 's', 'm', 1, 0, 0, 0}, elf[8] = {0x7f, 'E', 'L', 'F'};
    const char *json = "{\"kind\": \"backward\", \"panels\": []}";
    const char *const args[] = {"--json", "-", NULL}, *const latin1[] = {"caf\xe9", NULL};
    refused(&(ag_live_program){NULL, wasm, 8, NULL, NULL, 0, args, NULL}, json, "a name and a WebAssembly module");
    refused(&(ag_live_program){"p", elf, 8, NULL, NULL, 0, args, NULL}, json, "a name and a WebAssembly module");
    refused(&(ag_live_program){"p", wasm, 4, NULL, NULL, 0, args, NULL}, json, "a name and a WebAssembly module");
    refused(&(ag_live_program){"p", wasm, 8, "a/b", wasm, 8, args, NULL}, json, "a plain name");
    refused(&(ag_live_program){"p", wasm, 8, "m", NULL, 0, args, NULL}, json, "a plain name and bytes");
    refused(&(ag_live_program){"p", wasm, 8, NULL, NULL, 0, NULL, NULL}, json, "arguments are NULL");
    refused(&(ag_live_program){"p", wasm, 8, NULL, NULL, 0, latin1, NULL}, json, "arguments: not UTF-8");
    refused(&(ag_live_program){"p", wasm, 8, NULL, NULL, 0, args, "caf\xe9"}, json, "input: not UTF-8");
    refused(&(ag_live_program){"p", wasm, 8, NULL, NULL, 0, args, NULL}, "{\"kind\": \"other\"}", "\"kind\"");
    char err[256];
    cr_assert_eq(ag_html_live("x.html", NULL, json, NULL, err, sizeof err), AG_ERR_ARG);
    cr_assert(strstr(err, "the program is NULL"), "%s", err);
}
