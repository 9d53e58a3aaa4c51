"""python -m pytest_automedbench.cli: the `automedbench` command without its console script."""
import sys

from . import main

sys.exit(main())
