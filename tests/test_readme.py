"""The README's examples run as written, and its two commands are the Makefile's targets."""

from __future__ import annotations

import re
import subprocess
import sys

from .conftest import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text()


def test_readme_python_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 4 * 8  # trimmed on close


def test_readme_commands_are_make_targets():
    commands = re.findall(r"^make (\w+)", README, flags=re.M)
    assert commands[:2] == ["demo", "test"]  # the two commands, first; later ones (make package) are targets too
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.M)
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_demo_runs_the_real_pipeline(tmp_path):
    """``make demo``: verify finds the damage, repair fixes it, the audit table says so."""
    result = subprocess.run(
        [sys.executable, "-m", "jobs.demo", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for kind in ("index_missing", "bad_length", "offset_not_increasing", "txnindex_missing"):
        assert kind in out
    assert "demo-verify: 9 segments" in out and "8 finding(s) remain" in out
    assert "demo-verify-again: 9 segments" in out and "(4 rows)" in out
    from jobs import audit_queries

    rows = audit_queries.read(str(tmp_path / "audit")).to_pylist()
    assert sorted({r["run_id"] for r in rows}) == ["demo-repair", "demo-verify", "demo-verify-again"]
    assert sum(r["action"] == "repaired" for r in rows) == 4
