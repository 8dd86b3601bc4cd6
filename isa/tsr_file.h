/*
 * tsr_file: the one way Tessera reads an input file. Every whole-file read
 * (assembly, instruction streams, configs, `.buffer ... file` contents,
 * .npy tensors, kernel cache files) goes through here so that any path a
 * user can name costs bounded work:
 *  - the file is opened with O_NONBLOCK, so a FIFO neither blocks the open
 *    nor a read, and is then refused;
 *  - anything but a regular file (FIFO, device such as /dev/zero,
 *    directory, socket) is refused with a message naming what it is;
 *  - the size is checked against the caller's maximum before any memory
 *    is allocated, and exactly that many bytes are read: a file that
 *    shrinks or grows while being read is an error, not a silent
 *    truncation or an unbounded read.
 * Errors are TSR_EIO (cannot open, not a regular file, read error, changed
 * while read) or TSR_EBOUNDS (larger than the maximum), with a message
 * "PATH: ..." naming the file's role.
 */
#ifndef TSR_FILE_H
#define TSR_FILE_H

#include <stddef.h>
#include <stdint.h>

/* An open input file (see tsr_file_open). */
typedef struct tsr_file {
    int fd;             /* descriptor, -1 when not open */
    uint64_t size;      /* bytes, as fstat reported at open */
    int sys_errno;      /* errno of a failed open (ENOENT: no such file), else 0 */
    const char *path;   /* for messages (not owned) */
    const char *what;   /* the file's role for messages ("config file"; not owned) */
} tsr_file_t;

/* Open path and check it is a regular file of at most max bytes. On error
 * f->fd is -1 (tsr_file_close is still safe) and f->sys_errno tells a
 * missing file apart. */
int tsr_file_open(tsr_file_t *f, const char *path, uint64_t max, const char *what);
/* Read exactly n bytes at offset off into dst; part names them in messages
 * ("header"). A short read means the file shrank after open. */
int tsr_file_read_at(tsr_file_t *f, uint64_t off, void *dst, size_t n, const char *part);
/* TSR_OK if nothing lies past f->size (the file did not grow since open). */
int tsr_file_check_end(tsr_file_t *f);
/* Close (safe on a file that failed to open or is already closed). */
void tsr_file_close(tsr_file_t *f);

/* Read the whole of an open file and close it (also on error): *data
 * (malloc, caller frees) holds *n bytes followed by a NUL, so text can be
 * used as a string. On error *data is NULL and *n is 0. */
int tsr_file_read_all(tsr_file_t *f, uint8_t **data, size_t *n);
/* tsr_file_open + tsr_file_read_all. */
int tsr_file_read(const char *path, uint64_t max, const char *what, uint8_t **data, size_t *n);

/* The write side's one exception. Outputs are written atomically (a
 * temporary file beside the destination, then rename), but renaming over a
 * path that is not a regular file replaces the device, FIFO or socket with a
 * regular file: `-o /dev/null` run as root deleted /dev/null. So: 1 if path
 * (symlinks followed) exists and is neither a regular file nor a directory,
 * else 0; writers write such a path in place with tsr_file_write_special. */
int tsr_file_is_special(const char *path);
/* Write a (na bytes) then b (nb bytes) in place to a special path: opened
 * without O_CREAT or O_TRUNC, no temporary file, no rename, no fsync (a
 * device need not support it). TSR_EIO naming path on failure. */
int tsr_file_write_special(const char *path, const void *a, size_t na, const void *b, size_t nb);

#endif
