"""`python -m robot_memory.cli`: the same as `robot-memory`."""

import sys

from robot_memory.cli import main

if __name__ == "__main__":  # imported (pkgutil walks, documentation tools): nothing runs
    sys.exit(main())
