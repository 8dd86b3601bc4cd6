/* tsr_cachedir: the one cache directory (see tsr_cachedir.h). */
#include "tsr_cachedir.h"

#include <stdio.h>
#include <stdlib.h>

const char *tsr_cache_dir(char *buf, int n)
{
    const char *c = getenv("TESSERA_CACHE");
    const char *x = getenv("XDG_CACHE_HOME");
    if (c && *c)
        snprintf(buf, (size_t)n, "%s", c);
    else if (x && *x)
        snprintf(buf, (size_t)n, "%s/tessera", x);
    else
        snprintf(buf, (size_t)n, "%s/.cache/tessera", getenv("HOME") ? getenv("HOME") : "/tmp");
    return buf;
}
