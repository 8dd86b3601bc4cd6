/*
 * tsr_kcache: the JIT kernel cache. VTA regenerated and re-uploaded its
 * micro-op kernels at every synchronisation; a lowering here generates its
 * instruction stream and uop kernels once per operator signature and
 * device, and once per signature and config across processes.
 *
 * What is cached. A kernel is what a lowering produces from the parameters
 * that shape the program (never from tensor data or buffer addresses):
 *   - an opaque blob of lowering-specific metadata (e.g. conv2d's tiling),
 *   - a relocatable instruction stream: every LOAD/STORE dram_base counts
 *     elements from the start of the buffer its memory type names (uop,
 *     inp, wgt, acc/acc8; STORE: out), as if every buffer sat at address 0;
 *     tsr_kcache_relocate() adds the real buffers' element offsets,
 *   - the encoded uop kernels, uploaded once into a device buffer that the
 *     cache owns and every plan of that signature shares (uops hold only
 *     on-chip indices, so they do not depend on where buffers are).
 * The key is the signature: bytes the lowering builds from every parameter
 * that changes the stream or the uops (operator kind, shapes, strides,
 * pads, groups, dtypes, zero points and requantization values that appear
 * in instructions, plus a generator identity); the cache adds the config's
 * identity (tsr_kcache_config_hash).
 *
 * In memory: one cache per device (created lazily by tsr_kcache_get, or
 * explicitly with options by tsr_kcache_create; freed with the device or by
 * tsr_kcache_free), bounded in entries and bytes, least recently used
 * entries evicted first. Entries are reference counted: a plan holds a
 * reference (tsr_kcache_ref_t) so an evicted entry's uop buffer lives until
 * its last plan is freed.
 *
 * On disk: one file per (config, signature) under $TESSERA_JIT_CACHE_DIR,
 * else $TESSERA_CACHE/jit (else $XDG_CACHE_HOME/tessera/jit or
 * ~/.cache/tessera/jit), written atomically
 * (temporary file + rename), with a magic, a format version, the config
 * hash, the full signature and an FNV-1a 64 checksum over everything. A
 * file that is truncated, corrupted, of another version, of another config
 * or of another signature is reported with a warning on stderr, deleted and
 * regenerated, never trusted; a stream read back is still verified by the
 * driver at every submit. The directory is kept under a byte budget by
 * deleting the least recently used files (reads refresh the mtime).
 *
 * Generator identity: a lowering puts a string into its signature that
 * changes whenever its code does (conv2d: a version plus the compile date
 * and time of tsr_conv2d.c and of each unit that shapes the kernel: the
 * emitter, the tiling search, the stream builder; so every rebuild of the
 * lowering starts a new set of files; a build with a fixed SOURCE_DATE_EPOCH must bump the
 * version by hand when the lowering changes).
 *
 * Not thread-safe: one cache per device, used by the thread using the
 * device (caches of different devices are independent; concurrent
 * processes share the directory safely through atomic renames).
 *
 * Use from a lowering (see tsr_conv2d_plan):
 *   tsr_kcache_t *kc = tsr_kcache_get(dev);
 *   rc = tsr_kcache_lookup(kc, sig, n, &ref);        // 1 memory hit, 2 disk hit, 0 miss
 *   if (rc == 0) { generate (time it); rc = tsr_kcache_insert(kc, sig, n, &kernel, &ref); }
 *   k = tsr_kcache_kernel(ref);  copy k->insns, tsr_kcache_relocate(...), uops at tsr_kcache_uop_addr(ref)
 *   ... tsr_kcache_release(ref) when the plan is freed.
 */
#ifndef TSR_KCACHE_H
#define TSR_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tsr_driver.h"

typedef struct tsr_kcache tsr_kcache_t;
typedef struct tsr_kcache_entry tsr_kcache_ref_t; /* a reference to one cached kernel */

#define TSR_KCACHE_FORMAT_VERSION 1u
#define TSR_KCACHE_DEFAULT_ENTRIES 256
#define TSR_KCACHE_DEFAULT_BYTES (64ull << 20)
#define TSR_KCACHE_DEFAULT_DISK_BYTES (256ull << 20)
#define TSR_KCACHE_MAX_SIG 4096 /* signature bytes */

/* How a kernel was obtained (plans report it). */
typedef enum {
    TSR_KC_NONE = 0, /* generated, cache disabled */
    TSR_KC_MISS = 1, /* generated and inserted */
    TSR_KC_HIT = 2,  /* found in the device's cache */
    TSR_KC_DISK = 3, /* read from the on-disk cache (uops uploaded) */
} tsr_kc_status_e;

typedef struct tsr_kcache_opts {
    size_t max_entries;       /* entries kept in memory (0 = TSR_KCACHE_DEFAULT_ENTRIES) */
    uint64_t max_bytes;       /* host bytes (streams, metadata) + device uop bytes kept (0 = default 64 MiB) */
    const char *dir;          /* on-disk cache directory; NULL = the default one, "" = memory only */
    uint64_t max_disk_bytes;  /* byte budget of the directory (0 = default 256 MiB) */
    int disabled;             /* 1: cache nothing: every lookup misses, inserted kernels are private to
                                 their reference (the uncached behaviour, for comparisons) */
    int quiet;                /* 1: do not print warnings about bad cache files (they are still counted) */
} tsr_kcache_opts_t;

typedef struct tsr_kcache_stats {
    uint64_t hits;         /* lookups served from memory */
    uint64_t disk_hits;    /* lookups served from a cache file (uops uploaded) */
    uint64_t misses;       /* lookups that found nothing valid (the caller generated) */
    uint64_t inserts;      /* kernels inserted */
    uint64_t evictions;    /* entries dropped from memory to stay within the bounds */
    uint64_t disk_writes;  /* cache files written */
    uint64_t disk_rejects; /* cache files found bad (truncated, corrupted, stale) and deleted */
    uint64_t gen_ns;       /* generation time reported by inserts (nanoseconds) */
    uint64_t saved_ns;     /* generation time avoided: per hit, the kernel's generation time minus the lookup's */
    uint64_t entries;      /* entries in memory now */
    uint64_t bytes;        /* bytes those entries account for now */
    uint64_t memo_hits;    /* searches answered from the memo (tsr_kcache_memo_get) */
} tsr_kcache_stats_t;

/* A kernel as a lowering hands it to tsr_kcache_insert (all copied) or reads
 * it back from a reference. */
typedef struct tsr_kernel {
    const void *meta;         /* lowering-specific metadata */
    size_t meta_len;          /* its bytes */
    const tsr_insn_t *insns;  /* relocatable stream (see above) */
    size_t ninsns;            /* its length */
    const uint8_t *uops;      /* encoded uops, uop_bytes each (insert only; NULL in a reference) */
    size_t nuops;             /* uop count */
    uint64_t gen_ns;          /* time the lowering spent generating it (nanoseconds) */
} tsr_kernel_t;

/* Create a cache for dev and attach it (an attached cache is freed with the
 * device; a previously attached one is freed now). opts may be NULL. */
int tsr_kcache_create(tsr_device_t *dev, const tsr_kcache_opts_t *opts, tsr_kcache_t **out);
/* The device's cache, created with the defaults on first use; NULL only when
 * out of memory (the error is recorded). For lazily created caches,
 * TESSERA_JIT_CACHE=off disables caching, =mem keeps it in memory only, and
 * TESSERA_JIT_CACHE_DIR overrides the directory. */
tsr_kcache_t *tsr_kcache_get(tsr_device_t *dev);
/* Detach from the device and free; entries still referenced by plans live
 * until released. NULL is ignored. */
void tsr_kcache_free(tsr_kcache_t *kc);

/* Look sig up in memory, then on disk. Returns 1 (memory hit), 2 (disk
 * hit: a new entry, uops uploaded) or 0 (miss: generate and insert), with
 * *ref set on a hit; < 0 on an error (device memory). */
int tsr_kcache_lookup(tsr_kcache_t *kc, const void *sig, size_t sig_len, tsr_kcache_ref_t **ref);
/* 1 if sig's kernel is in memory or has a file on disk (not read: a stale
 * file still makes the plan generate), 0 if not or the cache is off; no
 * counter moves. */
int tsr_kcache_has(tsr_kcache_t *kc, const void *sig, size_t sig_len);
/* Copy k, upload its uops into a device buffer, write the cache file (a
 * failure to write is a warning, not an error) and return a reference. */
int tsr_kcache_insert(tsr_kcache_t *kc, const void *sig, size_t sig_len, const tsr_kernel_t *k,
                      tsr_kcache_ref_t **ref);
/* The cached kernel (uops is NULL: they are on the device). */
const tsr_kernel_t *tsr_kcache_kernel(const tsr_kcache_ref_t *ref);
/* Device address of the kernel's uop buffer. */
uint64_t tsr_kcache_uop_addr(const tsr_kcache_ref_t *ref);
/* Drop a reference; NULL is ignored. */
void tsr_kcache_release(tsr_kcache_ref_t *ref);

int tsr_kcache_stats(const tsr_kcache_t *kc, tsr_kcache_stats_t *out);
/* The options in effect (defaults filled in; dir is NULL, see tsr_kcache_dir). */
const tsr_kcache_opts_t *tsr_kcache_options(const tsr_kcache_t *kc);
/* Path of the on-disk cache directory in use ("" = none). */
const char *tsr_kcache_dir(const tsr_kcache_t *kc);
/* Path of the cache file of sig ("" if the cache has no directory). */
int tsr_kcache_file(const tsr_kcache_t *kc, const void *sig, size_t sig_len, char *buf, size_t n);

/* A memo of search results beside the kernels, in memory, per device (so
 * per config): a lowering whose expensive search depends on fewer inputs
 * than its kernel's signature (conv2d's tiling: on the shapes, not on the
 * requantization values) finds the result of an earlier search of the same
 * key. memo_get copies the value of key into val (val_len bytes) and
 * returns 1 (counted in memo_hits), or returns 0; memo_put records it (TSR_ENOMEM: not recorded,
 * harmless). Keys match by their whole bytes. At most 1024 entries and 64 MiB of keys and values
 * are kept, the oldest dropped first. kc NULL: nothing found, nothing kept. */
int tsr_kcache_memo_get(tsr_kcache_t *kc, const void *key, size_t key_len, void *val, size_t val_len);
int tsr_kcache_memo_put(tsr_kcache_t *kc, const void *key, size_t key_len, const void *val, size_t val_len);

/* Identity of a config: FNV-1a 64 over every key (derived values follow
 * from them). */
uint64_t tsr_kcache_config_hash(const tsr_config_t *cfg);
/* The JIT's source identity (64 hex digits): a SHA-256 over every jit/ and
 * isa/ source file, made at build time. A cache file carries its hash and
 * one from another build is not used ("stale"): the per-file generator
 * identities in the signatures miss files that have none. */
const char *tsr_kcache_source_id(void);

/* Add the element offset of the buffer each LOAD/STORE names to its
 * dram_base: base[m] is the byte address of the buffer of memory type m
 * (TSR_MEM_*; STOREs use base[TSR_MEM_OUT]), a multiple of its element
 * size. TSR_EBOUNDS if an address no longer fits the dram_base field (the
 * stream is then partly relocated: discard it); this is the only field
 * relocation changes. */
int tsr_kcache_relocate(const tsr_config_t *cfg, tsr_insn_t *insns, size_t n, const uint64_t base[TSR_MEM_COUNT]);
/* What every lowering does with its kernel: look sig up in kc; a found
 * kernel is kept only if fits(kernel, ctx) says its tiling still holds (1;
 * it may also adopt that tiling into ctx), else released (0, or an error
 * code < 0, which is returned); without one,
 * gen(ctx, ref) generates and inserts it. *status gets the tsr_kc_status_e
 * (TSR_KC_NONE when the cache is disabled). Returns TSR_OK or the error of
 * the lookup or of gen. */
int tsr_kcache_fetch(tsr_kcache_t *kc, const void *sig, size_t sig_len,
                     int (*fits)(const tsr_kernel_t *k, void *ctx), int (*gen)(void *ctx, tsr_kcache_ref_t **ref),
                     void *ctx, tsr_kcache_ref_t **ref, int *status);
/* Copy ref's relocatable stream into dst (room for its ninsns) and relocate
 * it against the five buffers (tsr_kcache_relocate). */
int tsr_kcache_bind(const tsr_config_t *cfg, const tsr_kcache_ref_t *ref, tsr_insn_t *dst, uint64_t uop, uint64_t inp,
                    uint64_t wgt, uint64_t acc, uint64_t out);
/* Relocation by buffer slot: an operator with two buffers of one memory
 * type (add's inputs a and b are both inp) keeps one relocatable offset
 * space per slot; instruction i is relocated against base[slot[i]]
 * (slot NULL: every instruction in slot 0; a slot >= nslots is TSR_EINVAL).
 * The slot map is the lowering's (e.g. in its kernel metadata). */
int tsr_kcache_relocate_slots(const tsr_config_t *cfg, tsr_insn_t *insns, size_t n, const uint8_t *slot, int nslots,
                              const uint64_t base[][TSR_MEM_COUNT]);

/* Helpers for building signatures: append a little-endian value / bytes.
 * Return the new length; at most TSR_KCACHE_MAX_SIG bytes are written
 * (a longer signature is refused by lookup and insert). */
size_t tsr_kcache_sig_i32(uint8_t *sig, size_t len, int32_t v);
size_t tsr_kcache_sig_bytes(uint8_t *sig, size_t len, const void *p, size_t n);

#endif
