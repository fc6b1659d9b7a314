/* tests/test_oom.c: every allocation of a training step (on one graph, or
 * split between two workers), a checkpoint save, a checkpoint load and a
 * greedy decode may fail.
 *
 * An allocator hook (ag_set_allocator) fails the N-th allocation, or every
 * allocation from the N-th on; each test sweeps N from 0 until the work
 * runs through without a failure.  Each failing run must end in an error
 * (never a crash, never a success that silently skipped work), free
 * everything it allocated (the hook counts live blocks; make asan adds
 * LeakSanitizer), and leave the library usable: the same work then succeeds
 * and gives bit for bit the result of a run that never failed.
 *
 * The model is a small ag_seq2seq (1 encoder and 1 decoder block, width 8),
 * so one sweep is a few hundred short runs.
 *
 * The graph's arena takes memory in blocks of 1 MiB and more, so here a
 * step's activations cost one allocation or two, and an op's own arena
 * requests rarely meet the failure.  Built once by hand with the arena's
 * first block at 64 bytes and no growth (src/core/memory.c, ARENA_FIRST_BLOCK
 * and the doubling), the same sweeps reach every arena request of every op,
 * forward and backward (647 allocations for the training steps, 1444 for
 * the greedy decode), and pass under ASan and LeakSanitizer. */
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "core/internal.h"
#include "failing_alloc.h"
#include "tmpdir.h"

/* ---- the work under test ---------------------------------------------------------- */

static const ag_seq2seq_config CFG = {.src_vocab = 12, .tgt_vocab = 10, .hidden = 8, .heads = 2, .ffn = 16,
                                      .layers = 1, .max_len = 6, .dropout = 0.1};
enum { B = 2, S = 5, T = 4 };
static const int SRC[B * S] = {4, 5, 6, 2, 0, 7, 8, 9, 10, 2};
static const int SRC_VALID[B] = {4, 5};
static const int TGT_IN[B * T] = {1, 4, 5, 6, 1, 7, 8, 2};
static const int TGT_OUT[B * T] = {4, 5, 6, 2, 7, 8, 2, 0};

/* What a successful run leaves behind, to compare with the reference. */
typedef struct outcome {
    double loss[2];      /* the loss of each of two steps */
    unsigned long sum;   /* a hash of every parameter's bits after them */
    int out[B * 6], out_len[B];
} outcome;

static unsigned long hash_store(const ag_store *s)
{
    unsigned long h = 1469598103934665603ul;
    for (int i = 0; i < ag_store_count(s); i++) {
        const ag_tensor *t = ag_store_at(s, i);
        const unsigned char *b = (const unsigned char *)t->data;
        for (size_t k = 0; k < t->size * sizeof(ag_real); k++) h = (h ^ b[k]) * 1099511628211ul;
    }
    return h;
}

/* A failure must say what it is: the status is AG_ERR_NOMEM, or (for the
 * layer constructors, which return AG_ERR_ARG whatever ag_param's reason)
 * the store's message says memory ran out. */
static void expect_nomem(ag_status st, const char *msg, const char *what, long k)
{
    cr_assert_neq(st, AG_OK, "%s: allocation %ld failed but the run succeeded", what, k);
    cr_assert(st == AG_ERR_NOMEM || strstr(msg, "out of memory"),
              "%s: allocation %ld failed: status '%s', message '%s'", what, k, ag_status_name(st), msg);
}

typedef ag_status (*work_fn)(outcome *o, char *msg, size_t msglen);

/* A model of CFG, its weights drawn from seed, in a fresh store *s.  On a
 * failure the status, with what failed in msg; either way the caller frees
 * m and *s (NULL when the store itself could not be made). */
static ag_status model_new(ag_seq2seq *m, ag_store **s, uint64_t seed, char *msg, size_t msglen)
{
    memset(m, 0, sizeof *m);
    if (!(*s = ag_store_new())) {
        snprintf(msg, msglen, "ag_store_new: out of memory");
        return AG_ERR_NOMEM;
    }
    ag_status st = ag_seq2seq_init(m, *s, &CFG, seed);
    if (st != AG_OK) snprintf(msg, msglen, "ag_seq2seq_init: %s", ag_store_error(*s));
    return st;
}

/* Model, optimizer and graph, then two training steps (forward, backward,
 * clipping, Adam), each on a reset graph; with workers > 1, each step's
 * batch split among a team's workers (src/core/team.c). */
static ag_status train_steps_on(int workers, outcome *o, char *msg, size_t msglen)
{
    ag_seq2seq m;
    ag_store *s;
    ag_optim *opt = NULL;
    ag_graph *g = NULL;
    ag_seq2seq_team *team = NULL;
    ag_status st = model_new(&m, &s, 7, msg, msglen);
    if (st != AG_OK) goto done;
    if (workers > 1 && !(team = ag_seq2seq_team_new(&m, s, workers, msg, msglen))) {
        st = AG_ERR_NOMEM;
        goto done;
    }
    if (!(opt = ag_adam_new(s, 1e-3, 0.9, 0.98, 1e-9, 0.01, 1))) {
        snprintf(msg, msglen, "ag_adam_new: %s", ag_store_error(s));
        st = AG_ERR_NOMEM;
        goto done;
    }
    if (!(g = ag_graph_new())) {
        snprintf(msg, msglen, "ag_graph_new: out of memory");
        st = AG_ERR_NOMEM;
        goto done;
    }
    ag_graph_seed(g, 3);
    for (int step = 0; step < 2; step++) {
        ag_graph_reset(g);
        if (team) {
            st = ag_seq2seq_team_step(team, g, SRC, SRC_VALID, TGT_IN, TGT_OUT, B, S, T, &o->loss[step]);
        } else {
            ag_tensor *loss = ag_seq2seq_loss(g, &m, SRC, SRC_VALID, TGT_IN, TGT_OUT, B, S, T);
            if ((st = ag_backward(g, loss)) == AG_OK) o->loss[step] = (double)loss->data[0];
        }
        if (st != AG_OK) {
            snprintf(msg, msglen, "step %d: %s", step, ag_graph_error(g));
            cr_assert_eq(st, ag_graph_status(g));
            goto done;
        }
        double norm;
        if ((st = ag_clip_grad_norm(s, 1.0, &norm)) != AG_OK) {
            snprintf(msg, msglen, "step %d: clip: %s", step, ag_store_error(s));
            goto done;
        }
        if ((st = ag_optim_step(opt)) != AG_OK) {
            snprintf(msg, msglen, "step %d: %s", step, ag_optim_error(opt));
            goto done;
        }
        ag_store_zero_grad(s);
    }
    o->sum = hash_store(s);
done:
    ag_graph_free(g);
    ag_optim_free(opt);
    ag_seq2seq_team_free(team);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    return st;
}

static ag_status train_steps(outcome *o, char *msg, size_t msglen) { return train_steps_on(1, o, msg, msglen); }
static ag_status team_steps(outcome *o, char *msg, size_t msglen) { return train_steps_on(2, o, msg, msglen); }

static char ckpt_path[64];

/* A fresh model saved as a checkpoint over the file at ckpt_path. */
static ag_status save_checkpoint(outcome *o, char *msg, size_t msglen)
{
    ag_seq2seq m;
    ag_store *s;
    ag_status st = model_new(&m, &s, 11, msg, msglen);
    const char *meta[] = {"format", "oom-test", "step", "2"};
    if (st == AG_OK) st = ag_store_save(s, ckpt_path, meta, 2, msg, msglen);
    if (st == AG_OK) o->sum = hash_store(s);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    return st;
}

/* The checkpoint at ckpt_path read into a fresh model. */
static ag_status load_checkpoint(outcome *o, char *msg, size_t msglen)
{
    ag_seq2seq m;
    ag_store *s;
    ag_safetensors *f = NULL;
    ag_status st = model_new(&m, &s, 99, msg, msglen);
    if (st == AG_OK) st = ag_safetensors_load(ckpt_path, &f, msg, msglen);
    if (st == AG_OK) {
        cr_assert_str_eq(ag_safetensors_meta(f, "format"), "oom-test");
        st = ag_store_load(s, f, msg, msglen);
    }
    if (st == AG_OK) o->sum = hash_store(s);
    ag_safetensors_free(f);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    return st;
}

/* Greedy decoding of the two sources with an untrained model. */
static ag_status greedy(outcome *o, char *msg, size_t msglen)
{
    ag_seq2seq m;
    ag_store *s;
    ag_graph *g = NULL;
    ag_status st = model_new(&m, &s, 5, msg, msglen);
    if (st == AG_OK && !(g = ag_graph_new())) {
        snprintf(msg, msglen, "ag_graph_new: out of memory");
        st = AG_ERR_NOMEM;
    }
    if (st == AG_OK) {
        st = ag_seq2seq_greedy(g, &m, SRC, SRC_VALID, B, S, AG_BOS, AG_EOS, 6, o->out, o->out_len);
        snprintf(msg, msglen, "greedy: %s", st == AG_ERR_NOMEM && !ag_graph_status(g) ? "out of memory" : ag_graph_error(g));
    }
    ag_graph_free(g);
    ag_seq2seq_free(&m);
    ag_store_free(s);
    return st;
}

/* Run work with allocation k failing (or every one from k on, fail_all),
 * for k = 0, 1, ... until a run makes no failed allocation; that run must
 * succeed and equal the reference.  Returns the number of failing runs. */
static long sweep(const char *what, work_fn work, int fail_all, const outcome *want,
                  void (*after_failure)(void))
{
    long failures = 0, k;
    for (k = 0; k < 100000; k++) {
        outcome o;
        memset(&o, 0, sizeof o);
        char msg[512] = "";
        long live = oom.live;
        oom_arm(k, fail_all);
        ag_status st = work(&o, msg, sizeof msg);
        long failed = oom.failed;
        oom_arm(-1, 0);
        cr_assert_eq(oom.live, live, "%s: allocation %ld %s: %ld blocks leaked (%s)", what, k,
                     failed ? "failed" : "did not fail", oom.live - live, msg);
        if (!failed) {
            cr_assert_eq(st, AG_OK, "%s: no allocation failed, yet: %s", what, msg);
            cr_assert_eq(memcmp(&o, want, sizeof o), 0, "%s: the result differs from the reference", what);
            break;
        }
        expect_nomem(st, msg, what, k);
        if (after_failure) after_failure();
        failures++;
    }
    cr_assert_gt(failures, 0, "%s: nothing to fail", what);
    cr_log_info("%s: %ld allocations swept (fail_all %d)", what, k, fail_all);
    return failures;
}

/* The reference outcome of work, with the system allocator. */
static outcome reference(work_fn work)
{
    outcome o;
    memset(&o, 0, sizeof o);
    char msg[512] = "";
    cr_assert_eq(work(&o, msg, sizeof msg), AG_OK, "%s", msg);
    return o;
}

/* ---- the sweeps -------------------------------------------------------------------- */

static void sweep_both_ways(const char *what, work_fn work, void (*after_failure)(void))
{
    /* the reference first, with malloc: it also grows any buffer the
     * library keeps between calls (the matrix kernels' packing buffers) */
    outcome want = reference(work);
    oom_install();
    long n = sweep(what, work, 0, &want, after_failure);
    long n_all = sweep(what, work, 1, &want, after_failure);
    cr_assert_eq(n, n_all, "%s: %ld allocations fail one at a time, %ld from the first on", what, n, n_all);
    ag_set_allocator(NULL);
    /* the library still works with the hook removed */
    outcome again = reference(work);
    cr_assert_eq(memcmp(&again, &want, sizeof want), 0, "%s: the result changed after the sweep", what);
}

Test(oom, every_allocation_of_two_training_steps)
{
    sweep_both_ways("training step", train_steps, NULL);
}

Test(oom, every_allocation_of_two_data_parallel_steps)
{
    /* the two workers run one after the other (no thread started), so
     * that the k-th allocation is the same one in every run */
    ag__threads_off = true;
    sweep_both_ways("data-parallel step", team_steps, NULL);
    ag__threads_off = false;
}

Test(oom, every_allocation_of_a_greedy_decode)
{
    sweep_both_ways("greedy decode", greedy, NULL);
}

static unsigned char *ckpt_before;
static size_t ckpt_before_len;

/* A failed save leaves the old checkpoint as it was, and no temporary file. */
static void old_checkpoint_intact(void)
{
    size_t n;
    unsigned char *now = read_file(ckpt_path, &n);
    cr_assert(n == ckpt_before_len && memcmp(now, ckpt_before, n) == 0, "a failed save changed the checkpoint");
    free(now);
    char pattern[160];
    snprintf(pattern, sizeof pattern, "%s.tmp.*", ckpt_path); /* <path>.tmp.<pid>.<random> */
    glob_t found;
    int r = glob(pattern, 0, NULL, &found);
    cr_assert_eq(r, GLOB_NOMATCH, "a failed save left %s behind", r == 0 ? found.gl_pathv[0] : pattern);
    if (r == 0) globfree(&found);
}

Test(oom, every_allocation_of_a_checkpoint_save_and_load)
{
    snprintf(ckpt_path, sizeof ckpt_path, "/tmp/ag_oom_%ld.safetensors", (long)getpid());
    /* an old checkpoint that each failed save must leave alone */
    const char *old = "an old checkpoint";
    write_bytes(ckpt_path, old, strlen(old));
    ckpt_before = read_file(ckpt_path, &ckpt_before_len);
    /* the reference save replaces it: put the old one back for the sweep */
    outcome want = reference(save_checkpoint);
    write_bytes(ckpt_path, ckpt_before, ckpt_before_len);
    oom_install();
    sweep("checkpoint save", save_checkpoint, 0, &want, old_checkpoint_intact);
    ag_set_allocator(NULL);

    /* the last run of the sweep saved it; every load of it may fail too, and
     * then gives the saved parameters */
    outcome saved = want;
    memset(&want, 0, sizeof want);
    want.sum = saved.sum;
    outcome got = reference(load_checkpoint);
    cr_assert_eq(got.sum, saved.sum, "the loaded parameters differ from the saved ones");
    oom_install();
    sweep("checkpoint load", load_checkpoint, 0, &want, NULL);
    sweep("checkpoint load", load_checkpoint, 1, &want, NULL);
    ag_set_allocator(NULL);
    free(ckpt_before);
    unlink(ckpt_path);
}

/* After the first step, a step allocates nothing: the sweep above reaches
 * every allocation there is. */
Test(oom, a_second_step_allocates_nothing)
{
    ag_store *s = ag_store_new();
    ag_seq2seq m;
    cr_assert_eq(ag_seq2seq_init(&m, s, &CFG, 7), AG_OK);
    ag_optim *opt = ag_adam_new(s, 1e-3, 0.9, 0.98, 1e-9, 0, 0);
    ag_graph *g = ag_graph_new();
    uint64_t before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 1) before = ag_alloc_count();
        ag_graph_reset(g);
        ag_tensor *loss = ag_seq2seq_loss(g, &m, SRC, SRC_VALID, TGT_IN, TGT_OUT, B, S, T);
        cr_assert_eq(ag_backward(g, loss), AG_OK, "%s", ag_graph_error(g));
        cr_assert_eq(ag_clip_grad_norm(s, 1.0, NULL), AG_OK);
        cr_assert_eq(ag_optim_step(opt), AG_OK);
        ag_store_zero_grad(s);
    }
    cr_assert_eq(ag_alloc_count(), before, "steps 2 and 3 made %llu allocations",
                 (unsigned long long)(ag_alloc_count() - before));
    ag_graph_free(g);
    ag_optim_free(opt);
    ag_seq2seq_free(&m);
    ag_store_free(s);
}
