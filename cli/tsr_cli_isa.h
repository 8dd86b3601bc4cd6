/* tsr_cli_isa: `tessera isa doc`: the instruction field reference generated from the field table. */
#ifndef TSR_CLI_ISA_H
#define TSR_CLI_ISA_H

/* argv[0] is "isa". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_isa(int argc, char **argv);

#endif
