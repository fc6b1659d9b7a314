/* tests/test_text.c: the translation data pipeline (src/text/text.c, src/text/bleu.c):
 * d2l's preprocessing, TSV pairs with bad lines, grouping by source, the
 * vocabulary, fixed-length encoding, BLEU, and allocation failures.
 *
 * The expected preprocessing and BLEU values were computed with d2l.ai's own
 * Python code (d2l/torch.py, MTFraEng._preprocess and bleu), quoted where
 * used.  None of this depends on ag_real, so both runners check the same
 * numbers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "attograd_text.h"

#define DATA_PATH "examples/data/eng-fra.tsv"

/* ---- helpers ------------------------------------------------------------- */

static void expect_pre(const char *in, const char *want)
{
    char out[256];
    int n = ag_text_preprocess(in, out, sizeof out);
    cr_assert_eq(n, (int)strlen(want), "preprocess(\"%s\") length %d, want %zu", in, n, strlen(want));
    cr_assert_str_eq(out, want, "preprocess(\"%s\")", in);
}

/* The tokens joined by single spaces (for compact comparisons). */
static const char *joined(const char *const *tok, int n)
{
    static char buf[1024];
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? " " : "", tok[i]);
    return buf;
}

/* Write len bytes to a new temporary file; returns its path (static). */
static const char *temp_file(const void *data, size_t len)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ag_text_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

/* ---- preprocessing ------------------------------------------------------- */

/* Expected strings from d2l:
 *   def _preprocess(text):
 *       text = text.replace('\u202f', ' ').replace('\xa0', ' ')
 *       no_space = lambda char, prev_char: char in ',.!?' and prev_char != ' '
 *       out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char
 *              for i, char in enumerate(text.lower())]
 *       return ''.join(out)                                                   */
Test(text, preprocess_matches_d2l)
{
    expect_pre("Go.", "go .");
    expect_pre("Hi!", "hi !");
    expect_pre("Va !", "va !");
    expect_pre("J'ai perdu.", "j'ai perdu .");
    expect_pre("Hello, world?!", "hello , world ? !");
    expect_pre("Wait...", "wait . . .");
    expect_pre(".Hi", ".hi");      /* position 0: no space before */
    expect_pre("  Go.", "  go ."); /* spaces kept; the tokenizer drops them */
    expect_pre("", "");
}

Test(text, preprocess_no_break_spaces_become_spaces)
{
    expect_pre("Va\xc2\xa0!", "va !");          /* U+00A0: no second space */
    expect_pre("Qui\xe2\x80\xaf?", "qui ?");    /* U+202F narrow no-break space */
    expect_pre("A\xc2\xa0" "b", "a b");
    /* U+2009 thin space is not replaced (d2l does not): '?' gets its space */
    expect_pre("Qui\xe2\x80\x89?", "qui\xe2\x80\x89 ?");
}

Test(text, preprocess_lowercases_latin1_and_oe)
{
    expect_pre("\xc3\x89T\xc3\x89 \xc3\x80 \xc3\x87" "a", "\xc3\xa9t\xc3\xa9 \xc3\xa0 \xc3\xa7" "a"); /* ÉTÉ À Ça */
    expect_pre("\xc3\x80\xc3\x9e", "\xc3\xa0\xc3\xbe"); /* the ends of the range: À Þ -> à þ */
    expect_pre("\xc3\x97\xc3\x9f", "\xc3\x97\xc3\x9f"); /* × and ß stay */
    expect_pre("\xc5\x92uf", "\xc5\x93uf");             /* Œuf -> œuf */
    expect_pre("\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9"); /* already lowercase */
}

Test(text, preprocess_reports_a_short_buffer)
{
    char out[8];
    cr_assert_eq(ag_text_preprocess("Go.", out, 5), 4); /* "go ." and its NUL: exactly 5 */
    cr_assert_str_eq(out, "go .");
    cr_assert_eq(ag_text_preprocess("Go.", out, 4), -1);
    cr_assert_eq(ag_text_preprocess("Go.", out, 0), -1);
    cr_assert_eq(ag_text_preprocess(NULL, out, sizeof out), -1);
}

Test(text, tokenize_splits_at_spaces_and_skips_empty_tokens)
{
    char s[] = "  il  est calme . ";
    char *tok[8];
    int n = ag_text_tokenize(s, tok, 8);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(joined((const char *const *)tok, n), "il est calme .");
    char t[] = "a b c";
    cr_assert_eq(ag_text_tokenize(t, tok, 2), -1, "3 tokens do not fit in 2");
    char e[] = "   ";
    cr_assert_eq(ag_text_tokenize(e, tok, 8), 0);
}

/* ---- vocabulary ----------------------------------------------------------- */

/* counts: a 3, b 2, c 2, d 1, e 1, zz 1, é 1 (c is seen before b, e before
 * d, é before zz: the order must come from strcmp, not first appearance). */
static const char *const s0[] = {"c", "b", "a", "a", "<unk>"};
static const char *const s1[] = {"\xc3\xa9", "e", "d", "c", "b", "zz"};
static const char *const s2[] = {"a"};
static const char *const *const seqs[] = {s0, s1, s2};
static const int lens[] = {5, 6, 1};

Test(text, vocab_orders_by_count_then_bytes)
{
    ag_vocab *v;
    char err[256];
    cr_assert_eq(ag_vocab_build(seqs, lens, 3, 1, &v, err, sizeof err), AG_OK, "%s", err);
    const char *want[] = {"<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c", "d", "e", "zz", "\xc3\xa9"};
    cr_assert_eq(ag_vocab_size(v), 11, "size %d", ag_vocab_size(v));
    for (int i = 0; i < 11; i++) {
        cr_assert_str_eq(ag_vocab_token(v, i), want[i], "id %d", i);
        cr_assert_eq(ag_vocab_id(v, want[i]), i, "id of %s", want[i]);
    }
    cr_assert_eq(ag_vocab_id(v, "absent"), AG_UNK);
    cr_assert_eq(ag_vocab_id(v, ""), AG_UNK);
    cr_assert_null(ag_vocab_token(v, 11));
    cr_assert_null(ag_vocab_token(v, -1));
    ag_vocab_free(v);
}

Test(text, vocab_min_freq_drops_rare_tokens)
{
    ag_vocab *v;
    char err[256];
    cr_assert_eq(ag_vocab_build(seqs, lens, 3, 2, &v, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_size(v), 7);
    cr_assert_str_eq(ag_vocab_token(v, 4), "a");
    cr_assert_str_eq(ag_vocab_token(v, 5), "b");
    cr_assert_str_eq(ag_vocab_token(v, 6), "c");
    cr_assert_eq(ag_vocab_id(v, "d"), AG_UNK, "d is seen once, under min_freq 2");
    ag_vocab_free(v);
    cr_assert_eq(ag_vocab_build(seqs, lens, 3, 4, &v, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_size(v), AG_N_SPECIAL, "nothing is seen 4 times");
    ag_vocab_free(v);
}

Test(text, vocab_rejects_bad_tokens)
{
    ag_vocab *v = (ag_vocab *)1;
    char err[256];
    const char *const bad[] = {"ok", "two words"};
    const char *const *const bs[] = {bad};
    const int bl[] = {2};
    cr_assert_eq(ag_vocab_build(bs, bl, 1, 1, &v, err, sizeof err), AG_ERR_ARG);
    cr_assert_null(v);
    cr_assert_str_eq(err, "vocab: sequence 0 token 1 is holding a space or newline");
}

Test(text, vocab_serializes_and_parses_back)
{
    ag_vocab *v, *w;
    char err[256];
    cr_assert_eq(ag_vocab_build(seqs, lens, 3, 1, &v, err, sizeof err), AG_OK, "%s", err);
    size_t need = ag_vocab_serialize(v, NULL, 0);
    const char *want = "<pad>\n<bos>\n<eos>\n<unk>\na\nb\nc\nd\ne\nzz\n\xc3\xa9";
    cr_assert_eq(need, strlen(want));
    char buf[128];
    cr_assert_eq(ag_vocab_serialize(v, buf, sizeof buf), need);
    cr_assert_str_eq(buf, want);
    char small[8];
    ag_vocab_serialize(v, small, sizeof small); /* truncated, still a C string */
    cr_assert_str_eq(small, "<pad>\n<");
    cr_assert_eq(ag_vocab_parse(buf, need, &w, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_size(w), ag_vocab_size(v));
    for (int i = 0; i < ag_vocab_size(v); i++) {
        cr_assert_str_eq(ag_vocab_token(w, i), ag_vocab_token(v, i));
        cr_assert_eq(ag_vocab_id(w, ag_vocab_token(v, i)), i);
    }
    ag_vocab_free(w);
    ag_vocab_free(v);
}

Test(text, vocab_parse_names_the_bad_token)
{
    static const struct {
        const char *s, *msg;
    } cases[] = {
        {"<pad>\n<bos>\n<eos>", "vocab: 3 tokens, fewer than the 4 special ones"},
        {"<pad>\n<eos>\n<bos>\n<unk>", "vocab: token 1 is '<eos>', want '<bos>'"},
        {"<pad>\n<bos>\n<eos>\n<unk>\na\nb\na", "vocab: token 6 'a' repeats token 4"},
        {"<pad>\n<bos>\n<eos>\n<unk>\na\n\nb", "vocab: token 5 is empty"},
        {"<pad>\n<bos>\n<eos>\n<unk>\na\n", "vocab: token 5 is empty"},
        {"<pad>\n<bos>\n<eos>\n<unk>\na b", "vocab: token 4 holds a space"},
        {"<pad>\n<bos>\n<eos>\n<unk>\n\xff", "vocab: token 4 is not UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ag_vocab *v = (ag_vocab *)1;
        char err[256];
        cr_assert_eq(ag_vocab_parse(cases[i].s, strlen(cases[i].s), &v, err, sizeof err),
                     AG_ERR_FORMAT, "case %zu", i);
        cr_assert_null(v);
        cr_assert_str_eq(err, cases[i].msg, "case %zu", i);
    }
}

/* ---- encoding ------------------------------------------------------------- */

Test(text, encode_appends_eos_then_truncates_and_pads)
{
    ag_vocab *v;
    char err[256];
    cr_assert_eq(ag_vocab_build(seqs, lens, 3, 1, &v, err, sizeof err), AG_OK, "%s", err);
    int a = ag_vocab_id(v, "a"), b = ag_vocab_id(v, "b");
    const char *const toks[] = {"a", "b", "never-seen"};
    int ids[6], valid = -1;

    /* d2l build_array_nmt: l + [<eos>], then truncate_pad(l, num_steps, <pad>) */
    cr_assert_eq(ag_encode(v, toks, 3, 6, ids, &valid), AG_OK);
    int want6[] = {a, b, AG_UNK, AG_EOS, AG_PAD, AG_PAD};
    cr_assert_arr_eq(ids, want6, sizeof want6);
    cr_assert_eq(valid, 4);

    cr_assert_eq(ag_encode(v, toks, 3, 4, ids, &valid), AG_OK);
    int want4[] = {a, b, AG_UNK, AG_EOS};
    cr_assert_arr_eq(ids, want4, sizeof want4);
    cr_assert_eq(valid, 4);

    cr_assert_eq(ag_encode(v, toks, 3, 2, ids, &valid), AG_OK); /* <eos> is cut off too */
    int want2[] = {a, b};
    cr_assert_arr_eq(ids, want2, sizeof want2);
    cr_assert_eq(valid, 2);

    cr_assert_eq(ag_encode(v, NULL, 0, 3, ids, &valid), AG_OK);
    int want0[] = {AG_EOS, AG_PAD, AG_PAD};
    cr_assert_arr_eq(ids, want0, sizeof want0);
    cr_assert_eq(valid, 1);

    cr_assert_eq(ag_encode(v, toks, 3, 0, ids, &valid), AG_ERR_ARG);
    cr_assert_eq(ag_encode(v, toks, -1, 3, ids, &valid), AG_ERR_ARG);
    cr_assert_eq(ag_encode(NULL, toks, 3, 3, ids, &valid), AG_ERR_ARG);
    ag_vocab_free(v);
}

Test(text, decoder_input_is_bos_then_the_target_shifted)
{
    /* target "va ! <eos> <pad>" as ids; d2l: [<bos>] + target, then [:, :-1] */
    int tgt[] = {7, 9, AG_EOS, AG_PAD};
    int dec[4];
    ag_decoder_input(tgt, 4, dec);
    int want[] = {AG_BOS, 7, 9, AG_EOS};
    cr_assert_arr_eq(dec, want, sizeof want);
    ag_decoder_input(tgt, 4, tgt); /* in place */
    cr_assert_arr_eq(tgt, want, sizeof want);
}

/* ---- BLEU ----------------------------------------------------------------- */

/* Values from d2l's bleu (d2l/torch.py), run with python3:
 *   def bleu(pred_seq, label_seq, k):
 *       pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
 *       len_pred, len_label = len(pred_tokens), len(label_tokens)
 *       score = math.exp(min(0, 1 - len_label / len_pred))
 *       for n in range(1, min(k, len_pred) + 1):
 *           num_matches, label_subs = 0, collections.defaultdict(int)
 *           for i in range(len_label - n + 1):
 *               label_subs[' '.join(label_tokens[i: i + n])] += 1
 *           for i in range(len_pred - n + 1):
 *               if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
 *                   num_matches += 1
 *                   label_subs[' '.join(pred_tokens[i: i + n])] -= 1
 *           score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
 *       return score
 *   for p, l, k in cases: print('%.17g' % bleu(p, l, k))                   */
static const struct {
    const char *pred, *label;
    int k;
    double want;
} bleu_cases[] = {
    {"il est calme .", "il est calme .", 2, 1},
    {"il est mouill\xc3\xa9 .", "il est calme .", 2, 0.65803700647624619},
    {"je suis suis .", "je suis chez moi .", 2, 0.51247973593366369}, /* 'suis' clipped to 1 */
    {"le le le le", "le chat le", 1, 0.70710678118654757},          /* 'le' clipped to 2 */
    {"le le le le", "le chat", 2, 0},
    {"a", "a b c", 2, 0.1353352832366127}, /* len_pred 1 < k: one order, brevity exp(-2) */
    {"je suis chez moi ici .", "je suis chez moi .", 4, 0.68785731747313961},
    {"x y", "a b", 2, 0},
    {"a b c", "a", 3, 0},
    {"a b a b a b", "a b a b", 3, 0.65896664682042416},
    {"il est parti .", "il est calme .", 3, 0},
};

Test(text, bleu_matches_d2l)
{
    for (size_t c = 0; c < sizeof bleu_cases / sizeof bleu_cases[0]; c++) {
        char p[128], l[128];
        char *pt[16], *lt[16];
        strcpy(p, bleu_cases[c].pred);
        strcpy(l, bleu_cases[c].label);
        int np = ag_text_tokenize(p, pt, 16), nl = ag_text_tokenize(l, lt, 16);
        double got = ag_bleu((const char *const *)pt, np, (const char *const *)lt, nl, bleu_cases[c].k);
        cr_assert(fabs(got - bleu_cases[c].want) <= 1e-15,
                  "bleu('%s', '%s', %d) = %.17g, want %.17g", bleu_cases[c].pred,
                  bleu_cases[c].label, bleu_cases[c].k, got, bleu_cases[c].want);
    }
}

Test(text, bleu_of_an_empty_prediction_is_zero)
{
    const char *const label[] = {"va", "!"};
    cr_assert_eq(ag_bleu(NULL, 0, label, 2, 2), 0.0);
    cr_assert_eq(ag_bleu(label, 0, label, 2, 2), 0.0);
}

Test(text, bleu_best_takes_the_best_reference)
{
    const char *const r0[] = {"va", "!"}, *const r1[] = {"marche", "."}, *const r2[] = {"bouge", "!"};
    const char *const *const refs[] = {r0, r1, r2};
    const int rl[] = {2, 2, 2};
    const char *const pred[] = {"bouge", "!"};
    cr_assert_eq(ag_bleu_best(pred, 2, refs, rl, 3, 2), 1.0);
    const char *const pred2[] = {"va", "."};
    /* "va .": r0 p1 = 1/2, p2 = 0 -> 0; every reference gives 0 */
    cr_assert_eq(ag_bleu_best(pred2, 2, refs, rl, 3, 2), 0.0);
    /* k = 1: sqrt(1/2) from r0 (va) and r1 (.) alike */
    cr_assert_float_eq(ag_bleu_best(pred2, 2, refs, rl, 3, 1), sqrt(0.5), 1e-15);
    cr_assert_eq(ag_bleu_best(pred, 2, refs, rl, 0, 2), 0.0);
}

/* ---- pairs ---------------------------------------------------------------- */

Test(text, pairs_skip_bad_lines_with_line_numbers)
{
    char longline[5100];
    memset(longline, 'a', 5000);
    strcpy(longline + 5000, "\tb");
    char content[6000];
    snprintf(content, sizeof content,
             "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (x)\n" /* 1 good */
             "no tab here\n"                                                    /* 2 */
             "\n"                                                               /* 3 */
             "Hi.\tSalut !\n"                                                   /* 4 good */
             "bad \xff utf8\tx\n"                                               /* 5 */
             "%s\n"                                                             /* 6 */
             "   \tVa !\n"                                                      /* 7 */
             "Run!\t  \n"                                                       /* 8 */
             "Who?\tQui\xe2\x80\xaf?\r\n"                                       /* 9 good, CRLF */
             "Wow!\t\xc3\x87" "a alors !",                                      /* 10 good, no newline */
             longline);
    const char *path = temp_file(content, strlen(content));
    ag_pairs *p;
    char err[512];
    ag_status st = ag_pairs_load(path, &p, err, sizeof err);
    unlink(path);
    cr_assert_eq(st, AG_OK, "%s", err);
    cr_assert_eq(p->n, 4);
    cr_assert_eq(p->n_skipped, 6);
    cr_assert_eq(p->n_warnings_kept, 6);
    const char *why[] = {
        "2: no tab between source and target", "3: empty line",
        "5: invalid UTF-8 at column 5",        "6: line is 5002 bytes long, more than 4096",
        "7: empty source sentence",            "8: empty target sentence",
    };
    for (int i = 0; i < 6; i++) {
        char want[512];
        snprintf(want, sizeof want, "%s:%s; line skipped", path, why[i]);
        cr_assert_str_eq(p->warnings[i], want);
    }
    const int lines[] = {1, 4, 9, 10};
    const char *src[] = {"go .", "hi .", "who ?", "wow !"};
    const char *tgt[] = {"va !", "salut !", "qui ?", ("\xc3\xa7" "a alors !")};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(p->pairs[i].line, lines[i]);
        cr_assert_str_eq(joined(p->pairs[i].src, p->pairs[i].src_len), src[i]);
        cr_assert_str_eq(joined(p->pairs[i].tgt, p->pairs[i].tgt_len), tgt[i]);
    }
    cr_assert_str_eq(p->pairs[0].src_text, "Go.");
    cr_assert_str_eq(p->pairs[0].tgt_text, "Va !", "the credits column is not part of the target");
    cr_assert_str_eq(p->pairs[2].tgt_text, "Qui\xe2\x80\xaf?", "verbatim, without the \\r");
    ag_pairs_free(p);
}

Test(text, pairs_keep_only_the_first_warnings)
{
    char buf[1024] = "";
    for (int i = 0; i < 20; i++) strcat(buf, "no tab\n");
    strcat(buf, "Go.\tVa !\n");
    ag_pairs *p;
    char err[256];
    cr_assert_eq(ag_pairs_parse(buf, strlen(buf), "mem.tsv", &p, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(p->n, 1);
    cr_assert_eq(p->pairs[0].line, 21);
    cr_assert_eq(p->n_skipped, 20);
    cr_assert_eq(p->n_warnings_kept, AG_PAIRS_MAX_WARNINGS);
    cr_assert_str_eq(p->warnings[AG_PAIRS_MAX_WARNINGS - 1],
                     "mem.tsv:8: no tab between source and target; line skipped");
    ag_pairs_free(p);
}

Test(text, pairs_reject_a_nul_byte)
{
    const char buf[] = "Go.\tV\0a !\nHi.\tSalut !\n";
    ag_pairs *p;
    char err[256];
    cr_assert_eq(ag_pairs_parse(buf, sizeof buf - 1, "nul.tsv", &p, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(p->n, 1);
    cr_assert_str_eq(p->warnings[0], "nul.tsv:1: NUL byte at column 6; line skipped");
    ag_pairs_free(p);
}

Test(text, pairs_error_when_nothing_is_usable)
{
    ag_pairs *p = (ag_pairs *)1;
    char err[512];
    const char *path = temp_file("", 0);
    cr_assert_eq(ag_pairs_load(path, &p, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_null(p);
    char want[512];
    snprintf(want, sizeof want, "%s: no usable sentence pairs (the file is empty)", path);
    cr_assert_str_eq(err, want);
    unlink(path);

    const char bad[] = "just text\n\n";
    cr_assert_eq(ag_pairs_parse(bad, strlen(bad), "bad.tsv", &p, err, sizeof err), AG_ERR_FORMAT);
    cr_assert_null(p);
    cr_assert_str_eq(err, "bad.tsv: no usable sentence pairs (2 lines skipped; first: "
                          "bad.tsv:1: no tab between source and target; line skipped)");
}

Test(text, pairs_io_errors_name_the_file)
{
    ag_pairs *p = (ag_pairs *)1;
    char err[512], want[512];
    cr_assert_eq(ag_pairs_load("/nonexistent/eng-fra.tsv", &p, err, sizeof err), AG_ERR_IO);
    cr_assert_null(p);
    snprintf(want, sizeof want, "/nonexistent/eng-fra.tsv: %s", strerror(ENOENT));
    cr_assert_str_eq(err, want);
    /* a directory opens but does not read */
    cr_assert_eq(ag_pairs_load("/tmp", &p, err, sizeof err), AG_ERR_IO);
    snprintf(want, sizeof want, "/tmp: %s", strerror(EISDIR));
    cr_assert_str_eq(err, want);
}

/* A FIFO with no writer as the data file is an empty stream, refused at
 * once as an empty file is (the timeout fails the test if opening it
 * blocks); a device is refused. */
Test(text, pairs_load_of_a_fifo_without_writer_fails_without_blocking, .timeout = 10)
{
    char fifo[64], err[512];
    snprintf(fifo, sizeof fifo, "/tmp/ag_text_fifo_%ld", (long)getpid());
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0644), 0, "mkfifo: %s", strerror(errno));
    ag_pairs *p = (ag_pairs *)1;
    ag_status st = ag_pairs_load(fifo, &p, err, sizeof err);
    unlink(fifo);
    cr_assert_neq(st, AG_OK, "an empty stream gave pairs");
    cr_assert_null(p);
    cr_assert_not_null(strstr(err, fifo), "%s", err);
    cr_assert_eq(ag_pairs_load("/dev/null", &p, err, sizeof err), AG_ERR_IO);
    cr_assert_not_null(strstr(err, "/dev/null: not a regular file or a pipe (a character device)"), "%s", err);
}

/* ---- grouping ------------------------------------------------------------- */

Test(text, groups_collect_every_reference_of_a_source)
{
    const char buf[] = "Go.\tVa !\nHi.\tSalut !\nGo.\tMarche.\ngo .\tBouge !\nHi.\tSalut.\n";
    ag_pairs *p;
    ag_groups *g;
    char err[256];
    cr_assert_eq(ag_pairs_parse(buf, strlen(buf), "g.tsv", &p, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_groups_build(p, NULL, 0, &g, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(g->n, 2);
    cr_assert_str_eq(joined(g->groups[0].src, g->groups[0].src_len), "go .");
    cr_assert_eq(g->groups[0].first, 0);
    cr_assert_eq(g->groups[0].nrefs, 3, "\"Go.\" and \"go .\" preprocess the same");
    const char *want0[] = {"va !", "marche .", "bouge !"};
    const int pair0[] = {0, 2, 3};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(g->groups[0].ref_pair[r], pair0[r]);
        cr_assert_str_eq(joined(g->groups[0].ref[r], g->groups[0].ref_len[r]), want0[r]);
    }
    cr_assert_eq(g->groups[1].first, 1);
    cr_assert_eq(g->groups[1].nrefs, 2);
    cr_assert_str_eq(joined(g->groups[1].ref[1], g->groups[1].ref_len[1]), "salut .");
    /* ready for ag_bleu_best */
    const char *const pred[] = {"marche", "."};
    cr_assert_eq(ag_bleu_best(pred, 2, g->groups[0].ref, g->groups[0].ref_len,
                              g->groups[0].nrefs, 2), 1.0);
    ag_groups_free(g);

    /* a subset: pairs 4, 3, 1 */
    const int idx[] = {4, 3, 1};
    cr_assert_eq(ag_groups_build(p, idx, 3, &g, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(g->n, 2);
    cr_assert_eq(g->groups[0].first, 4);
    cr_assert_eq(g->groups[0].nrefs, 2);
    cr_assert_eq(g->groups[0].ref_pair[1], 1);
    cr_assert_eq(g->groups[1].first, 3);
    ag_groups_free(g);

    const int bad[] = {0, 5};
    g = (ag_groups *)1;
    cr_assert_eq(ag_groups_build(p, bad, 2, &g, err, sizeof err), AG_ERR_ARG);
    cr_assert_null(g);
    cr_assert_str_eq(err, "groups: index 1 is pair 5, outside [0, 5)");
    ag_pairs_free(p);
}

/* ---- the shipped data ----------------------------------------------------- */

/* Numbers measured with d2l's _preprocess and split in Python on the same
 * file: 5000 pairs, 2597 distinct English token sequences (the same as the
 * distinct raw sentences), vocabularies with min_freq 2 of 847 (English)
 * and 1225 (French) tokens, specials included. */
Test(text, the_shipped_data_loads)
{
    ag_pairs *p;
    char err[512];
    cr_assert_eq(ag_pairs_load(DATA_PATH, &p, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(p->n, 5000);
    cr_assert_eq(p->n_skipped, 0, "%s", p->warnings[0]);
    cr_assert_str_eq(p->pairs[0].src_text, "Go.");
    cr_assert_str_eq(joined(p->pairs[0].tgt, p->pairs[0].tgt_len), "va !");
    cr_assert_eq(p->pairs[4999].line, 5000);

    ag_groups *g;
    cr_assert_eq(ag_groups_build(p, NULL, 0, &g, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(g->n, 2597);
    int total = 0;
    for (int i = 0; i < g->n; i++) total += g->groups[i].nrefs;
    cr_assert_eq(total, 5000);
    cr_assert_eq(g->groups[0].nrefs, 3);
    cr_assert_str_eq(joined(g->groups[0].ref[1], g->groups[0].ref_len[1]), "marche .");
    cr_assert_str_eq(joined(g->groups[0].ref[2], g->groups[0].ref_len[2]), "bouge !");
    ag_groups_free(g);

    ag_vocab *src, *tgt, *back;
    cr_assert_eq(ag_vocab_from_pairs(p, AG_SOURCE, 2, &src, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_from_pairs(p, AG_TARGET, 2, &tgt, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(ag_vocab_size(src), 847);
    cr_assert_eq(ag_vocab_size(tgt), 1225);
    cr_assert_str_eq(ag_vocab_token(src, 4), ".");
    cr_assert_str_eq(ag_vocab_token(src, 5), "i");
    cr_assert_str_eq(ag_vocab_token(src, 6), "i'm");
    cr_assert_str_eq(ag_vocab_token(tgt, 5), "je");
    cr_assert_str_eq(ag_vocab_token(tgt, 6), "!");

    /* the checkpoint round trip keeps every id */
    size_t n = ag_vocab_serialize(tgt, NULL, 0);
    char *s = malloc(n + 1);
    cr_assert_not_null(s);
    ag_vocab_serialize(tgt, s, n + 1);
    cr_assert_eq(ag_vocab_parse(s, n, &back, err, sizeof err), AG_OK, "%s", err);
    for (int i = 0; i < ag_vocab_size(tgt); i++)
        cr_assert_eq(ag_vocab_id(back, ag_vocab_token(tgt, i)), i);
    free(s);
    ag_vocab_free(back);
    ag_vocab_free(src);
    ag_vocab_free(tgt);
    ag_pairs_free(p);
}

/* ---- allocation failures -------------------------------------------------- */

/* An allocator that fails allocation number fail_at and counts live blocks. */
static long fail_at, n_calls, live;
static void *failing_alloc(size_t bytes, void *user)
{
    (void)user;
    if (n_calls++ == fail_at) return NULL;
    void *q = malloc(bytes);
    if (q) live++;
    return q;
}
static void counting_release(void *q, void *user)
{
    (void)user;
    live--;
    free(q);
}

/* Run `body` (which sets st and frees what it made) failing the 1st, 2nd, ...
 * allocation until it succeeds; each failure must be AG_ERR_NOMEM with no
 * block left behind. */
#define EACH_ALLOCATION_FAILS(body)                                                         \
    do {                                                                                    \
        ag_set_allocator(&(ag_allocator){failing_alloc, counting_release, NULL});           \
        for (fail_at = 0;; fail_at++) {                                                     \
            n_calls = live = 0;                                                             \
            ag_status st;                                                                   \
            body;                                                                           \
            cr_assert_eq(live, 0, "allocation %ld failed: %ld blocks leaked", fail_at, live); \
            if (st == AG_OK) break;                                                         \
            cr_assert_eq(st, AG_ERR_NOMEM, "allocation %ld failed: status %d", fail_at, st);  \
            cr_assert_lt(fail_at, 64, "never succeeds");                                    \
        }                                                                                   \
        cr_assert_gt(fail_at, 0, "nothing was allocated");                                  \
        ag_set_allocator(NULL);                                                             \
    } while (0)

Test(text, allocation_failures_leak_nothing)
{
    char err[256];
    const char buf[] = "Go.\tVa !\nGo.\tMarche.\nHi.\tSalut !\nno tab\n";
    EACH_ALLOCATION_FAILS({
        ag_pairs *p;
        st = ag_pairs_parse(buf, strlen(buf), "m.tsv", &p, err, sizeof err);
        if (st == AG_OK) {
            cr_assert_eq(p->n, 3);
            ag_pairs_free(p);
        }
    });
    EACH_ALLOCATION_FAILS({
        ag_pairs *p;
        st = ag_pairs_load(DATA_PATH, &p, err, sizeof err);
        if (st == AG_OK) {
            cr_assert_eq(p->n, 5000);
            ag_pairs_free(p);
        }
    });

    ag_pairs *p;
    cr_assert_eq(ag_pairs_parse(buf, strlen(buf), "m.tsv", &p, err, sizeof err), AG_OK);
    EACH_ALLOCATION_FAILS({
        ag_groups *g;
        st = ag_groups_build(p, NULL, 0, &g, err, sizeof err);
        if (st == AG_OK) {
            cr_assert_eq(g->n, 2);
            ag_groups_free(g);
        }
    });
    EACH_ALLOCATION_FAILS({
        ag_vocab *v;
        st = ag_vocab_from_pairs(p, AG_TARGET, 1, &v, err, sizeof err);
        if (st == AG_OK) {
            cr_assert_eq(ag_vocab_size(v), 9); /* 4 + va ! marche . salut */
            ag_vocab_free(v);
        }
    });
    const char voc[] = "<pad>\n<bos>\n<eos>\n<unk>\nva\n!";
    EACH_ALLOCATION_FAILS({
        ag_vocab *v;
        st = ag_vocab_parse(voc, strlen(voc), &v, err, sizeof err);
        if (st == AG_OK) {
            cr_assert_eq(ag_vocab_id(v, "!"), 5);
            ag_vocab_free(v);
        }
    });
    /* the pairs were made with malloc before the hook changed */
    ag_set_allocator(NULL);
    ag_pairs_free(p);
}
