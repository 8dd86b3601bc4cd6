/*
 * tsr_cli_fpga: the `tessera fpga ...` commands. `fpga fit` synthesizes the
 * design of a config with yosys for a board's family (scripts/synth.sh) and
 * checks the estimate against the board's budget and limits (isa/tsr_board);
 * `fpga boards` lists the built-in boards. It runs external tools and owns
 * their cache, which no other command does.
 */
#ifndef TSR_CLI_FPGA_H
#define TSR_CLI_FPGA_H

/* argv[0] is "fpga". Exit status of `fpga fit`: 0 fits, 1 does not fit,
 * 2 usage error, 3 any other error (bad board or config, yosys failed), with
 * a one-line message on stderr. */
int tsr_cli_fpga(int argc, char **argv);

#endif
