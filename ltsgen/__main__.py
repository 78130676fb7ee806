"""`python -m ltsgen` runs the `ltsgen` command."""

import sys

from ltsgen.cli import main

sys.exit(main())
