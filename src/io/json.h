/* json.h: a small strict JSON parser (RFC 8259) for safetensors headers.
 *
 * The parse is iterative (an explicit stack of at most AG__JSON_MAX_DEPTH
 * open containers), so hostile input cannot exhaust the C stack.  The result
 * is a flat array of nodes; node 0 is the top-level value.  Children of an
 * array or object are linked by `next`, in document order.  Strings are
 * decoded (escapes, \uXXXX, surrogate pairs) into one pool, NUL-terminated;
 * a string may still contain a NUL (from \u0000): compare len when that
 * matters.
 *
 * Duplicate object keys are kept (the caller decides); numbers keep their
 * source text, plus the integer value when they are written as one. */
#ifndef AG_JSON_H
#define AG_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "attograd_core.h"

#define AG__JSON_MAX_DEPTH 64

typedef enum ag__json_type {
    AG__JSON_NULL,
    AG__JSON_FALSE,
    AG__JSON_TRUE,
    AG__JSON_NUMBER,
    AG__JSON_STRING,
    AG__JSON_ARRAY,
    AG__JSON_OBJECT
} ag__json_type;

typedef struct ag__json_node {
    uint8_t type;      /* ag__json_type */
    uint8_t is_int;    /* number written without fraction or exponent */
    uint8_t neg;       /* number has a leading '-' */
    uint8_t overflow;  /* integer magnitude does not fit in uint64 */
    uint32_t next;     /* next sibling, 0 when last (node 0 is nobody's sibling) */
    uint32_t first;    /* first child of an array or object, 0 when empty */
    uint32_t count;    /* children of an array or object */
    uint32_t key;      /* member of an object: key in the pool */
    uint32_t key_len;
    uint32_t str;      /* string: value in the pool; number: source offset */
    uint32_t str_len;
    uint64_t u;        /* integer magnitude (is_int && !overflow) */
} ag__json_node;

typedef struct ag__json {
    ag__json_node *nodes;
    uint32_t count, cap;
    char *pool;        /* decoded strings, each NUL-terminated */
    uint32_t pool_len;
} ag__json;

/* Parse text[0..len) (which must be valid UTF-8: see ag__utf8_check) into
 * *out.  Returns AG_OK, AG_ERR_FORMAT (message "at byte N: what") or
 * AG_ERR_NOMEM; on failure *out holds nothing to free. */
ag_status ag__json_parse(const char *text, size_t len, ag__json *out, char *err, size_t errlen);
void ag__json_free(ag__json *j);

/* Offset of the first byte that is not well-formed UTF-8 (overlong forms,
 * surrogates and code points above U+10FFFF are ill-formed), or len. */
size_t ag__utf8_check(const unsigned char *s, size_t len);

#endif
