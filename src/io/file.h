/* file.h: the library's one file reader and one crash-safe writer, shared
 * by safetensors, the data-file reader (text) and the pictures (viz).
 *
 * Reading: regular files, and pipes and FIFOs read as streams.  The file is
 * opened without blocking (O_NONBLOCK), so a FIFO with no writer is an
 * empty stream at once instead of a hang, a device or a socket is refused,
 * and a directory is refused with EISDIR's message.  A regular file's size
 * comes from fstat before anything is allocated, so a reader can bound its
 * memory by what the file holds (and check a length field against it
 * first); a stream is read into memory to its end, at most the input limit
 * (ag_get_input_limit), and then checked exactly as a file of that content
 * would be.
 *
 * Writing: path ends up holding either its old content or the whole new
 * content, never a mix, whatever happens (a crash, a full disk, a kill):
 *   1. path is refused unless it is missing, a regular file or a symbolic
 *      link (a device such as /dev/full is never replaced);
 *   2. a temporary "<path>.tmp.<pid>.<16 hex digits>" is created beside it
 *      with O_EXCL (a name that exists is never reused, never removed:
 *      another random suffix is drawn);
 *   3. the bytes are written (short writes and EINTR handled), fsync'd, and
 *      the file closed, each checked;
 *   4. it is renamed over path: a symbolic link at path is replaced by the
 *      new file, the file it pointed to is left alone;
 *   5. the directory is fsync'd, so that the rename survives a power cut.
 * On a failure before the rename, the temporary (which this call created)
 * is removed and path is untouched.  A temporary left by a killed process
 * is never removed by a later save: docs/errors.md says how to clean them. */
#ifndef AG_IO_FILE_H
#define AG_IO_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "attograd_core.h"

/* ---- reading ------------------------------------------------------------ */

typedef struct ag__file {
    int fd;
    uint64_t size;    /* bytes, from fstat when opened (0 for a stream) */
    const char *path; /* the caller's, for messages */
    int stream;       /* a pipe or FIFO: its size is known only at its end */
} ag__file;

/* Open the regular file, pipe or FIFO at path (a pipe: "/dev/stdin",
 * bash's <(...) as /dev/fd/N).  AG_ERR_IO with "PATH: No such file or
 * directory" (strerror), "PATH: Is a directory" or "PATH: not a regular
 * file or a pipe (a character device): refused" otherwise; f->fd is then -1
 * and closing it is harmless.  A regular file larger than the input limit
 * (ag_get_input_limit) is refused here. */
ag_status ag__file_open(ag__file *f, const char *path, char *err, size_t errlen);
/* All of f from where it stands to its end (a stream read until its
 * writer closes it, refused once it passes the input limit) into a fresh
 * ag__malloc block of *len + 1 bytes, a NUL after the last. */
ag_status ag__file_read_rest(ag__file *f, char **out, size_t *len, char *err, size_t errlen);
/* Exactly n bytes from the current position into buf; AG_ERR_IO when the
 * file ends sooner (it shrank since it was opened) or a read fails. */
ag_status ag__file_read_exact(ag__file *f, void *buf, size_t n, char *err, size_t errlen);
void ag__file_close(ag__file *f);

/* All of the regular file or stream at path, into a fresh ag__malloc block
 * of *len + 1 bytes (a NUL after the last byte, so text is a string). */
ag_status ag__file_read(const char *path, char **out, size_t *len, char *err, size_t errlen);

/* ---- writing ------------------------------------------------------------ */

typedef struct ag__bytes {
    const void *p;
    size_t n;
} ag__bytes;

/* Replace path with pieces[0] .. pieces[n - 1] one after the other, as the
 * header above says.  Messages start with "WHAT: " when what is not NULL,
 * then name path (and the temporary) and give strerror; only a failure to
 * sync the directory comes after the rename (AG_ERR_IO, path then holds the
 * new content). */
ag_status ag__file_save(const char *what, const char *path, const ag__bytes *pieces, int n, char *err,
                        size_t errlen);

#endif /* AG_IO_FILE_H */
