"""``python -m indexlib``: the library's own command line (see :mod:`indexlib.cli.main`)."""

from __future__ import annotations

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
