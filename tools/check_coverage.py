"""Hold each package's line coverage at or above its floor (``[tool.kafka-index-rebuild.coverage-floors]``
in pyproject.toml), from the data file the test run left (``.coverage``). Run by ``make test`` after
pytest; exit 1 names every package below its floor. Raise a floor when coverage rises, never lower it.

The floors are set with the real-Kafka fixtures beside the checkout (``../shared``, as CI has them);
without them the tests that need them skip, so the figures are printed but not held to the floors."""

from __future__ import annotations

import io
import sys
import tomllib
from pathlib import Path

import coverage

ROOT = Path(__file__).resolve().parents[1]
KAFKA_REAL = ROOT.parent / "shared" / "fixtures" / "kafka-real"  # as tests/conftest.py finds them


def main() -> int:
    floors: dict[str, float] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["kafka-index-rebuild"][
        "coverage-floors"
    ]
    cov = coverage.Coverage(data_file=str(ROOT / ".coverage"), config_file=str(ROOT / "pyproject.toml"))
    cov.load()
    below = []
    for package, floor in floors.items():
        figure = cov.report(include=[f"{ROOT / package}/*"], file=io.StringIO())
        verdict = "ok" if figure >= floor else "BELOW THE FLOOR"
        print(f"coverage {package}: {figure:.1f} % (floor {floor:.1f} %) {verdict}")
        if figure < floor:
            below.append(package)
    if below and not KAFKA_REAL.is_dir():
        print(f"coverage floors not held: {KAFKA_REAL} is absent, so the tests that need it were skipped")
        return 0
    if below:
        print(f"coverage fell below the floor in {', '.join(below)}: add tests (the report above names the lines)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
