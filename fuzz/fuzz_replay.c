/*
 * fuzz_replay: a main() for the fuzz targets in ordinary builds (gcc, no
 * libFuzzer). It runs the target's LLVMFuzzerTestOneInput once on every
 * file of the directories given, so the committed corpora, including the
 * inputs of past findings, are regression tests in every CI build (release
 * and ASan/UBSan); a broken property aborts as under libFuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_error.h"
#include "tsr_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    size_t count = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "fuzz_replay: cannot open directory %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            char path[4096];
            uint8_t *data;
            size_t n;
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            if (tsr_file_read(path, 1u << 20, "corpus input", &data, &n)) {
                fprintf(stderr, "fuzz_replay: %s\n", tsr_errmsg());
                closedir(d);
                return 1;
            }
            LLVMFuzzerTestOneInput(data, n);
            free(data);
            count++;
        }
        closedir(d);
    }
    if (!count) {
        fprintf(stderr, "fuzz_replay: no inputs\n");
        return 1;
    }
    printf("fuzz_replay: %zu inputs, no finding\n", count);
    return 0;
}
