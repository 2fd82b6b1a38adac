"""`spark-submit jobs/spark_job.py MODE --log-dir DIR ...`: the Spark job. MODE is verify, rebuild, repair or recover,
and the options are `kafka-index MODE`'s (it is the same command line, submitted)."""

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
    # Run as a script: import the project's packages, not this directory's modules as top-level ones.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, os.path.dirname(here))

from jobs.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
