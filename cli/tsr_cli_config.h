/* tsr_cli_config: `tessera config show|emit-sv|emit-kernel-xml|emit-regmap CONFIG`: a config's
 * derived values and the files generated from it; `config show --batch`: many configs checked
 * in one process (one JSON config per stdin line, one JSON answer per line; the DSE's check). */
#ifndef TSR_CLI_CONFIG_H
#define TSR_CLI_CONFIG_H

/* argv[0] is "config". Returns the exit status: 0 ok, 1 failure, 2 usage error. */
int tsr_cli_config(int argc, char **argv);

#endif
