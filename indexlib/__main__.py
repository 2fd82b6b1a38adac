"""``python -m indexlib``: the library's own command line (see :mod:`indexlib.cli`)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
