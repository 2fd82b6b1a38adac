"""Kafka's own ``kafka-dump-log.sh`` beside ``python -m indexlib dump``: both run on the same files, compared
line for line (``dump``'s own lines, which Kafka's dump has no counterpart of, left out)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .kafka_broker import KAFKA_HOME, PROJECT_ROOT

#: our lines that Kafka's dump has no counterpart of (the end of the walk, problems, records that do not parse)
OWN_LINES = ("End of walk:", "Problem:", "Fatal (", "| records not shown:")


def kafka_dump_log(files: list[Path], *options: str) -> list[str]:
    """What ``kafka-dump-log.sh`` prints on stdout, but its "Found N invalid bytes" lines (ours say it too)."""
    proc = subprocess.run(
        [str(KAFKA_HOME / "bin" / "kafka-dump-log.sh"), "--files", ",".join(map(str, files)), *options],
        capture_output=True, timeout=600, env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx512m"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    lines = proc.stdout.decode("utf-8").split("\n")[:-1]
    return [line for line in lines if not (line.startswith("Found ") and " invalid bytes at the end of " in line)]


def our_dump(files: list[Path], *options: str) -> tuple[int, list[str]]:
    """``python -m indexlib dump``'s exit code and stdout lines, without :data:`OWN_LINES`."""
    proc = subprocess.run(
        [sys.executable, "-m", "indexlib", "dump", *map(str, files), *options],
        capture_output=True, timeout=600, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode("utf-8").split("\n")[:-1]
    return proc.returncode, [line for line in lines if not line.startswith(OWN_LINES)]


def assert_same_lines(files: list[Path], *options: str) -> None:
    expected = kafka_dump_log(files, *options)
    _, got = our_dump(files, *options)
    assert len(expected) > len(files) * 2
    first = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), None)
    assert first is None and len(got) == len(expected), (
        f"first difference at line {first}: kafka {expected[first] if first is not None else None!r}, "
        f"ours {got[first] if first is not None else None!r}; {len(expected)} against {len(got)} lines"
    )
