/* tests/test_kill.c: a checkpoint survives its writer dying, a full disk
 * and a directory that cannot be written.
 *
 * ag_store_save writes a temporary file beside the checkpoint, fsyncs it,
 * renames it over the checkpoint and fsyncs the directory.  So whenever the
 * writer dies, the checkpoint's path holds the complete old file or the
 * complete new one, never a mixture:
 *
 *   - a child process saves a new checkpoint and is killed with SIGKILL at a
 *     random moment of the save, again and again (at least 50 kills that
 *     land while it is saving); after each, the file at the path is loaded
 *     and must be bit for bit the old or the new checkpoint, and give back
 *     exactly the parameters that were saved;
 *   - a save into a file-size limit (RLIMIT_FSIZE, the way a full disk
 *     looks to a writer: EFBIG instead of ENOSPC) fails with an error naming
 *     the file, at every size the limit can cut the file at, and the old
 *     checkpoint survives with no temporary file left behind;
 *   - a save where no file can be created (a directory that is a regular
 *     file, a missing directory, an immutable directory: tests run as root,
 *     so chmod would not stop them) fails with a message and changes
 *     nothing.
 *
 * SIGKILL tests the rename protocol, not the fsyncs: the kernel still
 * writes out what a killed process left in the page cache.  Power loss is
 * what the fsyncs are for, and no test here can cut the power. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "tmpdir.h"

/* ---- helpers ------------------------------------------------------------------------ */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A small model's store: 4 parameters, 33k values, every one a function of
 * `version`, so two versions differ everywhere. */
static ag_store *store_of(int version)
{
    ag_store *s = ag_store_new();
    const char *names[4] = {"encoder.embedding.weight", "encoder.w", "decoder.w", "decoder.bias"};
    const int rows[4] = {64, 32, 32, 1};
    for (int i = 0; i < 4; i++) {
        ag_tensor *t = ag_param(s, names[i], AG_SHAPE(rows[i], 256));
        cr_assert_not_null(t);
        for (size_t k = 0; k < t->size; k++) t->data[k] = (ag_real)(version * 1000 + i) + (ag_real)k / 1024;
    }
    return s;
}

/* The store's values equal those of store_of(version), bit for bit. */
static int store_is(const ag_store *s, int version)
{
    ag_store *want = store_of(version);
    int same = ag_store_count(s) == ag_store_count(want);
    for (int i = 0; same && i < ag_store_count(s); i++) {
        const ag_tensor *a = ag_store_at(s, i), *b = ag_store_at(want, i);
        same = a->size == b->size && memcmp(a->data, b->data, a->size * sizeof(ag_real)) == 0;
    }
    ag_store_free(want);
    return same;
}

static ag_status save_version(const char *path, int version, char *err, size_t errlen)
{
    ag_store *s = store_of(version);
    char v[16];
    snprintf(v, sizeof v, "%d", version);
    const char *meta[] = {"version", v};
    ag_status st = ag_store_save(s, path, meta, 1, err, errlen);
    ag_store_free(s);
    return st;
}

/* Load path and find which version it holds: every tensor must be exactly
 * that version's.  Returns the version, or fails the test. */
static int loaded_version(const char *path)
{
    char err[512];
    ag_safetensors *f;
    cr_assert_eq(ag_safetensors_load(path, &f, err, sizeof err), AG_OK, "the checkpoint does not load: %s", err);
    const char *v = ag_safetensors_meta(f, "version");
    cr_assert_not_null(v);
    int version = atoi(v);
    ag_store *s = store_of(-1);
    cr_assert_eq(ag_store_load(s, f, err, sizeof err), AG_OK, "%s", err);
    cr_assert(store_is(s, version), "the values are not those of version %d", version);
    ag_store_free(s);
    ag_safetensors_free(f);
    return version;
}

/* ---- SIGKILL at random moments of a save --------------------------------------------- */

/* Each round saves the version after the one the file holds, among three
 * (so old and new always differ); their exact bytes are known beforehand
 * (the writer is deterministic). */
enum { VERSIONS = 3 };

Test(kill, a_killed_save_leaves_the_old_or_the_new_checkpoint_whole, .timeout = 120)
{
    char *dir = make_tmpdir("kill"), *path = join(dir, "model.safetensors");
    char err[512];
    unsigned char *bytes[VERSIONS];
    size_t len[VERSIONS];
    double save_times[VERSIONS];
    for (int v = VERSIONS - 1; v >= 0; v--) { /* ends with version 0 at path */
        ag_store *s = store_of(v);
        char vs[16];
        snprintf(vs, sizeof vs, "%d", v);
        const char *meta[] = {"version", vs};
        double t0 = now();
        cr_assert_eq(ag_store_save(s, path, meta, 1, err, sizeof err), AG_OK, "%s", err);
        save_times[v] = now() - t0;
        ag_store_free(s);
        bytes[v] = read_file(path, &len[v]);
    }
    int at = 0; /* the version the file holds */
    /* the kills' time scale: the median of the three saves, then adapted
     * round by round towards the write (see the end of a round), so that
     * on a machine whose speed moves (a loaded CI runner, a sanitizer
     * build) most kills still land while the temporary file is written,
     * and some land after the rename or after the save has finished */
    double lo = fmin(save_times[0], fmin(save_times[1], save_times[2]));
    double hi = fmax(save_times[0], fmax(save_times[1], save_times[2]));
    double save_time = save_times[0] + save_times[1] + save_times[2] - lo - hi, scale = save_time;

    ag_rng rng;
    ag_rng_seed(&rng, 20240601);
    int rounds = 0, killed = 0, mid_write = 0, finished = 0, kept_old = 0, got_new = 0;
    /* go on until the kills are enough of both kinds (a loaded machine
     * lands fewer of them mid-write), within a bound on the rounds */
    while ((killed < 60 || mid_write < 15) && rounds < 1500) {
        rounds++;
        int next = (at + 1) % VERSIONS;
        int ready[2];
        cr_assert_eq(pipe(ready), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) { /* the store first: the kill should land in the save */
            close(ready[0]);
            ag_store *s = store_of(next);
            char vs[16], e[512];
            snprintf(vs, sizeof vs, "%d", next);
            const char *meta[] = {"version", vs};
            if (write(ready[1], "go", 1) != 1) _exit(4);
            _exit(ag_store_save(s, path, meta, 1, e, sizeof e) == AG_OK ? 0 : 3);
        }
        close(ready[1]);
        char c;
        cr_assert_eq(read(ready[0], &c, 1), 1, "the child did not start");
        close(ready[0]);
        /* a moment within (and a little past) a save */
        double delay = ag_rng_uniform(&rng) * 1.2 * scale;
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        int was_killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        cr_assert(was_killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "round %d: the saving child failed (status 0x%x)", rounds, status);

        /* the checkpoint is the old file or the new one, whole, and loads
         * into exactly the parameters of that version */
        size_t n;
        unsigned char *now_bytes = read_file(path, &n);
        int is_old = n == len[at] && memcmp(now_bytes, bytes[at], n) == 0;
        int is_new = n == len[next] && memcmp(now_bytes, bytes[next], n) == 0;
        free(now_bytes);
        cr_assert(is_old || is_new, "round %d: the checkpoint (%zu bytes) is neither the old (%zu) nor the new (%zu)",
                  rounds, n, len[at], len[next]);
        cr_assert_eq(loaded_version(path), is_new ? next : at);
        if (!was_killed) cr_assert(is_new, "round %d: the save finished but the file is the old one", rounds);

        /* a kill before the rename may leave the temporary file behind: the
         * only other entry; it is never the checkpoint */
        char tmp[256];
        int entries = count_entries(dir, tmp, sizeof tmp);
        cr_assert(entries == 1 || (entries == 2 && tmp[0]), "round %d: %d entries in the directory", rounds, entries);
        if (tmp[0]) {
            /* a stale temporary is recognised by its name (docs/errors.md):
             * model.safetensors.tmp.<pid of the killed saver>.<16 hex digits> */
            int tmp_pid = 0, end = 0;
            char hex[17] = "";
            sscanf(tmp, "model.safetensors.tmp.%d.%16[0-9a-f]%n", &tmp_pid, hex, &end);
            cr_assert(tmp_pid == (int)pid && strlen(hex) == 16 && tmp[end] == '\0',
                      "round %d: the temporary '%s' is not named <path>.tmp.%d.<16 hex digits>", rounds, tmp,
                      (int)pid);
            char *p = join(dir, tmp);
            cr_assert_eq(unlink(p), 0);
            free(p);
        }
        /* aim at the write: sooner after a kill past the rename or a save
         * that finished, later after a kill before the temporary existed */
        scale *= !was_killed || is_new ? 0.85 : tmp[0] ? 1.0 : 1.05;
        if (was_killed) {
            killed++;
            mid_write += tmp[0] != 0;
            got_new += is_new;
            kept_old += is_old;
        } else {
            finished++;
        }
        if (is_new) at = next;
    }
    cr_log_info("kill: %d rounds, %d kills (%d while the temporary file existed, %d after the rename), "
                "%d saves finished first; the old file kept %d times; a save takes %.1f ms",
                rounds, killed, mid_write, got_new, finished, kept_old, 1e3 * save_time);
    cr_assert_geq(killed, 50, "only %d of %d rounds killed the save", killed, rounds);
    cr_assert_geq(mid_write, 10, "only %d kills landed while the file was being written", mid_write);
    cr_assert_gt(finished + got_new, 0, "no save ever completed");
    for (int v = 0; v < VERSIONS; v++) free(bytes[v]);
    free(path);
    rm_dir(dir);
}

/* ---- a full disk ------------------------------------------------------------------------ */

/* Save version 1 over path in a child whose files may not grow past limit
 * bytes (SIGXFSZ ignored, so write fails with EFBIG).  Returns the status;
 * the message goes into err. */
static ag_status save_with_limit(const char *path, rlim_t limit, char *err, size_t errlen)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl;
        getrlimit(RLIMIT_FSIZE, &rl);
        rl.rlim_cur = limit;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(5);
        char e[512] = "";
        ag_status st = save_version(path, 1, e, sizeof e);
        unsigned char code = (unsigned char)st;
        if (write(fd[1], &code, 1) != 1 || write(fd[1], e, strlen(e) + 1) < 0) _exit(6);
        _exit(0);
    }
    close(fd[1]);
    unsigned char code = 0xff;
    cr_assert_eq(read(fd[0], &code, 1), 1, "the child reported nothing");
    size_t n = 0;
    for (ssize_t r; n + 1 < errlen && (r = read(fd[0], err + n, errlen - 1 - n)) > 0;) n += (size_t)r;
    err[n] = '\0';
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
    return (ag_status)code;
}

Test(kill, a_full_disk_fails_the_save_and_keeps_the_old_checkpoint)
{
    char *dir = make_tmpdir("kill"), *path = join(dir, "model.safetensors");
    char err[512];
    cr_assert_eq(save_version(path, 0, err, sizeof err), AG_OK, "%s", err);
    size_t old_len, new_len;
    unsigned char *old = read_file(path, &old_len);
    /* the new file's size, from a save elsewhere */
    char *ref = join(dir, "ref.safetensors");
    cr_assert_eq(save_version(ref, 1, err, sizeof err), AG_OK, "%s", err);
    free(read_file(ref, &new_len));
    unlink(ref);
    free(ref);

    /* the limit cuts the new file in its length field, its header, its data
     * and one byte short of its end */
    const rlim_t limits[] = {0, 1, 7, 8, 100, 4096, 65536, new_len / 2, new_len - 1};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        char e[512];
        ag_status st = save_with_limit(path, limits[i], e, sizeof e);
        cr_assert_eq(st, AG_ERR_IO, "limit %lu: %s (%s)", (unsigned long)limits[i], ag_status_name(st), e);
        cr_assert_not_null(strstr(e, path), "limit %lu: the message does not name the file: %s", (unsigned long)limits[i], e);
        cr_assert_not_null(strstr(e, strerror(EFBIG)), "limit %lu: %s", (unsigned long)limits[i], e);
        size_t len;
        unsigned char *now_bytes = read_file(path, &len);
        cr_assert(len == old_len && memcmp(now_bytes, old, len) == 0, "limit %lu: the old checkpoint changed",
                  (unsigned long)limits[i]);
        free(now_bytes);
        cr_assert_eq(count_entries(dir, NULL, 0), 1, "limit %lu: a temporary file was left", (unsigned long)limits[i]);
        cr_assert_eq(loaded_version(path), 0);
    }
    /* room for exactly the new file: the save goes through */
    cr_assert_eq(save_with_limit(path, new_len, err, sizeof err), AG_OK, "%s", err);
    cr_assert_eq(loaded_version(path), 1);
    cr_assert_eq(count_entries(dir, NULL, 0), 1);
    free(old);
    free(path);
    rm_dir(dir);
}

/* ---- nowhere to write ------------------------------------------------------------------- */

static void expect_save_fails(const char *path, const char *why)
{
    char err[512];
    cr_assert_eq(save_version(path, 1, err, sizeof err), AG_ERR_IO, "%s: %s", path, err);
    cr_assert_not_null(strstr(err, path), "the message does not name the file: %s", err);
    cr_assert_not_null(strstr(err, why), "'%s' not in: %s", why, err);
}

Test(kill, an_unwritable_directory_fails_the_save_and_changes_nothing)
{
    char *dir = make_tmpdir("kill");
    char err[512];

    /* the "directory" is a regular file (the old checkpoint itself) */
    char *file = join(dir, "model.safetensors"), *under = join(dir, "model.safetensors/x.safetensors");
    cr_assert_eq(save_version(file, 0, err, sizeof err), AG_OK, "%s", err);
    expect_save_fails(under, strerror(ENOTDIR));
    cr_assert_eq(loaded_version(file), 0);

    /* a directory that does not exist */
    char *missing = join(dir, "no/such/dir/model.safetensors");
    expect_save_fails(missing, strerror(ENOENT));
    cr_assert_eq(count_entries(dir, NULL, 0), 1);

    /* an immutable directory holding the old checkpoint: even root cannot
     * create the temporary file in it (where the file system allows the
     * flag; tmpfs does not) */
    char *locked = join(dir, "locked"), *inside = join(dir, "locked/model.safetensors");
    cr_assert_eq(mkdir(locked, 0755), 0);
    cr_assert_eq(save_version(inside, 0, err, sizeof err), AG_OK, "%s", err);
    int fd = open(locked, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(fd, 0);
    int flags = 0, locked_ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (locked_ok) {
        int on = flags | FS_IMMUTABLE_FL;
        locked_ok = ioctl(fd, FS_IOC_SETFLAGS, &on) == 0;
    }
    if (locked_ok) {
        ag_status st = save_version(inside, 1, err, sizeof err);
        ioctl(fd, FS_IOC_SETFLAGS, &flags); /* unlock before any assertion */
        close(fd);
        cr_assert_eq(st, AG_ERR_IO, "%s", err);
        cr_assert_not_null(strstr(err, "cannot create the temporary file"), "%s", err);
        cr_assert_not_null(strstr(err, strerror(EPERM)), "%s", err);
        cr_assert_eq(loaded_version(inside), 0);
        cr_assert_eq(count_entries(locked, NULL, 0), 1);
    } else {
        close(fd);
        cr_log_warn("immutable directories are not supported here (%s): that case is skipped", strerror(errno));
    }
    cr_assert_eq(unlink(inside), 0);
    cr_assert_eq(rmdir(locked), 0);
    free(inside);
    free(locked);
    free(missing);
    free(under);
    free(file);
    rm_dir(dir);
}
