/*
 * test_race: the hostile soak's race classifier (tests/tsr_race.c) must
 * not call a race-free stream racy (every generator program is race-free
 * by construction: tsr_gen.h) and must find the race when tokens are taken
 * away (flags cleared: the load stage's writes of inp/wgt rows are no
 * longer ordered before the GEMMs that read them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tsr_error.h"
#include "tsr_gen.h"
#include "tsr_race.h"
#include "tsr_testenv.h"

static void check_config(const char *name, uint64_t seed0, int count)
{
    tsr_config_t cfg;
    assert_int_equal(tsr_test_config(name, &cfg), TSR_OK);
    int found = 0;
    for (int k = 0; k < count; k++) {
        tsr_gen_prog_t p;
        char why[200];
        if (tsr_gen_program(seed0 + (uint64_t)k, &cfg, NULL, &p))
            fail_msg("generator seed %llu: %s", (unsigned long long)(seed0 + (uint64_t)k), tsr_errmsg());
        int r = tsr_race_check(&p, p.insns, p.ninsns, why, sizeof why);
        if (r == TSR_RACE_FOUND)
            fail_msg("%s, generator seed %llu: race-free program called racy: %s", name,
                     (unsigned long long)(seed0 + (uint64_t)k), why);
        /* without any token between the load stage and compute every
         * GEMM reading a loaded row races with its LOAD */
        for (size_t i = 0; i < p.ninsns; i++)
            if (p.insns[i].opcode != TSR_OP_FINISH && tsr_insn_stage(&p.insns[i]) == TSR_STAGE_LOAD)
                p.insns[i].push_next = p.insns[i].pop_next = 0;
        for (size_t i = 0; i < p.ninsns; i++)
            if (tsr_insn_stage(&p.insns[i]) == TSR_STAGE_COMPUTE)
                p.insns[i].pop_prev = p.insns[i].push_prev = 0;
        found += tsr_race_check(&p, p.insns, p.ninsns, why, sizeof why) == TSR_RACE_FOUND;
        tsr_gen_free(&p);
    }
    print_message("%s: %d of %d programs race once the load-stage tokens are removed\n", name, found, count);
    assert_true(found > count / 2);
}

static void test_tiny(void **state)
{
    (void)state;
    check_config("tiny", tsr_test_seed("TSR_RACE_SEED", 1), 300);
}

static void test_default(void **state)
{
    (void)state;
    check_config("default", tsr_test_seed("TSR_RACE_SEED", 1), 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tiny), cmocka_unit_test(test_default)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
