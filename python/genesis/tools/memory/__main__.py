"""python -m genesis.tools.memory: the genesis-mem commands, run in-process."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
