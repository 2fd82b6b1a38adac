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
    assert commands == ["demo", "test"]
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.M)
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_demo_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "indexlib.demo", "--output-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=PROJECT_ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "aborted: producer" in result.stdout
    suffixes = {p.suffix for p in (tmp_path / "orders-0").iterdir()}
    assert suffixes == {".log", ".index", ".timeindex", ".txnindex"}
