"""The registry of finding kinds: what policy reads, what the README documents, what code may produce."""

from __future__ import annotations

import re

import pytest

from indexlib.recovery.findings import (
    CUT_TAIL,
    ERROR,
    INFO,
    KINDS,
    NOTHING,
    REBUILD_FILE,
    REFUSE_SEGMENT,
    REWRITE_FROM_LOG,
    Finding,
)

from ..conftest import PROJECT_ROOT


def readme_finding_kinds() -> set[str]:
    """Kinds named in the first column of the README's findings table."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    table = readme.split("| finding | meaning |", 1)[1].split("\n\n", 1)[0]
    kinds: set[str] = set()
    for row in table.splitlines()[2:]:
        kinds.update(re.findall(r"`([a-z_]+)`", row.split(" | ", 1)[0]))
    return kinds


def test_the_readme_documents_every_registered_kind_and_nothing_else():
    assert readme_finding_kinds() == set(KINDS)


def test_each_kind_is_consistent():
    for name, kind in KINDS.items():
        assert kind.name == name and kind.meaning
        assert kind.severity in (ERROR, INFO)
        assert kind.triggers in (REBUILD_FILE, CUT_TAIL, REFUSE_SEGMENT, REWRITE_FROM_LOG, NOTHING)
        assert kind.severity == ERROR or kind.triggers == NOTHING, name  # info never makes a run act
        if kind.triggers in (CUT_TAIL, REFUSE_SEGMENT):
            assert kind.concerns == ".log", name
        if kind.triggers == REBUILD_FILE:
            assert kind.concerns in (".index", ".timeindex", ".txnindex", "index file"), name
        if kind.triggers == REWRITE_FROM_LOG:  # a producer snapshot, leader-epoch-checkpoint
            assert kind.concerns == "partition dir", name


def test_a_finding_takes_its_severity_from_the_registry():
    assert Finding("preallocated_zero_tail", "x.index").severity == INFO
    assert Finding("index_missing", "x.index").severity == ERROR
    with pytest.raises(ValueError, match="'no_such_kind' is not registered"):
        Finding("no_such_kind", "x.index")
    with pytest.raises(ValueError, match="has severity error, not info"):
        Finding("index_missing", "x.index", severity="info")


def _kind_literals() -> dict[str, set[str]]:
    """String literals the code passes as a kind: to ``Finding``/``flag_entries`` (finding kinds) and to
    ``ScanProblem`` or a ``kind = ...`` assignment (scan problems, reported as ``log_<kind>`` when they
    end the valid data, under their own name when they are fatal)."""
    import ast

    found: dict[str, set[str]] = {"finding": set(), "problem": set()}
    for package in ("indexlib", "jobs"):
        for path in (PROJECT_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    args = {"Finding": node.args[:1], "flag_entries": node.args[1:2], "ScanProblem": node.args[:1]}
                    for arg in args.get(node.func.id, []):
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            found["problem" if node.func.id == "ScanProblem" else "finding"].add(arg.value)
                elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["kind"]:
                    values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
                    for value in values:  # literal kinds only (an f-string kind is built from a problem's kind)
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            found["problem"].add(value.value)
    return found


def test_every_kind_the_code_names_is_registered():
    literals = _kind_literals()
    assert len(literals["finding"]) > 20 and len(literals["problem"]) > 8  # the search itself works
    assert literals["finding"] - set(KINDS) == set()
    unregistered = {p for p in literals["problem"] if p not in KINDS and f"log_{p}" not in KINDS}
    assert unregistered == set()


def test_no_policy_reads_a_kind_by_its_name():
    """Policy asks the registry (``kind(name).triggers``), never a name's prefix or suffix."""
    offenders = []
    for package in ("indexlib", "jobs", "airflow_dags"):
        for path in (PROJECT_ROOT / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.kind\.(startswith|endswith)\(|\.kind\[", line):
                    offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []
