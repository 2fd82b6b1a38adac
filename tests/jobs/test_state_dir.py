"""What the tool writes by default never lands in a broker's data (issue 37): the audit table, journal and backups
go to the state dir (``$KAFKA_INDEX_HOME``, else ``$XDG_STATE_HOME/kafka-index-rebuild``, else
``~/.local/state/kafka-index-rebuild``), not the working directory; a path the user gives inside a log dir is
refused in one line (exit 2) before anything is written. Real processes, as a user runs them from inside a log
dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_fault_matrix import damaged_logs, error_lines

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def entries(log_dir: Path) -> dict[str, int]:
    """Every entry under the log dir, hidden ones too: relative path -> size (0 for a dir)."""
    return {str(p.relative_to(log_dir)): (p.stat().st_size if p.is_file() else 0) for p in sorted(log_dir.rglob("*"))}


def user_env(home: Path) -> dict[str, str]:
    """A user's environment: a HOME of their own, no KAFKA_INDEX_HOME or XDG_STATE_HOME; the project importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_INDEX_HOME", "XDG_STATE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")]))
    return env


@pytest.mark.parametrize("command", ["kafka-index", "python -m indexlib"])
def test_verify_from_inside_a_log_dir_with_default_options_leaves_the_log_dir_as_it_was(tmp_path, command):
    logs = damaged_logs(tmp_path, partitions=2)
    before = entries(logs)
    home = tmp_path / "home"
    home.mkdir()
    if command == "kafka-index":
        argv = [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", "."]  # the default engine: Spark
    else:
        argv = [sys.executable, "-m", "indexlib", "verify", "."]
    done = subprocess.run(argv, cwd=logs, env=user_env(home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr  # the damage is found
    assert entries(logs) == before
    if command == "kafka-index":  # the audit rows went to the user's state dir
        state = home / ".local" / "state" / "kafka-index-rebuild"
        assert (state / "kafka-index-audit" / "_delta_log").is_dir(), sorted(home.rglob("*"))


@pytest.mark.parametrize(
    "option, value",
    [("--audit-table", "audit"), ("--audit-journal", "journal"), ("--json", "report.json"), ("--backup-dir", "b")],
)
def test_a_path_the_user_gives_inside_the_log_dir_is_refused_before_anything_is_written(tmp_path, option, value):
    logs = damaged_logs(tmp_path, partitions=1)
    before = entries(logs)
    home = tmp_path / "home"
    home.mkdir()
    mode = "repair" if option == "--backup-dir" else "verify"
    argv = [sys.executable, "-m", "jobs.cli", mode, "--log-dir", ".", "--engine", "local", option, value]
    done = subprocess.run(argv, cwd=logs, env=user_env(home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = error_lines(done.stderr)
    assert f"{option} {value} lies inside the log dir ." in line and "choose a path outside every log dir" in line
    assert entries(logs) == before
    assert not (home / ".local").exists()


def test_the_state_dir_follows_kafka_index_home_then_xdg(tmp_path, monkeypatch):
    from indexlib.engine import state_dir

    monkeypatch.delenv("KAFKA_INDEX_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == str(tmp_path / "xdg" / "kafka-index-rebuild")
    monkeypatch.setenv("KAFKA_INDEX_HOME", str(tmp_path / "home"))
    assert state_dir() == str(tmp_path / "home")
    from jobs.config import resolve_settings

    settings = resolve_settings(log_dirs=[str(tmp_path)])  # conf/defaults.yaml's relative paths
    assert settings.audit_table == str(tmp_path / "home" / "kafka-index-audit")
    assert settings.audit_journal == str(tmp_path / "home" / "kafka-index-audit-journal")
    given = resolve_settings(log_dirs=[str(tmp_path)], audit_table="here", audit_journal="s3://x")
    assert (given.audit_table, given.audit_journal) == ("here", "s3://x")  # the command line's, as given


@pytest.mark.parametrize("command", ["kafka-index", "python -m indexlib"])
def test_a_dir_in_the_log_dir_that_is_not_a_partition_is_an_error_naming_it(tmp_path, command):
    """Kafka's start fails on such a log dir; tiered storage's ``remote-log-index-cache`` is the one it accepts."""
    logs = damaged_logs(tmp_path, partitions=1)
    for part in logs.glob("orders-*"):  # healthy again: only the dirs matter here
        subprocess.run([sys.executable, "-m", "indexlib", "rebuild", str(part), "-q"], cwd=PROJECT_ROOT, check=True)
    (logs / "remote-log-index-cache").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    if command == "kafka-index":
        argv = [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local"]
    else:
        argv = [sys.executable, "-m", "indexlib", "verify", str(logs)]
    done = subprocess.run(argv, cwd=tmp_path, env=user_env(home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (logs / "kafka-index-audit-journal").mkdir()
    done = subprocess.run(argv, cwd=tmp_path, env=user_env(home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("not_a_partition_dir")]
    assert len(rows) == 1 and "kafka-index-audit-journal is not in the form <topic>-<partition>" in rows[0], rows
