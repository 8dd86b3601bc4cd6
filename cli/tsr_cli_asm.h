/* tsr_cli_asm: `tessera asm PROGRAM.s`: assemble a program into its binary instruction stream. */
#ifndef TSR_CLI_ASM_H
#define TSR_CLI_ASM_H

/* argv[0] is "asm". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_asm(int argc, char **argv);

#endif
