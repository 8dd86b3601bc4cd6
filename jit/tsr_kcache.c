/*
 * tsr_kcache: the JIT kernel cache (see tsr_kcache.h for what is cached
 * and why). Why this shape:
 *   - entries are reference counted and the LRU list holds one reference,
 *     so eviction never pulls a uop buffer from under a live plan;
 *   - the memory index is a plain list searched by hash: caches hold tens to
 *     hundreds of kernels, and a lookup is dwarfed by the plan around it;
 *   - the file format is explicit little-endian with a trailing checksum and
 *     the whole signature inside, so nothing read from disk is trusted until
 *     every byte has been checked (a hash collision of file names is caught
 *     by the signature compare, a stale generator by the signature's
 *     generator identity, a stale config by the config hash).
 *
 * File layout (all integers little-endian):
 *   0  "TSRKCACH"        8 bytes magic
 *   8  u32 version       TSR_KCACHE_FORMAT_VERSION
 *   12 u32 header bytes  64
 *   16 u64 config hash   tsr_kcache_config_hash
 *   (56: the hash of tsr_kcache_source_id(), which also enters the file name:
 *   every jit/ and isa/ source, so another build's kernels are never used)
 *   24 u64 gen_ns        generation time of the kernel
 *   32 u32 sig_len, 36 u32 meta_len, 40 u32 ninsns, 44 u32 nuops
 *   48 u32 uop_bytes, 52 u32 insn_bytes (16), 56 u64 source hash
 *   64 signature, metadata, instructions (encoded, 16 bytes each), uops
 *   then u64 FNV-1a 64 of every byte before it.
 */
#include "tsr_kcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_cachedir.h"
#include "tsr_error.h"
#include "tsr_file.h"
#include "tsr_jitutil.h"

#define HDR_BYTES 64u
#define MAX_FILE_BYTES (512ull << 20)
#define MAX_META (1u << 20)

struct tsr_kcache_entry {
    struct tsr_kcache *kc;        /* cache listing the entry; NULL once detached */
    tsr_device_t *dev;            /* device holding the uop buffer */
    struct tsr_kcache_entry *prev; /* LRU list neighbours (prev = more recently used) */
    struct tsr_kcache_entry *next;
    uint64_t hash;                /* hash of the signature */
    uint8_t *sig;                 /* signature (owned) */
    size_t sig_len;               /* its bytes */
    tsr_kernel_t k;               /* metadata and stream (owned copies; uops NULL) */
    uint64_t uop_addr;            /* device buffer of the uops (owned; 0 = none) */
    uint64_t bytes;               /* bytes accounted against the cache's bound */
    int refs;                     /* references: the list's plus one per holder */
};

/* A memo entry: a search result of a lowering under its key. */
struct tsr_kcache_memo {
    struct tsr_kcache_memo *next; /* list, newest first */
    size_t key_len, val_len;      /* sizes of the key and value that follow */
    uint8_t data[];               /* key, then value */
};

struct tsr_kcache {
    tsr_device_t *dev;            /* the device the cache is attached to */
    struct tsr_kcache_memo *memo; /* search results (tsr_kcache_memo_put), in memory only */
    int nmemo;                    /* entries in memo */
    size_t memo_bytes;            /* their keys and values */
    tsr_kcache_opts_t o;          /* options, defaults filled in */
    char dir[1024];               /* on-disk directory ("" = none) */
    uint64_t cfg_hash;            /* identity of the device's config */
    uint64_t src_hash;            /* identity of the JIT's sources (tsr_kcache_source_id) */
    struct tsr_kcache_entry *head, *tail; /* LRU list, most recent first */
    tsr_kcache_stats_t st;        /* counters */
    uint64_t written;             /* file bytes written since the last prune of the directory (a prune
                                     runs at the first write and after every eighth of the budget) */
    int pruned;                   /* the directory was pruned at least once */
    unsigned tmp_seq;             /* sequence number of temporary file names */
};

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void warn(const tsr_kcache_t *kc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(const tsr_kcache_t *kc, const char *fmt, ...)
{
    if (kc->o.quiet)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tsr_notice("warning: jit cache: %s", line);
}

/* ------------------------------------------------------------ helpers */

/* Generated (scripts/source_id.cmake, build/gen/tsr_kcache_srcid.c). */
extern const char tsr_kcache_source_id_str[];

const char *tsr_kcache_source_id(void) { return tsr_kcache_source_id_str; }

uint64_t tsr_kcache_config_hash(const tsr_config_t *c)
{
    int32_t keys[64]; /* every key the config is parsed from (tsr_config_key_values: its one key table) */
    const size_t n = tsr_config_key_values(c, keys, 64);
    uint8_t b[4 * 64];
    for (size_t i = 0; i < n && i < 64; i++)
        put32(b + 4 * i, (uint32_t)keys[i]);
    return fnv(FNV0, b, 4 * (n < 64 ? n : 64));
}

size_t tsr_kcache_sig_i32(uint8_t *sig, size_t len, int32_t v)
{
    uint8_t b[4];
    put32(b, (uint32_t)v);
    return tsr_kcache_sig_bytes(sig, len, b, 4);
}

size_t tsr_kcache_sig_bytes(uint8_t *sig, size_t len, const void *p, size_t n)
{
    if (len <= TSR_KCACHE_MAX_SIG && n <= TSR_KCACHE_MAX_SIG - len)
        memcpy(sig + len, p, n);
    return len + n;
}

int tsr_kcache_relocate(const tsr_config_t *cfg, tsr_insn_t *insns, size_t n, const uint64_t base[TSR_MEM_COUNT])
{
    return tsr_kcache_relocate_slots(cfg, insns, n, NULL, 1, (const uint64_t(*)[TSR_MEM_COUNT])base);
}

int tsr_kcache_fetch(tsr_kcache_t *kc, const void *sig, size_t sig_len,
                     int (*fits)(const tsr_kernel_t *k, void *ctx), int (*gen)(void *ctx, tsr_kcache_ref_t **ref),
                     void *ctx, tsr_kcache_ref_t **ref, int *status)
{
    int rc = tsr_kcache_lookup(kc, sig, sig_len, ref);
    if (rc < 0)
        return rc;
    *status = rc == 1 ? TSR_KC_HIT : rc == 2 ? TSR_KC_DISK : TSR_KC_MISS;
    if (*ref && (rc = fits(tsr_kcache_kernel(*ref), ctx)) <= 0) {
        tsr_kcache_release(*ref);
        *ref = NULL;
        *status = TSR_KC_MISS;
        if (rc < 0)
            return rc;
    }
    if (!*ref) {
        if ((rc = gen(ctx, ref)))
            return rc;
        if (tsr_kcache_options(kc)->disabled)
            *status = TSR_KC_NONE;
    }
    return TSR_OK;
}

int tsr_kcache_bind(const tsr_config_t *cfg, const tsr_kcache_ref_t *ref, tsr_insn_t *dst, uint64_t uop, uint64_t inp,
                    uint64_t wgt, uint64_t acc, uint64_t out)
{
    const tsr_kernel_t *k = tsr_kcache_kernel(ref);
    memcpy(dst, k->insns, k->ninsns * sizeof *dst);
    uint64_t base[TSR_MEM_COUNT] = {0};
    base[TSR_MEM_UOP] = uop;
    base[TSR_MEM_INP] = inp;
    base[TSR_MEM_WGT] = wgt;
    base[TSR_MEM_ACC] = acc;
    base[TSR_MEM_OUT] = out;
    return tsr_kcache_relocate(cfg, dst, k->ninsns, base);
}

int tsr_kcache_relocate_slots(const tsr_config_t *cfg, tsr_insn_t *insns, size_t n, const uint8_t *slot, int nslots,
                              const uint64_t base[][TSR_MEM_COUNT])
{
    const long lmax = tsr_isa_field_max(cfg, TSR_OP_LOAD, "dram_base");
    const uint64_t fmax = lmax > 0 && (uint64_t)lmax < UINT32_MAX ? (uint64_t)lmax : UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        tsr_insn_t *in = &insns[i];
        if (in->opcode != TSR_OP_LOAD && in->opcode != TSR_OP_STORE)
            continue;
        if (in->x_size == 0) /* transfers nothing: a token carrier */
            continue;
        const int sl = slot ? slot[i] : 0;
        if (sl >= nslots)
            return tsr_err(TSR_EINVAL, "relocate: instruction %zu names buffer slot %d of %d", i, sl, nslots);
        uint32_t m = in->opcode == TSR_OP_STORE ? (uint32_t)TSR_MEM_OUT : in->mem_type;
        uint32_t eb = m < TSR_MEM_COUNT ? tsr_config_elem_bytes(cfg, (int)m) : 0;
        if (!eb || base[sl][m] % eb)
            return tsr_err(TSR_EINVAL, "relocate: instruction %zu: buffer of memory type %u at 0x%llx is not "
                           "aligned to its %u-byte elements", i, m, (unsigned long long)base[sl][m], eb);
        uint64_t v = (uint64_t)in->dram_base + base[sl][m] / eb;
        if (v > fmax)
            return tsr_err(TSR_EBOUNDS, "relocate: instruction %zu: DRAM element %llu does not fit dram_base", i,
                           (unsigned long long)v);
        in->dram_base = (uint32_t)v;
    }
    return TSR_OK;
}

/* ------------------------------------------------------------ entries */

static void entry_destroy(struct tsr_kcache_entry *e)
{
    if (e->uop_addr)
        tsr_mem_free(e->dev, e->uop_addr);
    free(e->sig);
    free((void *)e->k.meta);
    free((void *)e->k.insns);
    free(e);
}

void tsr_kcache_release(tsr_kcache_ref_t *e)
{
    if (e && --e->refs == 0)
        entry_destroy(e);
}

static void unlink_entry(tsr_kcache_t *kc, struct tsr_kcache_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        kc->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        kc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(tsr_kcache_t *kc, struct tsr_kcache_entry *e)
{
    e->prev = NULL;
    e->next = kc->head;
    if (kc->head)
        kc->head->prev = e;
    kc->head = e;
    if (!kc->tail)
        kc->tail = e;
}

/* Drop the list's reference to e. */
static void detach(tsr_kcache_t *kc, struct tsr_kcache_entry *e)
{
    unlink_entry(kc, e);
    kc->st.entries--;
    kc->st.bytes -= e->bytes;
    e->kc = NULL;
    tsr_kcache_release(e);
}

/* Evict least recently used entries (never keep) until within bounds. */
static void enforce_bounds(tsr_kcache_t *kc, const struct tsr_kcache_entry *keep)
{
    while (kc->st.entries > kc->o.max_entries || kc->st.bytes > kc->o.max_bytes) {
        struct tsr_kcache_entry *v = kc->tail;
        if (v == keep)
            v = v->prev;
        if (!v)
            break;
        detach(kc, v);
        kc->st.evictions++;
    }
}

/* A new entry holding copies of sig/meta/insns and a device buffer with the
 * uops (raw: nuops * uop_bytes bytes). refs = 1 (the caller's). */
static int entry_new(tsr_kcache_t *kc, const void *sig, size_t sig_len, const void *meta, size_t meta_len,
                     const tsr_insn_t *insns, size_t ninsns, const uint8_t *uops, size_t nuops, uint64_t gen_ns,
                     struct tsr_kcache_entry **out)
{
    const tsr_config_t *c = tsr_device_config(kc->dev);
    int rc = TSR_OK;
    struct tsr_kcache_entry *e = calloc(1, sizeof *e);
    if (!e)
        return tsr_err(TSR_ENOMEM, "out of memory");
    e->dev = kc->dev;
    e->refs = 1;
    e->hash = fnv(FNV0, sig, sig_len);
    e->sig = malloc(sig_len ? sig_len : 1);
    void *m = malloc(meta_len ? meta_len : 1);
    tsr_insn_t *v = malloc((ninsns ? ninsns : 1) * sizeof *v);
    e->k.meta = m;
    e->k.insns = v;
    if (!e->sig || !m || !v) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(e->sig, sig, sig_len);
    e->sig_len = sig_len;
    if (meta_len)
        memcpy(m, meta, meta_len);
    e->k.meta_len = meta_len;
    if (ninsns)
        memcpy(v, insns, ninsns * sizeof *v);
    e->k.ninsns = ninsns;
    e->k.nuops = nuops;
    e->k.gen_ns = gen_ns;
    uint64_t ub = (uint64_t)nuops * c->uop_bytes;
    if (ub) {
        if ((rc = tsr_mem_alloc(kc->dev, ub, &e->uop_addr))) {
            e->uop_addr = 0;
            goto fail;
        }
        if ((rc = tsr_mem_write(kc->dev, e->uop_addr, uops, ub)))
            goto fail;
    }
    e->bytes = sizeof *e + sig_len + meta_len + ninsns * sizeof *v + ub;
    *out = e;
    return TSR_OK;
fail:
    entry_destroy(e);
    return rc;
}

/* ------------------------------------------------------------ files */

static void file_name(const tsr_kcache_t *kc, const void *sig, size_t sig_len, char *buf, size_t n)
{
    uint8_t hb[8];
    put64(hb, kc->cfg_hash);
    uint64_t h = fnv(fnv(FNV0, hb, 8), sig, sig_len);
    put64(hb, kc->src_hash);
    h = fnv(h, hb, 8);
    snprintf(buf, n, "%s/%016llx.tkc", kc->dir, (unsigned long long)h);
}

int tsr_kcache_file(const tsr_kcache_t *kc, const void *sig, size_t sig_len, char *buf, size_t n)
{
    if (!kc || !buf || !n)
        return tsr_err(TSR_EINVAL, "jit cache: NULL argument");
    buf[0] = 0;
    if (kc->dir[0])
        file_name(kc, sig, sig_len, buf, n);
    return TSR_OK;
}

static int mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

typedef struct {
    char name[300]; /* file name in the directory */
    time_t mtime;   /* last use */
    off_t size;     /* bytes */
} dent_t;

static int by_mtime(const void *a, const void *b)
{
    const dent_t *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Delete least recently used files until the directory is within 3/4 of
 * its budget (when it exceeds the budget). Best effort. */
static void prune_dir(const tsr_kcache_t *kc)
{
    DIR *d = opendir(kc->dir);
    if (!d)
        return;
    dent_t *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    char path[1400];
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || l >= sizeof v->name || strcmp(de->d_name + l - 4, ".tkc"))
            continue;
        snprintf(path, sizeof path, "%s/%s", kc->dir, de->d_name);
        struct stat sb;
        if (stat(path, &sb))
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            dent_t *nv = realloc(v, nc * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].mtime = sb.st_mtime;
        v[n].size = sb.st_size;
        total += (uint64_t)sb.st_size;
        n++;
    }
    closedir(d);
    if (total > kc->o.max_disk_bytes && v) {
        qsort(v, n, sizeof *v, by_mtime);
        for (size_t i = 0; i < n && total > kc->o.max_disk_bytes / 4 * 3; i++) {
            snprintf(path, sizeof path, "%s/%s", kc->dir, v[i].name);
            if (!unlink(path))
                total -= (uint64_t)v[i].size;
        }
    }
    free(v);
}

/* Write the cache file of e (uops: its raw bytes). Failures are warnings. */
static void write_file(tsr_kcache_t *kc, const struct tsr_kcache_entry *e, const uint8_t *uops)
{
    const tsr_config_t *c = tsr_device_config(kc->dev);
    char path[1100], tmp[1200];
    file_name(kc, e->sig, e->sig_len, path, sizeof path);
    uint64_t ub = (uint64_t)e->k.nuops * c->uop_bytes;
    uint64_t size = HDR_BYTES + e->sig_len + e->k.meta_len + (uint64_t)e->k.ninsns * TSR_INSN_BYTES + ub + 8;
    if (size > MAX_FILE_BYTES || e->k.ninsns > UINT32_MAX || e->k.nuops > UINT32_MAX)
        return;
    uint8_t *b = malloc((size_t)size);
    if (!b)
        return;
    memcpy(b, "TSRKCACH", 8);
    put32(b + 8, TSR_KCACHE_FORMAT_VERSION);
    put32(b + 12, HDR_BYTES);
    put64(b + 16, kc->cfg_hash);
    put64(b + 24, e->k.gen_ns);
    put32(b + 32, (uint32_t)e->sig_len);
    put32(b + 36, (uint32_t)e->k.meta_len);
    put32(b + 40, (uint32_t)e->k.ninsns);
    put32(b + 44, (uint32_t)e->k.nuops);
    put32(b + 48, c->uop_bytes);
    put32(b + 52, TSR_INSN_BYTES);
    put64(b + 56, kc->src_hash);
    uint8_t *p = b + HDR_BYTES;
    memcpy(p, e->sig, e->sig_len);
    p += e->sig_len;
    if (e->k.meta_len)
        memcpy(p, e->k.meta, e->k.meta_len);
    p += e->k.meta_len;
    for (size_t i = 0; i < e->k.ninsns; i++, p += TSR_INSN_BYTES) {
        tsr_insn_bits_t bits;
        if (tsr_insn_encode(c, &e->k.insns[i], &bits)) {
            /* unencodable (should not happen: lowerings encode-check) */
            tsr_err_clear();
            free(b);
            return;
        }
        tsr_insn_bits_store(&bits, p);
    }
    if (ub)
        memcpy(p, uops, (size_t)ub);
    p += ub;
    put64(p, fnv(FNV0, b, (size_t)(p - b)));
    int fd = -1;
    if (mkdirs(kc->dir)) {
        warn(kc, "cannot create %s: %s (kernels are not persisted)", kc->dir, strerror(errno));
        goto out;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p.%u", path, (long)getpid(), (void *)kc, kc->tmp_seq++);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        warn(kc, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, b + off, (size_t)(size - off));
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            warn(kc, "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(tmp);
            goto out;
        }
        off += (size_t)w;
    }
    if (close(fd) || rename(tmp, path)) {
        warn(kc, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    kc->st.disk_writes++;
    kc->written += size;
    if (!kc->pruned || kc->written > kc->o.max_disk_bytes / 8) {
        kc->pruned = 1;
        kc->written = 0;
        prune_dir(kc);
    }
out:
    free(b);
}

/* Read the whole file; 1 = read, 0 = no file, -1 = unreadable (the reason,
 * e.g. not a regular file or larger than MAX_FILE_BYTES, in why[whylen]). */
static int slurp(const char *path, uint8_t **data, size_t *n, char *why, size_t whylen)
{
    tsr_file_t f;
    int rc = tsr_file_open(&f, path, MAX_FILE_BYTES, "kernel cache file");
    if (!rc)
        rc = tsr_file_read_all(&f, data, n);
    if (!rc)
        return 1;
    /* The message starts "PATH: "; the caller's warning names the path. */
    const char *m = tsr_errmsg();
    size_t pl = strlen(path);
    if (!strncmp(m, path, pl) && !strncmp(m + pl, ": ", 2))
        m += pl + 2;
    snprintf(why, whylen, "%s", m);
    tsr_err_clear(); /* a cache miss, not an error of the caller */
    return f.sys_errno == ENOENT ? 0 : -1;
}

/* Validate a file's bytes for sig; on success fill the pointers into b and
 * return NULL, else return the reason. */
static const char *parse_file(const tsr_kcache_t *kc, const uint8_t *b, size_t n, const void *sig, size_t sig_len,
                              const uint8_t **meta, size_t *meta_len, const uint8_t **insns, size_t *ninsns,
                              const uint8_t **uops, size_t *nuops, uint64_t *gen_ns)
{
    const tsr_config_t *c = tsr_device_config(kc->dev);
    if (n < HDR_BYTES + 8)
        return "truncated (shorter than the header)";
    if (memcmp(b, "TSRKCACH", 8))
        return "not a Tessera kernel cache file (bad magic)";
    if (get32(b + 8) != TSR_KCACHE_FORMAT_VERSION)
        return "stale (another format version)";
    if (get32(b + 12) != HDR_BYTES || get32(b + 52) != TSR_INSN_BYTES)
        return "corrupted header";
    uint64_t sl = get32(b + 32), ml = get32(b + 36), ni = get32(b + 40), nu = get32(b + 44);
    uint64_t ub = get32(b + 48);
    if (ub != c->uop_bytes)
        return "stale (written for another config: uop size differs)";
    uint64_t want = HDR_BYTES + sl + ml + ni * TSR_INSN_BYTES + nu * ub + 8;
    if (sl > TSR_KCACHE_MAX_SIG || ml > MAX_META || want > MAX_FILE_BYTES)
        return "corrupted header (impossible sizes)";
    if (n < want)
        return "truncated";
    if (n > want)
        return "trailing bytes after the checksum";
    if (get64(b + want - 8) != fnv(FNV0, b, (size_t)(want - 8)))
        return "checksum mismatch (corrupted)";
    if (get64(b + 16) != kc->cfg_hash)
        return "stale (written for another config)";
    if (get64(b + 56) != kc->src_hash)
        return "stale (written by another build of the JIT's sources)";
    if (sl != sig_len || memcmp(b + HDR_BYTES, sig, sig_len))
        return "stale (another signature or generator version under this name)";
    if (nu > c->uop_depth)
        return "more uops than the uop buffer holds";
    *meta = b + HDR_BYTES + sl;
    *meta_len = (size_t)ml;
    *insns = *meta + ml;
    *ninsns = (size_t)ni;
    *uops = *insns + ni * TSR_INSN_BYTES;
    *nuops = (size_t)nu;
    *gen_ns = get64(b + 24);
    return NULL;
}

/* Try the cache file of sig: 1 = entry created (*out, refs 1), 0 = none
 * (missing or rejected), < 0 = error. */
static int load_file(tsr_kcache_t *kc, const void *sig, size_t sig_len, struct tsr_kcache_entry **out)
{
    const tsr_config_t *c = tsr_device_config(kc->dev);
    char path[1100];
    file_name(kc, sig, sig_len, path, sizeof path);
    uint8_t *b = NULL;
    size_t n = 0;
    char whybuf[512];
    const char *why = whybuf;
    tsr_insn_t *v = NULL;
    int rc = slurp(path, &b, &n, whybuf, sizeof whybuf);
    if (rc <= 0)
        goto reject;
    const uint8_t *meta, *ib, *uops;
    size_t meta_len, ninsns, nuops;
    uint64_t gen_ns;
    if ((why = parse_file(kc, b, n, sig, sig_len, &meta, &meta_len, &ib, &ninsns, &uops, &nuops, &gen_ns))) {
        rc = -1;
        goto reject;
    }
    v = malloc((ninsns ? ninsns : 1) * sizeof *v);
    if (!v) {
        rc = tsr_err(TSR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ninsns; i++) {
        tsr_insn_bits_t bits;
        tsr_insn_bits_load(ib + i * TSR_INSN_BYTES, &bits);
        if (tsr_insn_decode(c, &bits, &v[i])) {
            tsr_err_clear();
            why = "an instruction does not decode";
            rc = -1;
            goto reject;
        }
    }
    rc = entry_new(kc, sig, sig_len, meta, meta_len, v, ninsns, uops, nuops, gen_ns, out);
    if (!rc) {
        rc = 1;
        utimensat(AT_FDCWD, path, NULL, 0); /* recently used: last to be pruned */
    }
    goto out;
reject:
    if (rc < 0) {
        kc->st.disk_rejects++;
        warn(kc, "%s: %s; discarded, the kernel is regenerated", path, why);
        unlink(path);
    }
    rc = 0;
out:
    free(v);
    free(b);
    return rc;
}

/* ------------------------------------------------------------ cache */

static void dtor(tsr_device_t *dev, void *ext)
{
    (void)dev;
    tsr_kcache_free(ext);
}

int tsr_kcache_create(tsr_device_t *dev, const tsr_kcache_opts_t *opts, tsr_kcache_t **out)
{
    if (!dev || !out)
        return tsr_err(TSR_EINVAL, "jit cache: NULL device or result");
    *out = NULL;
    tsr_kcache_t *kc = calloc(1, sizeof *kc);
    if (!kc)
        return tsr_err(TSR_ENOMEM, "out of memory");
    kc->dev = dev;
    if (opts)
        kc->o = *opts;
    if (!kc->o.max_entries)
        kc->o.max_entries = TSR_KCACHE_DEFAULT_ENTRIES;
    if (!kc->o.max_bytes)
        kc->o.max_bytes = TSR_KCACHE_DEFAULT_BYTES;
    if (!kc->o.max_disk_bytes)
        kc->o.max_disk_bytes = TSR_KCACHE_DEFAULT_DISK_BYTES;
    kc->cfg_hash = tsr_kcache_config_hash(tsr_device_config(dev));
    kc->src_hash = fnv(FNV0, tsr_kcache_source_id(), strlen(tsr_kcache_source_id()));
    if (kc->o.disabled)
        kc->dir[0] = 0;
    else if (kc->o.dir) {
        if (strlen(kc->o.dir) >= sizeof kc->dir - 32) {
            free(kc);
            return tsr_err(TSR_EINVAL, "jit cache: directory name too long");
        }
        snprintf(kc->dir, sizeof kc->dir, "%s", kc->o.dir);
    } else {
        char base[900];
        snprintf(kc->dir, sizeof kc->dir, "%s/jit", tsr_cache_dir(base, sizeof base));
    }
    kc->o.dir = NULL; /* the caller's string is not kept */
    tsr_kcache_t *old = tsr_device_ext(dev);
    if (old) /* the slot holds only caches (tsr_kcache_get/create) */
        tsr_kcache_free(old);
    tsr_device_set_ext(dev, kc, dtor);
    *out = kc;
    return TSR_OK;
}

tsr_kcache_t *tsr_kcache_get(tsr_device_t *dev)
{
    tsr_kcache_t *kc = tsr_device_ext(dev);
    if (kc)
        return kc;
    tsr_kcache_opts_t o = {0};
    const char *env = getenv("TESSERA_JIT_CACHE");
    if (env && (!strcmp(env, "off") || !strcmp(env, "0")))
        o.disabled = 1;
    else if (env && !strcmp(env, "mem"))
        o.dir = "";
    else if (getenv("TESSERA_JIT_CACHE_DIR") && *getenv("TESSERA_JIT_CACHE_DIR"))
        o.dir = getenv("TESSERA_JIT_CACHE_DIR");
    if (tsr_kcache_create(dev, &o, &kc))
        return NULL;
    return kc;
}

void tsr_kcache_free(tsr_kcache_t *kc)
{
    if (!kc)
        return;
    while (kc->head)
        detach(kc, kc->head);
    while (kc->memo) {
        struct tsr_kcache_memo *m = kc->memo;
        kc->memo = m->next;
        free(m);
    }
    if (tsr_device_ext(kc->dev) == kc)
        tsr_device_set_ext(kc->dev, NULL, NULL);
    free(kc);
}

static struct tsr_kcache_entry *find(tsr_kcache_t *kc, const void *sig, size_t sig_len)
{
    uint64_t h = fnv(FNV0, sig, sig_len);
    for (struct tsr_kcache_entry *e = kc->head; e; e = e->next)
        if (e->hash == h && e->sig_len == sig_len && !memcmp(e->sig, sig, sig_len))
            return e;
    return NULL;
}

static int check_sig(const void *sig, size_t sig_len)
{
    if (!sig || !sig_len || sig_len > TSR_KCACHE_MAX_SIG)
        return tsr_err(TSR_EINVAL, "jit cache: signature of %zu bytes (1..%d)", sig_len, TSR_KCACHE_MAX_SIG);
    return TSR_OK;
}

static void add_saved(tsr_kcache_t *kc, const struct tsr_kcache_entry *e, uint64_t t0)
{
    uint64_t dt = tsr_mono_ns() - t0;
    if (e->k.gen_ns > dt)
        kc->st.saved_ns += e->k.gen_ns - dt;
}

int tsr_kcache_has(tsr_kcache_t *kc, const void *sig, size_t sig_len)
{
    if (!kc || kc->o.disabled || check_sig(sig, sig_len)) {
        tsr_err_clear();
        return 0;
    }
    if (find(kc, sig, sig_len))
        return 1;
    char path[1200];
    return kc->dir[0] && tsr_kcache_file(kc, sig, sig_len, path, sizeof path) == TSR_OK && path[0] &&
           access(path, R_OK) == 0;
}

int tsr_kcache_lookup(tsr_kcache_t *kc, const void *sig, size_t sig_len, tsr_kcache_ref_t **ref)
{
    if (!kc || !ref)
        return tsr_err(TSR_EINVAL, "jit cache: NULL cache or result");
    *ref = NULL;
    int rc = check_sig(sig, sig_len);
    if (rc)
        return rc;
    if (kc->o.disabled) {
        kc->st.misses++;
        return 0;
    }
    uint64_t t0 = tsr_mono_ns();
    struct tsr_kcache_entry *e = find(kc, sig, sig_len);
    if (e) {
        unlink_entry(kc, e);
        push_front(kc, e);
        e->refs++;
        *ref = e;
        kc->st.hits++;
        add_saved(kc, e, t0);
        return 1;
    }
    if (kc->dir[0]) {
        rc = load_file(kc, sig, sig_len, &e);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            e->kc = kc;
            e->refs++; /* the list's */
            push_front(kc, e);
            kc->st.entries++;
            kc->st.bytes += e->bytes;
            enforce_bounds(kc, e);
            *ref = e;
            kc->st.disk_hits++;
            add_saved(kc, e, t0);
            return 2;
        }
    }
    kc->st.misses++;
    return 0;
}

int tsr_kcache_insert(tsr_kcache_t *kc, const void *sig, size_t sig_len, const tsr_kernel_t *k,
                      tsr_kcache_ref_t **ref)
{
    if (!kc || !k || !ref)
        return tsr_err(TSR_EINVAL, "jit cache: NULL argument");
    *ref = NULL;
    int rc = check_sig(sig, sig_len);
    if (rc)
        return rc;
    if ((k->ninsns && !k->insns) || (k->nuops && !k->uops) || (k->meta_len && !k->meta) || k->meta_len > MAX_META)
        return tsr_err(TSR_EINVAL, "jit cache: kernel with missing parts or metadata over %u bytes", MAX_META);
    const tsr_config_t *c = tsr_device_config(kc->dev);
    if (k->nuops > c->uop_depth)
        return tsr_err(TSR_EINVAL, "jit cache: %zu uops, the uop buffer holds %u", k->nuops, c->uop_depth);
    struct tsr_kcache_entry *e;
    if ((rc = entry_new(kc, sig, sig_len, k->meta, k->meta_len, k->insns, k->ninsns, k->uops, k->nuops, k->gen_ns,
                        &e)))
        return rc;
    kc->st.gen_ns += k->gen_ns;
    *ref = e;
    if (kc->o.disabled)
        return TSR_OK;
    struct tsr_kcache_entry *old = find(kc, sig, sig_len);
    if (old)
        detach(kc, old);
    e->kc = kc;
    e->refs++;
    push_front(kc, e);
    kc->st.entries++;
    kc->st.bytes += e->bytes;
    kc->st.inserts++;
    enforce_bounds(kc, e);
    if (kc->dir[0])
        write_file(kc, e, k->uops);
    return TSR_OK;
}

const tsr_kernel_t *tsr_kcache_kernel(const tsr_kcache_ref_t *ref) { return ref ? &ref->k : NULL; }

uint64_t tsr_kcache_uop_addr(const tsr_kcache_ref_t *ref) { return ref ? ref->uop_addr : 0; }

int tsr_kcache_stats(const tsr_kcache_t *kc, tsr_kcache_stats_t *out)
{
    if (!kc || !out)
        return tsr_err(TSR_EINVAL, "jit cache: NULL argument");
    *out = kc->st;
    return TSR_OK;
}

const tsr_kcache_opts_t *tsr_kcache_options(const tsr_kcache_t *kc) { return &kc->o; }

const char *tsr_kcache_dir(const tsr_kcache_t *kc) { return kc ? kc->dir : ""; }

/* ---------------------------------------------------------------- memo */

/* Entries kept: far more than the distinct layer shapes of a network (a
 * conv's tiling, and the blocks its weights share or skip, tsr_conv2d.c);
 * the oldest go first. Bytes kept: packed weight images are values too
 * (ResNet-50's about 25 MB), so a network with larger weights would keep
 * them all until the device closes; past the bound the oldest go, and a
 * plan that misses one packs its weights again (slower, the same bytes). */
#define MEMO_MAX 1024
#define MEMO_MAX_BYTES ((size_t)64 << 20)

int tsr_kcache_memo_get(tsr_kcache_t *kc, const void *key, size_t key_len, void *val, size_t val_len)
{
    for (const struct tsr_kcache_memo *m = kc ? kc->memo : NULL; m; m = m->next)
        if (m->key_len == key_len && m->val_len == val_len && !memcmp(m->data, key, key_len)) {
            memcpy(val, m->data + key_len, val_len);
            kc->st.memo_hits++;
            return 1;
        }
    return 0;
}

int tsr_kcache_memo_put(tsr_kcache_t *kc, const void *key, size_t key_len, const void *val, size_t val_len)
{
    if (!kc)
        return TSR_OK;
    struct tsr_kcache_memo *m = malloc(sizeof *m + key_len + val_len);
    if (!m)
        return tsr_err(TSR_ENOMEM, "out of memory");
    m->key_len = key_len;
    m->val_len = val_len;
    memcpy(m->data, key, key_len);
    memcpy(m->data + key_len, val, val_len);
    m->next = kc->memo;
    kc->memo = m;
    kc->nmemo++;
    kc->memo_bytes += key_len + val_len;
    while (kc->memo->next && (kc->nmemo > MEMO_MAX || kc->memo_bytes > MEMO_MAX_BYTES)) { /* drop the oldest */
        struct tsr_kcache_memo **pp = &kc->memo;
        while ((*pp)->next)
            pp = &(*pp)->next;
        kc->memo_bytes -= (*pp)->key_len + (*pp)->val_len;
        free(*pp);
        *pp = NULL;
        kc->nmemo--;
    }
    return TSR_OK;
}
