"""``python -m sparktf run [options] SCRIPT [ARG ...]``: :mod:`sparktf.cli`."""

import sys

from sparktf.cli import main

sys.exit(main())
