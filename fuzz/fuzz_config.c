/*
 * fuzz_config: config JSON text -> tsr_config_parse. An accepted config
 * must print (every derived value) and give every opcode a field table.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tsr_config.h"
#include "tsr_isa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    char *text = malloc(size + 1);
    tsr_config_t cfg;
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int rc = tsr_config_parse(text, "fuzz.json", &cfg);
    free(text);
    if (rc)
        return 0;
    if (!devnull && !(devnull = fopen("/dev/null", "w")))
        return 0;
    tsr_config_print(&cfg, devnull);
    for (uint32_t op = 0; op < TSR_OP_COUNT; op++) {
        tsr_format_t fmt;
        if (tsr_isa_format(&cfg, op, &fmt))
            fuzz_fail("an accepted config has no field table for an opcode");
    }
    return 0;
}
