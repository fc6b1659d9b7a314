/* tests/st_corpus.h: safetensors files that must be rejected (and a few that
 * must be accepted), generated from tables.  Header-only (static), so a fuzz
 * target can seed its corpus from the same files the tests check:
 *
 *   for (size_t i = 0; i < ST_CORPUS_BAD_COUNT; i++) {
 *       size_t len;
 *       unsigned char *bytes = st_corpus_build(&st_corpus_bad[i], &len);
 *       ... write bytes[0..len) to seed_<i>; free(bytes);
 *   }
 *
 * A case is either a JSON header (text, or made by a function) followed by
 * data_len pattern bytes, with the 8-byte length field computed from it; or
 * the raw bytes of the whole file, for cases about the length field itself.
 * Each bad case names the status ag_safetensors_parse must return and a substring its
 * message must contain: one rejection per case, the messages all distinct. */
#ifndef AG_TESTS_ST_CORPUS_H
#define AG_TESTS_ST_CORPUS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

typedef struct st_corpus_case {
    const char *what;                    /* what is wrong (or right) with it */
    const char *header;                  /* JSON header text, or NULL */
    void (*make)(char *buf, size_t cap); /* or a function writing it */
    size_t data_len;                     /* data bytes after the header */
    const char *raw;                     /* or the whole file, raw_len bytes */
    size_t raw_len;
    ag_status status;                    /* expected from ag_safetensors_parse */
    const char *message;                 /* expected in the message (bad cases) */
    int count;                           /* tensors (good cases) */
} st_corpus_case;

#define ST_RAW(s) .raw = (s), .raw_len = sizeof(s) - 1
#define ST_BAD(what_, hdr_, dlen_, msg_)                                                             \
    {.what = (what_), .header = (hdr_), .data_len = (dlen_), .status = AG_ERR_FORMAT, .message = (msg_)}

/* One tensor entry "name": F32 of shape [n], at bytes [b, b + 4n). */
#define ST_F32(name, n, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[" #n "],\"data_offsets\":[" #b "," #e "]}"

/* {"a": 64 nested arrays}: one container too many with the top object. */
static void st_make_deep(char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "{\"a\":");
    for (int i = 0; i < 64 && at + 2 < cap; i++) buf[at++] = '[';
    for (int i = 0; i < 64 && at + 2 < cap; i++) buf[at++] = ']';
    snprintf(buf + at, cap - at, "}");
}

/* A tensor with `axes` axes of size 1. */
static void st_make_rank(char *buf, size_t cap, int axes)
{
    size_t at = (size_t)snprintf(buf, cap, "{\"w\":{\"dtype\":\"F32\",\"shape\":[");
    for (int i = 0; i < axes && at + 4 < cap; i++) at += (size_t)snprintf(buf + at, cap - at, i ? ",1" : "1");
    snprintf(buf + at, cap - at, "],\"data_offsets\":[0,4]}}");
}
static void st_make_rank65(char *buf, size_t cap) { st_make_rank(buf, cap, 65); }
static void st_make_rank64(char *buf, size_t cap) { st_make_rank(buf, cap, 64); }

static const st_corpus_case st_corpus_bad[] = {
    /* ---- the length field ---- */
    {.what = "empty file", ST_RAW(""), .status = AG_ERR_FORMAT,
     .message = "file is 0 bytes, shorter than the 8-byte header length"},
    {.what = "7-byte file", ST_RAW("\x02\0\0\0\0\0\0"), .status = AG_ERR_FORMAT,
     .message = "file is 7 bytes, shorter than the 8-byte header length"},
    {.what = "header length 100000001", ST_RAW("\x01\xe1\xf5\x05\0\0\0\0{}"), .status = AG_ERR_FORMAT,
     .message = "header length 100000001 exceeds the limit of 100000000 bytes"},
    {.what = "header length 2^64-1", ST_RAW("\xff\xff\xff\xff\xff\xff\xff\xff{}"), .status = AG_ERR_FORMAT,
     .message = "header length 18446744073709551615 exceeds the limit"},
    {.what = "header length past the end", ST_RAW("\x10\0\0\0\0\0\0\0{}"), .status = AG_ERR_FORMAT,
     .message = "header length 16 runs past the end of the file (2 bytes follow the length field)"},
    {.what = "header length at the limit, file short", ST_RAW("\x00\xe1\xf5\x05\0\0\0\0{}"),
     .status = AG_ERR_FORMAT, .message = "header length 100000000 runs past the end of the file"},

    /* ---- UTF-8 ---- */
    ST_BAD("byte 0xff in a key", "{\"\xff\":1}", 0, "header is not valid UTF-8 (byte 2 of the header is 0xff)"),
    ST_BAD("overlong encoding of '/'", "{\"\xc0\xaf\":1}", 0, "header is not valid UTF-8 (byte 2 of the header is 0xc0)"),
    ST_BAD("UTF-8-encoded surrogate", "{\"\xed\xa0\x80\":1}", 0, "header is not valid UTF-8 (byte 2 of the header is 0xed)"),
    ST_BAD("code point above U+10FFFF", "{\"\xf4\x90\x80\x80\":1}", 0, "header is not valid UTF-8 (byte 2"),
    ST_BAD("truncated sequence at the end", "{}\xe2\x82", 0, "header is not valid UTF-8 (byte 2 of the header is 0xe2)"),

    /* ---- JSON syntax ---- */
    ST_BAD("only spaces", "        ", 0, "header is not valid JSON: at byte 8: unexpected end of input, expected a value"),
    ST_BAD("truncated after a comma", "{\"w\":{\"dtype\":\"F32\",", 0,
           "not valid JSON: at byte 20: expected a string key in an object, found end of input"),
    ST_BAD("garbage after the object", "{} x", 0, "not valid JSON: at byte 3: unexpected 'x' after the top-level value"),
    ST_BAD("single-quoted key", "{'w':1}", 0, "not valid JSON: at byte 1: expected a string key in an object, found '''"),
    ST_BAD("trailing comma in an object", "{\"__metadata__\":{\"a\":\"b\"},}", 0,
           "at byte 26: expected a string key in an object, found '}'"),
    ST_BAD("trailing comma in an array", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 4,
           "at byte 31: unexpected ']', expected a value"),
    ST_BAD("missing colon", "{\"w\" 1}", 0, "at byte 5: expected ':' after an object key, found '1'"),
    ST_BAD("missing comma", "{\"__metadata__\":{\"a\":\"b\" \"c\":\"d\"}}", 0,
           "at byte 25: expected ',' or '}' in an object, found '\"'"),
    ST_BAD("unterminated string", "{\"w", 0, "at byte 1: unterminated string"),
    ST_BAD("invalid escape", "{\"__metadata__\":{\"a\":\"\\q\"}}", 0, "at byte 22: invalid escape '\\q' in a string"),
    ST_BAD("lone high surrogate", "{\"__metadata__\":{\"a\":\"\\ud800x\"}}", 0,
           "lone high surrogate \\uD800 (no low surrogate after it)"),
    ST_BAD("high surrogate then a non-surrogate", "{\"__metadata__\":{\"a\":\"\\ud800\\u0041\"}}", 0,
           "lone high surrogate \\uD800"),
    ST_BAD("lone low surrogate", "{\"__metadata__\":{\"a\":\"\\udc00\"}}", 0, "lone low surrogate \\uDC00"),
    ST_BAD("\\u with a non-hex digit", "{\"__metadata__\":{\"a\":\"\\u12g4\"}}", 0,
           "\\u must be followed by 4 hex digits"),
    ST_BAD("raw tab in a string", "{\"__metadata__\":{\"a\":\"x\ty\"}}", 0,
           "control character 0x09 in a string (must be escaped)"),
    ST_BAD("leading zero", "{\"w\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4,
           "at byte 29: invalid number: leading zero"),
    ST_BAD("bare minus", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-],\"data_offsets\":[0,4]}}", 4,
           "invalid number: a digit must follow '-'"),
    ST_BAD("fraction without digits", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.],\"data_offsets\":[0,4]}}", 4,
           "invalid number: a digit must follow '.'"),
    ST_BAD("misspelled literal", "{\"__metadata__\":tru}", 0, "at byte 16: invalid literal (expected 'true')"),
    ST_BAD("NaN", "{\"w\":NaN}", 0, "at byte 5: unexpected 'N', expected a value"),
    {.what = "65 nested containers", .make = st_make_deep, .status = AG_ERR_FORMAT,
     .message = "at byte 68: nesting deeper than 64 arrays/objects"},

    /* ---- structure ---- */
    ST_BAD("header is an array", "[]", 0, "header is an array, not a JSON object"),
    ST_BAD("header is a string", "\"w\"", 0, "header is a string, not a JSON object"),
    ST_BAD("entry is an array", "{\"w\":[1]}", 0, "tensor 'w': entry is an array, not an object"),
    ST_BAD("missing dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing key 'dtype'"),
    ST_BAD("missing shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing key 'shape'"),
    ST_BAD("missing data_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
           "tensor 'w': missing key 'data_offsets'"),
    ST_BAD("extra key", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"offset\":0}}", 4,
           "tensor 'w': unexpected key 'offset' (allowed: dtype, shape, data_offsets)"),
    ST_BAD("key twice in an entry", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': key 'dtype' appears twice"),
    ST_BAD("unknown dtype", "{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16,
           "tensor 'w': unknown dtype 'F128'"),
    ST_BAD("lower-case dtype", "{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': unknown dtype 'f32'"),
    ST_BAD("dtype is a number", "{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': dtype is a number, not a string"),
    ST_BAD("shape is a number", "{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16,
           "tensor 'w': shape is a number, not an array"),
    ST_BAD("negative dimension", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': shape[1] is -1, negative"),
    ST_BAD("fractional dimension", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': shape[0] is 2.5, not an integer"),
    ST_BAD("dimension with an exponent", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1e3],\"data_offsets\":[0,4000]}}", 4000,
           "tensor 'w': shape[0] is 1e3, not an integer"),
    ST_BAD("dimension is a string", "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"3\"],\"data_offsets\":[0,12]}}", 12,
           "tensor 'w': shape[0] is a string, not an integer"),
    ST_BAD("dimension is null", "{\"w\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': shape[0] is null, not an integer"),
    ST_BAD("dimension above 2^53", "{\"w\":{\"dtype\":\"U8\",\"shape\":[9007199254740993],\"data_offsets\":[0,1]}}", 1,
           "tensor 'w': shape[0] is 9007199254740993, larger than 2^53"),
    ST_BAD("dimension above 2^64", "{\"w\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999999],\"data_offsets\":[0,1]}}", 1,
           "tensor 'w': shape[0] is 99999999999999999999999, larger than 2^53"),
    {.what = "65 axes", .make = st_make_rank65, .data_len = 4, .status = AG_ERR_FORMAT,
     .message = "tensor 'w': shape has 65 axes, more than 64"},
    ST_BAD("element count overflows", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,1]}}", 1,
           "tensor 'w': shape [4294967296, 4294967296] has too many elements (the count overflows)"),
    ST_BAD("byte size overflows", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w': shape [2147483648, 2147483648] of F32 is too large (its byte size overflows)"),
    ST_BAD("data_offsets is a number", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":0}}", 4,
           "tensor 'w': data_offsets is a number, not an array of 2 integers"),
    ST_BAD("data_offsets has 1 element", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
           "tensor 'w': data_offsets has 1 element, not 2"),
    ST_BAD("data_offsets has 3 elements", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
           "tensor 'w': data_offsets has 3 elements, not 2"),
    ST_BAD("negative offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
           "tensor 'w': data_offsets[0] is -4, negative"),
    ST_BAD("fractional offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4,
           "tensor 'w': data_offsets[1] is 4.0, not an integer"),
    ST_BAD("end before begin", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
           "tensor 'w': data_offsets [8, 4]: the end is before the beginning"),
    ST_BAD("byte length differs from shape", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12,
           "tensor 'w': data_offsets [0, 12] hold 12 bytes, but shape [2, 2] of F32 needs 16"),
    ST_BAD("past the end of the data", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
           "tensor 'w': data_offsets [0, 16] run past the end of the data buffer (12 bytes)"),
    ST_BAD("gap between tensors", "{" ST_F32("a", 1, 0, 4) "," ST_F32("b", 1, 8, 12) "}", 12,
           "data buffer bytes [4, 8) belong to no tensor (a gap before tensor 'b')"),
    ST_BAD("first tensor not at 0", "{" ST_F32("a", 1, 4, 8) "}", 8,
           "data buffer bytes [0, 4) belong to no tensor (a gap before tensor 'a')"),
    ST_BAD("overlapping tensors", "{" ST_F32("a", 2, 0, 8) "," ST_F32("b", 2, 4, 12) "}", 12,
           "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]"),
    ST_BAD("two tensors on the same bytes", "{" ST_F32("b", 1, 0, 4) "," ST_F32("a", 1, 0, 4) "}", 4,
           "tensor 'a' data_offsets [0, 4] overlap tensor 'b' [0, 4]"),
    ST_BAD("zero-size tensor inside another",
           "{" ST_F32("a", 2, 0, 8) ",\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8,
           "tensor 'z' data_offsets [4, 4] overlap tensor 'a' [0, 8]"),
    ST_BAD("trailing bytes", "{" ST_F32("a", 1, 0, 4) "}", 8,
           "4 trailing bytes after the last tensor (the data buffer has 8 bytes, the tensors cover 4)"),
    ST_BAD("data but no tensors", "{}", 3,
           "3 trailing bytes after the last tensor (the data buffer has 3 bytes, the tensors cover 0)"),
    ST_BAD("duplicate tensor name", "{" ST_F32("w", 1, 0, 4) "," ST_F32("w", 1, 4, 8) "}", 8,
           "duplicate tensor name 'w'"),
    ST_BAD("__metadata__ twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice"),
    ST_BAD("__metadata__ is an array", "{\"__metadata__\":[\"a\"]}", 0,
           "__metadata__ is an array, not an object of strings"),
    ST_BAD("__metadata__ value is a number", "{\"__metadata__\":{\"a\":1}}", 0,
           "__metadata__ key 'a': value is a number, not a string"),
    ST_BAD("__metadata__ value is an object", "{\"__metadata__\":{\"a\":{}}}", 0,
           "__metadata__ key 'a': value is an object, not a string"),
    ST_BAD("__metadata__ key twice", "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"a\":\"3\"}}", 0,
           "__metadata__ has key 'a' twice"),
    ST_BAD("NUL in a tensor name", "{" ST_F32("a\\u0000b", 1, 0, 4) "}", 4,
           "a tensor name contains a NUL character (\\u0000)"),
    ST_BAD("NUL in a metadata value", "{\"__metadata__\":{\"a\":\"x\\u0000\"}}", 0,
           "__metadata__ key 'a': value contains a NUL character (\\u0000)"),
    ST_BAD("NUL in a metadata key", "{\"__metadata__\":{\"\\u0000\":\"x\"}}", 0,
           "__metadata__: a key contains a NUL character (\\u0000)"),
};
#define ST_CORPUS_BAD_COUNT (sizeof st_corpus_bad / sizeof st_corpus_bad[0])

#define ST_GOOD(what_, hdr_, dlen_, count_)                                                          \
    {.what = (what_), .header = (hdr_), .data_len = (dlen_), .status = AG_OK, .count = (count_)}

static const st_corpus_case st_corpus_good[] = {
    ST_GOOD("empty header", "{}", 0, 0),
    ST_GOOD("padded with trailing spaces", "{}      ", 0, 0),
    ST_GOOD("whitespace all around", " \n\t{ \r\n }\r\n ", 0, 0),
    ST_GOOD("rank-0 tensor", "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, 1),
    ST_GOOD("only a zero-size tensor", "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", 0, 1),
    ST_GOOD("zero-size tensor between two others",
            "{" ST_F32("a", 1, 0, 4) ",\"z\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
            "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
            12, 3),
    ST_GOOD("tensors and keys in any order",
            "{\"b\":{\"data_offsets\":[4,8],\"shape\":[1],\"dtype\":\"I32\"},"
            "\"a\":{\"shape\":[2],\"dtype\":\"U16\",\"data_offsets\":[0,4]}}   ",
            8, 2),
    ST_GOOD("every dtype",
            "{\"bool\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
            "\"i8\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[2,3]},"
            "\"i16\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[3,5]},"
            "\"u16\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[5,7]},"
            "\"f16\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[7,9]},"
            "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[9,11]},"
            "\"i32\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[11,15]},"
            "\"u32\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[15,19]},"
            "\"f32\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[19,23]},"
            "\"f64\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[23,31]},"
            "\"i64\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[31,39]},"
            "\"u64\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[39,47]}}",
            47, 13),
    ST_GOOD("metadata with escapes and unicode",
            "{\"__metadata__\":{\"q\\\"k\":\"a\\\\b\\/\\u00e9\\ud83d\\ude00\\n\",\"\":\"\"}," ST_F32("w", 1, 0, 4) "}",
            4, 1),
    ST_GOOD("a dimension of 2^53 next to a 0", "{\"w\":{\"dtype\":\"F64\",\"shape\":[9007199254740992,0],\"data_offsets\":[0,0]}}",
            0, 1),
    ST_GOOD("negative zero dimension", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, 1),
    {.what = "64 axes", .make = st_make_rank64, .data_len = 4, .status = AG_OK, .count = 1},
};
#define ST_CORPUS_GOOD_COUNT (sizeof st_corpus_good / sizeof st_corpus_good[0])

/* The file bytes of case c (malloc'd; *len set), or NULL when out of memory.
 * Data bytes are the pattern 1, 8, 15, ... (i * 7 + 1 mod 256). */
static unsigned char *st_corpus_build(const st_corpus_case *c, size_t *len)
{
    if (c->raw) {
        unsigned char *b = malloc(c->raw_len + 1);
        if (b) memcpy(b, c->raw, c->raw_len);
        *len = c->raw_len;
        return b;
    }
    char made[4096];
    const char *hdr = c->header;
    if (c->make) {
        c->make(made, sizeof made);
        hdr = made;
    }
    size_t n = strlen(hdr);
    *len = 8 + n + c->data_len;
    unsigned char *b = malloc(*len);
    if (!b) return NULL;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < c->data_len; i++) b[8 + n + i] = (unsigned char)(i * 7 + 1);
    return b;
}

#endif
