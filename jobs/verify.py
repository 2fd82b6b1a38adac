"""`spark-submit jobs/verify.py --log-dir DIR ...`: the verify job (same options as `kafka-index verify`)."""

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
    # Run as a script: import the project's packages, not this directory's modules as top-level ones.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.path.dirname(here))

from jobs.cli import job_main  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return job_main("verify", argv)


if __name__ == "__main__":
    raise SystemExit(main())
