// genesis-mem: the memory debugging command line. The commands are library
// code (cli.h) so that `python -m genesis.tools.memory` runs the same ones.
#include "cli.h"

int main(int argc, char** argv) { return genesis::tools::genesis_mem_main(argc, argv); }
