/* tests/fuzz/make_seeds.c: writes the fuzzers' seed corpora.
 *
 *   make_seeds ST_DIR PAIRS_DIR DATA.tsv
 *
 * ST_DIR gets every case of tests/st_corpus.h, corrupt and valid (the same
 * files the Criterion tests check), as bad_NN and good_NN.  PAIRS_DIR gets
 * runs of lines of DATA.tsv (the shipped English-French pairs) and small
 * files holding each kind of bad line the reader skips: no tab, an empty
 * line, invalid UTF-8, a NUL byte, a line longer than AG_PAIRS_MAX_LINE,
 * CRLF endings, empty columns, no usable pair at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_corpus.h"

static int write_file(const char *dir, const char *name, const void *b, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

static int st_seeds(const char *dir)
{
    char name[64];
    int rc = 0;
    for (size_t i = 0; i < ST_CORPUS_BAD_COUNT + ST_CORPUS_GOOD_COUNT; i++) {
        int good = i >= ST_CORPUS_BAD_COUNT;
        const st_corpus_case *c = good ? &st_corpus_good[i - ST_CORPUS_BAD_COUNT] : &st_corpus_bad[i];
        size_t len;
        unsigned char *b = st_corpus_build(c, &len);
        if (!b) return 1;
        snprintf(name, sizeof name, "%s_%02zu", good ? "good" : "bad", good ? i - ST_CORPUS_BAD_COUNT : i);
        rc |= write_file(dir, name, b, len);
        free(b);
    }
    return rc;
}

/* Lines [first, first + n) of the data (0-based), as one file. */
static int data_chunk(const char *dir, const char *data, size_t len, int first, int n)
{
    size_t start = 0, end;
    for (int line = 0; line < first && start < len; start++)
        if (data[start] == '\n') line++;
    end = start;
    for (int line = 0; line < n && end < len; end++)
        if (data[end] == '\n') line++;
    if (start >= end) return 0; /* the file is shorter */
    char name[64];
    snprintf(name, sizeof name, "data_%04d_%d", first, n);
    return write_file(dir, name, data + start, end - start);
}

static int pairs_seeds(const char *dir, const char *tsv)
{
    int rc = 0;
    FILE *f = fopen(tsv, "rb");
    if (!f) {
        perror(tsv);
        return 1;
    }
    size_t cap = 1 << 20, len = 0;
    char *data = malloc(cap);
    for (size_t r; data && (r = fread(data + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) data = realloc(data, cap *= 2);
    }
    fclose(f);
    if (!data) return 1;
    static const int chunks[][2] = {{0, 1}, {0, 8}, {0, 40}, {500, 20}, {1500, 10}, {3000, 10}, {4990, 10}};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++)
        rc |= data_chunk(dir, data, len, chunks[i][0], chunks[i][1]);
    free(data);

    static const struct {
        const char *name, *text;
        size_t len; /* 0: strlen */
    } bad[] = {
        {"no_tab", "Go.\tVa !\nno tab here\nHi.\tSalut !\n", 0},
        {"empty_line", "Go.\tVa !\n\nHi.\tSalut !\n", 0},
        {"invalid_utf8", "Go.\tVa !\n\xff\xfe\tbad\nCaf\xc3\xa9.\tCaf\xc3\xa9 !\n\xc3(\tx\n", 0},
        {"nul_byte", "Go.\tVa !\nab\0c\tx\n", 16},
        {"crlf", "Go.\tVa !\r\nHi.\tSalut !\r\n\r\n", 0},
        {"empty_columns", "\tVa !\nGo.\t\n . \t ! \nRun!\tCours !\tcredits\n", 0},
        {"nothing_usable", "only text\n\n\t\n", 0},
        {"no_newline_at_end", "Go.\tVa !", 0},
        {"specials", "<pad> <bos>\t<eos> <unk>\n\xc2\xa0Go.\xe2\x80\xaf!\tVa\xc2\xa0!\n", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        rc |= write_file(dir, bad[i].name, bad[i].text, bad[i].len ? bad[i].len : strlen(bad[i].text));

    /* a 10,000-character line between two good ones */
    size_t n = 10000;
    char *longf = malloc(n + 64);
    if (!longf) return 1;
    size_t at = (size_t)sprintf(longf, "Go.\tVa !\n");
    memset(longf + at, 'a', n);
    at += n;
    at += (size_t)sprintf(longf + at, "\tx\nHi.\tSalut !\n");
    rc |= write_file(dir, "long_line", longf, at);
    free(longf);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s ST_DIR PAIRS_DIR DATA.tsv\n", argv[0]);
        return 2;
    }
    return st_seeds(argv[1]) | pairs_seeds(argv[2], argv[3]);
}
