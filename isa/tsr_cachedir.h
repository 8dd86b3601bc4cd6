/*
 * tsr_cachedir: where Tessera keeps what it builds once and reuses
 * (Verilated models, synthesis results, JIT kernels): $TESSERA_CACHE,
 * else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera. At the bottom layer
 * so that the simulators, the JIT's kernel cache and the CLI agree on one
 * directory without reaching into each other.
 */
#ifndef TSR_CACHEDIR_H
#define TSR_CACHEDIR_H

/* Writes the directory into buf (n bytes, truncated) and returns buf. */
const char *tsr_cache_dir(char *buf, int n);

#endif
