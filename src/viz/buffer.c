/* buffer.c: the text plumbing the picture writers share (viz.h): a growing
 * buffer whose out-of-memory is sticky, caller text checked for UTF-8 and
 * escaped for XML or DOT, and saving through the crash-safe writer.
 *
 * Invariant: caller text reaches a picture only through put_safe, so a
 * token such as `<unk>` or `l'homme`, or bytes that are not UTF-8, cannot
 * break the XML or the DOT syntax. */
#include "viz/viz.h"

#include <stdio.h>

/* ---- the text buffer ------------------------------------------------------ */

/* Room for `extra` more bytes and a NUL; false (sticky) when out of memory. */
static int reserve(ag__text *t, size_t extra)
{
    if (t->nomem) return 0;
    if (t->len + extra + 1 <= t->cap) return 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            t->nomem = 1;
            return 0;
        }
        cap *= 2;
    }
    char *s = ag__malloc(cap);
    if (!s) {
        t->nomem = 1;
        return 0;
    }
    if (t->len) memcpy(s, t->s, t->len);
    s[t->len] = '\0';
    ag__free(t->s);
    t->s = s;
    t->cap = cap;
    return 1;
}

static void put_bytes(ag__text *t, const char *s, size_t n)
{
    if (!reserve(t, n)) return;
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void ag__text_puts(ag__text *t, const char *s)
{
    if (s) put_bytes(t, s, strlen(s));
}

void ag__text_printf(ag__text *t, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n >= 0 && reserve(t, (size_t)n)) {
        vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap2);
        t->len += (size_t)n;
    }
    va_end(ap2);
}

void ag__text_free(ag__text *t)
{
    ag__free(t->s);
    *t = (ag__text){0};
}

/* ---- caller text: UTF-8 checked, escaped ------------------------------------ */

/* Length (1..4) of the well-formed UTF-8 character at p, or 0 when the bytes
 * there are not one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, or U+FFFE / U+FFFF, which XML forbids).  p is
 * NUL-terminated, and each byte is checked before the next is read. */
static int utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else
        return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    if (n == 3 && c == 0xEF && p[1] == 0xBF && p[2] >= 0xBE) return 0;
    return n;
}

static int count_chars(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
        int k = utf8_len(p);
        p += k ? k : 1;
    }
    return n;
}

int ag__text_chars(const char *s, int max_chars)
{
    if (!s) return 0;
    int n = count_chars(s);
    return max_chars > 0 && n > max_chars ? max_chars : n;
}

enum { ESC_XML, ESC_DOT };

static void put_safe(ag__text *t, const char *s, int max_chars, int mode)
{
    if (!s) return;
    int total = count_chars(s);
    int truncated = max_chars > 0 && total > max_chars;
    int keep = truncated ? max_chars - 1 : total;
    const unsigned char *p = (const unsigned char *)s;
    for (int i = 0; i < keep; i++) {
        int k = utf8_len(p);
        if (k == 0 || (k == 1 && (*p < 0x20 || *p == 0x7f))) {
            ag__text_puts(t, "?");
            p++;
            continue;
        }
        if (k > 1) {
            put_bytes(t, (const char *)p, (size_t)k);
        } else if (mode == ESC_XML) {
            switch (*p) {
            case '&': ag__text_puts(t, "&amp;"); break;
            case '<': ag__text_puts(t, "&lt;"); break;
            case '>': ag__text_puts(t, "&gt;"); break;
            case '"': ag__text_puts(t, "&quot;"); break;
            case '\'': ag__text_puts(t, "&apos;"); break;
            default: put_bytes(t, (const char *)p, 1);
            }
        } else {
            if (*p == '"' || *p == '\\') ag__text_puts(t, "\\");
            put_bytes(t, (const char *)p, 1);
        }
        p += k;
    }
    if (truncated) ag__text_puts(t, "\xe2\x80\xa6"); /* U+2026 ... */
}

void ag__text_xml(ag__text *t, const char *s, int max_chars) { put_safe(t, s, max_chars, ESC_XML); }
void ag__text_dot(ag__text *t, const char *s, int max_chars) { put_safe(t, s, max_chars, ESC_DOT); }

/* ---- saving crash-safely ----------------------------------------------------- */

ag_status ag__text_save(const ag__text *t, const char *what, const char *path, char *err, size_t errlen)
{
    if (t->nomem) return ag__errf(err, errlen, AG_ERR_NOMEM, "%s: out of memory making '%s'", what, path);
    ag__bytes all = {t->s, t->len};
    return ag__file_save(what, path, &all, 1, err, errlen);
}

