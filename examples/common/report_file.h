/* report_file.h: a program's report (a JSON file) written as a checkpoint
 * is: built in memory (open_memstream), then put at its path in one
 * crash-safe write (ag_file_write), so that a device or FIFO there is
 * refused and a killed run leaves the old file or the whole new one.
 *
 *   report_file r;
 *   if (!report_open(&r, prog, path)) return 1;
 *   fprintf(r.f, "{...}\n");
 *   return report_close(&r, prog);   // 0, or 1 after a message */
#ifndef EXAMPLES_REPORT_FILE_H
#define EXAMPLES_REPORT_FILE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

typedef struct report_file {
    FILE *f;          /* write here */
    char *buf;        /* what was written, once closed */
    size_t len;
    const char *path; /* where it goes */
} report_file;

/* r->f, or NULL after a message. */
static inline FILE *report_open(report_file *r, const char *prog, const char *path)
{
    *r = (report_file){.path = path};
    r->f = open_memstream(&r->buf, &r->len);
    if (!r->f) fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
    return r->f;
}

/* Write what r->f holds to r->path; 0, or 1 after a message. */
static inline int report_close(report_file *r, const char *prog)
{
    char err[512];
    int rc = 0;
    if (fclose(r->f) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, r->path, strerror(errno));
        rc = 1;
    } else if (ag_file_write(r->path, r->buf, r->len, err, sizeof err) != AG_OK) {
        fprintf(stderr, "%s: %s\n", prog, err);
        rc = 1;
    }
    free(r->buf);
    return rc;
}

#endif /* EXAMPLES_REPORT_FILE_H */
