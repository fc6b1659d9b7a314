/* json.c: a strict, iterative JSON parser into a flat node array.
 *
 * Grammar (RFC 8259): value = object | array | string | number | true |
 * false | null, with whitespace (space, tab, LF, CR) around tokens; nothing
 * else is accepted (no comments, no trailing commas, no single quotes, no
 * leading zeros, no NaN).
 *
 * Invariants: the parse never recurses (open containers sit on an explicit
 * stack bounded by AG__JSON_MAX_DEPTH); every decoded string is no longer
 * than its source text, so one pool of len + 1 bytes holds them all. */
#include "io/json.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attograd_core.h"
#include "core/alloc.h"

typedef struct parser {
    const char *s;
    size_t len, at;
    ag__json *j;
    char *err;
    size_t errlen;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static ag_status fail(parser *p, size_t at, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "at byte %zu: ", at);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            ag__verrf(p->err + n, p->errlen - (size_t)n, AG_ERR_FORMAT, fmt, ap);
            va_end(ap);
        }
    }
    return AG_ERR_FORMAT;
}

static ag_status nomem(parser *p)
{
    ag__errf(p->err, p->errlen, AG_ERR_NOMEM, "out of memory");
    return AG_ERR_NOMEM; /* a constant: callers' flow analysis sees it is not AG_OK */
}

/* A printable rendering of the byte at p->at, for "unexpected 'x'". */
static const char *show_byte(const parser *p, char buf[16])
{
    if (p->at >= p->len) return "end of input";
    unsigned char c = (unsigned char)p->s[p->at];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
    else snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static void skip_ws(parser *p)
{
    while (p->at < p->len) {
        char c = p->s[p->at];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->at++;
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Append a node of type t; its index in *idx. */
static ag_status new_node(parser *p, int t, uint32_t *idx)
{
    ag__json *j = p->j;
    if (j->count == j->cap) {
        if (j->cap > UINT32_MAX / 2) return nomem(p);
        uint32_t cap = j->cap ? 2 * j->cap : 64;
        ag__json_node *n = ag__malloc((size_t)cap * sizeof *n);
        if (!n) return nomem(p);
        if (j->count) memcpy(n, j->nodes, (size_t)j->count * sizeof *n);
        ag__free(j->nodes);
        j->nodes = n;
        j->cap = cap;
    }
    ag__json_node *n = &j->nodes[j->count];
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)t;
    *idx = j->count++;
    return AG_OK;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static void put_utf8(ag__json *j, unsigned cp)
{
    char *o = j->pool + j->pool_len;
    if (cp < 0x80) {
        o[0] = (char)cp;
        j->pool_len += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        j->pool_len += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        j->pool_len += 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        j->pool_len += 4;
    }
}

/* The string starting at the '"' at p->at, decoded into the pool. */
static ag_status parse_string(parser *p, uint32_t *off, uint32_t *slen)
{
    ag__json *j = p->j;
    size_t open = p->at;
    p->at++; /* the opening quote */
    *off = j->pool_len;
    for (;;) {
        if (p->at >= p->len) return fail(p, open, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->at];
        if (c == '"') {
            p->at++;
            break;
        }
        if (c < 0x20) return fail(p, p->at, "control character 0x%02x in a string (must be escaped)", c);
        if (c != '\\') {
            j->pool[j->pool_len++] = (char)c;
            p->at++;
            continue;
        }
        size_t esc = p->at;
        if (p->at + 1 >= p->len) return fail(p, open, "unterminated string");
        char e = p->s[p->at + 1];
        p->at += 2;
        switch (e) {
        case '"': j->pool[j->pool_len++] = '"'; break;
        case '\\': j->pool[j->pool_len++] = '\\'; break;
        case '/': j->pool[j->pool_len++] = '/'; break;
        case 'b': j->pool[j->pool_len++] = '\b'; break;
        case 'f': j->pool[j->pool_len++] = '\f'; break;
        case 'n': j->pool[j->pool_len++] = '\n'; break;
        case 'r': j->pool[j->pool_len++] = '\r'; break;
        case 't': j->pool[j->pool_len++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (p->len - p->at < 4 || !hex4(p->s + p->at, &cp))
                return fail(p, esc, "\\u must be followed by 4 hex digits");
            p->at += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(p, esc, "lone low surrogate \\u%04X", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                /* a high surrogate must be followed by \u and a low one */
                if (p->len - p->at < 6 || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u' ||
                    !hex4(p->s + p->at + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, esc, "lone high surrogate \\u%04X (no low surrogate after it)", cp);
                p->at += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(j, cp);
            break;
        }
        default:
            if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                return fail(p, esc, "invalid escape '\\%c' in a string", e);
            return fail(p, esc, "invalid escape (backslash then byte 0x%02x) in a string",
                        (unsigned char)e);
        }
    }
    /* each source byte gives at most one pool byte and the quotes give
     * none, so the pool of len + 1 bytes always has room for the NUL */
    assert(j->pool_len < p->len + 1);
    *slen = j->pool_len - *off;
    j->pool[j->pool_len++] = '\0';
    return AG_OK;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at p->at, into node n. */
static ag_status parse_number(parser *p, uint32_t idx)
{
    size_t start = p->at;
    ag__json_node n = p->j->nodes[idx];
    n.is_int = 1;
    if (p->s[p->at] == '-') {
        n.neg = 1;
        p->at++;
    }
    if (p->at >= p->len || !is_digit(p->s[p->at]))
        return fail(p, start, "invalid number: a digit must follow '-'");
    if (p->s[p->at] == '0') {
        p->at++;
        if (p->at < p->len && is_digit(p->s[p->at]))
            return fail(p, start, "invalid number: leading zero");
    } else {
        while (p->at < p->len && is_digit(p->s[p->at])) {
            uint64_t d = (uint64_t)(p->s[p->at] - '0');
            if (n.u > (UINT64_MAX - d) / 10) n.overflow = 1;
            else n.u = n.u * 10 + d;
            p->at++;
        }
    }
    if (p->at < p->len && p->s[p->at] == '.') {
        n.is_int = 0;
        p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, start, "invalid number: a digit must follow '.'");
        while (p->at < p->len && is_digit(p->s[p->at])) p->at++;
    }
    if (p->at < p->len && (p->s[p->at] == 'e' || p->s[p->at] == 'E')) {
        n.is_int = 0;
        p->at++;
        if (p->at < p->len && (p->s[p->at] == '+' || p->s[p->at] == '-')) p->at++;
        if (p->at >= p->len || !is_digit(p->s[p->at]))
            return fail(p, start, "invalid number: a digit must follow the exponent");
        while (p->at < p->len && is_digit(p->s[p->at])) p->at++;
    }
    n.str = (uint32_t)start;
    n.str_len = (uint32_t)(p->at - start);
    p->j->nodes[idx] = n;
    return AG_OK;
}

/* The key of an object member: '"'...'"' ws ':' ws, at p->at. */
static ag_status parse_key(parser *p, uint32_t *off, uint32_t *klen)
{
    char b[16];
    skip_ws(p);
    if (p->at >= p->len || p->s[p->at] != '"')
        return fail(p, p->at, "expected a string key in an object, found %s", show_byte(p, b));
    ag_status st = parse_string(p, off, klen);
    if (st) return st;
    skip_ws(p);
    if (p->at >= p->len || p->s[p->at] != ':')
        return fail(p, p->at, "expected ':' after an object key, found %s", show_byte(p, b));
    p->at++;
    return AG_OK;
}

typedef struct frame {
    uint32_t node, last; /* the open container and its latest child */
} frame;

/* The type of the value that starts at p->at (whitespace skipped). */
static ag_status value_type(parser *p, int *type)
{
    char b[16];
    skip_ws(p);
    if (p->at >= p->len) return fail(p, p->at, "unexpected end of input, expected a value");
    char c = p->s[p->at];
    switch (c) {
    case '{': *type = AG__JSON_OBJECT; break;
    case '[': *type = AG__JSON_ARRAY; break;
    case '"': *type = AG__JSON_STRING; break;
    case 't': *type = AG__JSON_TRUE; break;
    case 'f': *type = AG__JSON_FALSE; break;
    case 'n': *type = AG__JSON_NULL; break;
    default:
        if (c == '-' || is_digit(c)) *type = AG__JSON_NUMBER;
        else return fail(p, p->at, "unexpected %s, expected a value", show_byte(p, b));
    }
    return AG_OK;
}

/* Node idx becomes the last child of the open container f (under key, in
 * an object). */
static void link_child(parser *p, frame *f, uint32_t idx, uint32_t key, uint32_t key_len)
{
    ag__json_node *parent = &p->j->nodes[f->node];
    if (parent->count == 0) parent->first = idx;
    else p->j->nodes[f->last].next = idx;
    parent->count++;
    f->last = idx;
    if (parent->type == AG__JSON_OBJECT) {
        p->j->nodes[idx].key = key;
        p->j->nodes[idx].key_len = key_len;
    }
}

/* A string, number or literal of the given type into node idx. */
static ag_status parse_scalar(parser *p, int type, uint32_t idx)
{
    ag_status st;
    if (type == AG__JSON_STRING) {
        uint32_t off, slen;
        if ((st = parse_string(p, &off, &slen))) return st;
        p->j->nodes[idx].str = off;
        p->j->nodes[idx].str_len = slen;
        return AG_OK;
    }
    if (type == AG__JSON_NUMBER) return parse_number(p, idx);
    const char *word = type == AG__JSON_TRUE ? "true" : type == AG__JSON_FALSE ? "false" : "null";
    size_t wl = strlen(word);
    if (p->len - p->at < wl || memcmp(p->s + p->at, word, wl) != 0)
        return fail(p, p->at, "invalid literal (expected '%s')", word);
    p->at += wl;
    return AG_OK;
}

static ag_status parse(parser *p)
{
    frame stack[AG__JSON_MAX_DEPTH];
    int depth = 0;
    uint32_t key = 0, key_len = 0; /* the key of the next value, in an object */
    char b[16];
    ag_status st;

    for (;;) {
        /* ---- one value ---- */
        int type = 0;
        uint32_t idx = 0;
        if ((st = value_type(p, &type)) || (st = new_node(p, type, &idx))) return st;
        if (depth > 0) link_child(p, &stack[depth - 1], idx, key, key_len);
        if (type == AG__JSON_OBJECT || type == AG__JSON_ARRAY) {
            if (depth == AG__JSON_MAX_DEPTH)
                return fail(p, p->at, "nesting deeper than %d arrays/objects", AG__JSON_MAX_DEPTH);
            stack[depth++] = (frame){idx, 0};
            p->at++;
            skip_ws(p);
            char close = type == AG__JSON_OBJECT ? '}' : ']';
            if (p->at < p->len && p->s[p->at] == close) {
                p->at++;
                depth--;
            } else {
                if (type == AG__JSON_OBJECT && (st = parse_key(p, &key, &key_len))) return st;
                continue; /* its first value */
            }
        } else if ((st = parse_scalar(p, type, idx))) {
            return st;
        }

        /* ---- after a value: ',' for the next one, or close containers ---- */
        for (;;) {
            skip_ws(p);
            if (depth == 0) {
                if (p->at != p->len)
                    return fail(p, p->at, "unexpected %s after the top-level value", show_byte(p, b));
                return AG_OK;
            }
            int is_obj = p->j->nodes[stack[depth - 1].node].type == AG__JSON_OBJECT;
            char close = is_obj ? '}' : ']';
            if (p->at >= p->len)
                return fail(p, p->at, "unexpected end of input inside an %s", is_obj ? "object" : "array");
            if (p->s[p->at] == close) {
                p->at++;
                depth--;
                continue;
            }
            if (p->s[p->at] != ',')
                return fail(p, p->at, "expected ',' or '%c' in an %s, found %s", close,
                            is_obj ? "object" : "array", show_byte(p, b));
            p->at++;
            if (is_obj && (st = parse_key(p, &key, &key_len))) return st;
            break; /* the next value */
        }
    }
}

ag_status ag__json_parse(const char *text, size_t len, ag__json *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    parser p = {text, len, 0, out, err, errlen};
    if (len > UINT32_MAX - 8) return fail(&p, 0, "input of %zu bytes is too long", len);
    out->pool = ag__malloc(len + 1);
    if (!out->pool) return nomem(&p);
    ag_status st = parse(&p);
    if (st) ag__json_free(out);
    return st;
}

void ag__json_free(ag__json *j)
{
    if (!j) return;
    ag__free(j->nodes);
    ag__free(j->pool);
    memset(j, 0, sizeof *j);
}

size_t ag__utf8_check(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        /* n continuation bytes; the first must lie in [lo, hi] (this is
         * what excludes overlong forms, surrogates and > U+10FFFF) */
        int n;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) n = 1;
        else if (c == 0xE0) n = 2, lo = 0xA0;
        else if (c == 0xED) n = 2, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) n = 2;
        else if (c == 0xF0) n = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) n = 3;
        else if (c == 0xF4) n = 3, hi = 0x8F;
        else return i;
        if (len - i <= (size_t)n) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (int k = 2; k <= n; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += (size_t)n + 1;
    }
    return len;
}
