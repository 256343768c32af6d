"""``python -m evalmix.cli``: the same entry point as the ``evalmix`` console script."""

import sys

from evalmix.cli import main

sys.exit(main())
