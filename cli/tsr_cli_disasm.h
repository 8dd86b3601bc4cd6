/* tsr_cli_disasm: `tessera disasm STREAM.bin`: a binary stream as canonical assembly. */
#ifndef TSR_CLI_DISASM_H
#define TSR_CLI_DISASM_H

/* argv[0] is "disasm". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_disasm(int argc, char **argv);

#endif
