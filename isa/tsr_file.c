/* tsr_file: bounded reading of regular files only (see tsr_file.h). */
#include "tsr_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_error.h"

/* What a non-regular file is, for the refusal message. */
static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m))
        return "is a directory";
    if (S_ISFIFO(m))
        return "is a FIFO (named pipe)";
    if (S_ISCHR(m))
        return "is a character device";
    if (S_ISBLK(m))
        return "is a block device";
    if (S_ISSOCK(m))
        return "is a socket";
    return "is a special file";
}

int tsr_file_open(tsr_file_t *f, const char *path, uint64_t max, const char *what)
{
    struct stat st;
    if (!f)
        return tsr_err(TSR_EINVAL, "tsr_file_open: no file given");
    *f = (tsr_file_t){.fd = -1, .path = path, .what = what ? what : "file"};
    if (!path)
        return tsr_err(TSR_EINVAL, "no path given for the %s", f->what);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer; it has no effect on regular files. O_NOCTTY: a terminal
     * device never becomes the controlling terminal. */
    f->fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f->fd < 0) {
        f->sys_errno = errno;
        return tsr_err(TSR_EIO, "%s: cannot open %s: %s", path, f->what, strerror(f->sys_errno));
    }
    int rc = TSR_OK;
    if (fstat(f->fd, &st))
        rc = tsr_err(TSR_EIO, "%s: cannot stat %s: %s", path, f->what, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = tsr_err(TSR_EIO, "%s: %s %s, not a regular file", path, f->what,
                     kind_name(st.st_mode));
    else if (st.st_size < 0 || (uint64_t)st.st_size > max)
        rc = tsr_err(TSR_EBOUNDS, "%s: %s is %llu bytes, more than the %llu allowed", path,
                     f->what, (unsigned long long)st.st_size, (unsigned long long)max);
    if (rc) {
        tsr_file_close(f);
        return rc;
    }
    f->size = (uint64_t)st.st_size;
    return TSR_OK;
}

int tsr_file_read_at(tsr_file_t *f, uint64_t off, void *dst, size_t n, const char *part)
{
    uint8_t *p = dst;
    size_t got = 0;
    if (!f || f->fd < 0 || (n && !dst))
        return tsr_err(TSR_EINVAL, "tsr_file_read_at: no open file or destination given");
    while (got < n) {
        size_t chunk = n - got > (1u << 30) ? (1u << 30) : n - got;
        ssize_t r = pread(f->fd, p + got, chunk, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return tsr_err(TSR_EIO, "%s: read error in the %s of the %s: %s", f->path, part,
                           f->what, strerror(errno));
        if (r == 0)
            return tsr_err(TSR_EIO, "%s: %s shrank while reading its %s (%llu of %zu bytes)",
                           f->path, f->what, part, (unsigned long long)got, n);
        got += (size_t)r;
    }
    return TSR_OK;
}

int tsr_file_check_end(tsr_file_t *f)
{
    uint8_t b;
    ssize_t r;
    if (!f || f->fd < 0)
        return tsr_err(TSR_EINVAL, "tsr_file_check_end: no open file given");
    do
        r = pread(f->fd, &b, 1, (off_t)f->size);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return tsr_err(TSR_EIO, "%s: read error in the %s: %s", f->path, f->what, strerror(errno));
    if (r > 0)
        return tsr_err(TSR_EIO, "%s: %s grew while being read (was %llu bytes)", f->path, f->what,
                       (unsigned long long)f->size);
    return TSR_OK;
}

void tsr_file_close(tsr_file_t *f)
{
    if (f && f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
}

int tsr_file_read_all(tsr_file_t *f, uint8_t **data, size_t *n)
{
    uint8_t *buf = NULL;
    int rc = TSR_OK;
    if (!f || f->fd < 0 || !data || !n) {
        tsr_file_close(f);
        return tsr_err(TSR_EINVAL, "tsr_file_read_all: no open file or output given");
    }
    *data = NULL;
    *n = 0;
    if (f->size > SIZE_MAX - 1) {
        rc = tsr_err(TSR_EBOUNDS, "%s: %s too large for this host", f->path, f->what);
        goto out;
    }
    if (!(buf = malloc((size_t)f->size + 1))) {
        rc = tsr_err(TSR_ENOMEM, "%s: out of memory for the %llu bytes of the %s", f->path,
                     (unsigned long long)f->size, f->what);
        goto out;
    }
    if ((rc = tsr_file_read_at(f, 0, buf, (size_t)f->size, "contents")) ||
        (rc = tsr_file_check_end(f)))
        goto out;
    buf[f->size] = '\0';
    *data = buf;
    *n = (size_t)f->size;
    buf = NULL;
out:
    free(buf);
    tsr_file_close(f);
    return rc;
}

int tsr_file_read(const char *path, uint64_t max, const char *what, uint8_t **data, size_t *n)
{
    tsr_file_t f;
    if (data)
        *data = NULL;
    if (n)
        *n = 0;
    int rc = tsr_file_open(&f, path, max, what);
    return rc ? rc : tsr_file_read_all(&f, data, n);
}

int tsr_file_is_special(const char *path)
{
    struct stat st;
    return path && !stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static int write_piece(int fd, const char *path, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t off = 0; off < n;) {
        const ssize_t w = write(fd, b + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return tsr_err(TSR_EIO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        off += (size_t)w;
    }
    return TSR_OK;
}

int tsr_file_write_special(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return tsr_err(TSR_EIO, "%s: cannot open it for writing: %s", path, strerror(errno));
    int rc = write_piece(fd, path, a, na);
    if (!rc)
        rc = write_piece(fd, path, b, nb);
    if (close(fd) && !rc)
        rc = tsr_err(TSR_EIO, "%s: write failed: %s", path, strerror(errno));
    return rc;
}
