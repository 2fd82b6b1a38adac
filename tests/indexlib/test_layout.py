"""Kafka's file layout lives in ``indexlib.format.layout`` alone: its rules, and no other module's own regex."""

from __future__ import annotations

import ast
import re

import pytest

from indexlib.format.layout import (
    is_kafka_metadata,
    is_kafka_transient,
    is_staged_name,
    parse_partition_dir,
    parse_partition_dir_name,
    parse_segment_name,
    segment_base_offsets,
    skipped_dir_kind,
    staged_by_run,
    staged_path,
)

from ..conftest import PROJECT_ROOT


@pytest.mark.parametrize(
    "name, expected",
    [
        ("orders-0", ("orders", 0)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("my.topic-with-dashes-12", ("my.topic-with-dashes", 12)),
        ("orders", None),
        ("orders-", None),
        ("orders-x", None),
        ("-3", None),
        ("ord ers-0", None),  # not a legal topic character
    ],
)
def test_partition_dir_names(name, expected):
    assert parse_partition_dir_name(name) == expected


def test_partition_dir_paths_and_skipped_dirs(tmp_path):
    assert parse_partition_dir(tmp_path / "orders-3") == ("orders", 3)
    assert parse_partition_dir(str(tmp_path / "orders-3") + "/") == ("orders", 3)
    with pytest.raises(ValueError, match=r"not-a-partition: not a Kafka partition directory"):
        parse_partition_dir(tmp_path / "not-a-partition")
    assert skipped_dir_kind("orders-0.5f1e6c1a7d3a4e4c9e3c5d1b2a3c4d5e-delete") == "delete"
    assert skipped_dir_kind("orders-0.abc-future") == "future"
    assert skipped_dir_kind("orders-0-stray") == "stray"
    assert skipped_dir_kind("orders-0") is None


def test_segment_names(tmp_path):
    assert parse_segment_name("00000000000000000042.timeindex") == (42, ".timeindex")
    assert parse_segment_name("00000000000000000042.snapshot") == (42, ".snapshot")
    assert parse_segment_name("00000000000000000042.log.deleted") is None
    assert parse_segment_name("0000000000000000042.log") is None  # 19 digits
    for name in ("00000000000000000100.log", "00000000000000000007.log", "00000000000000000007.index", "x.log"):
        (tmp_path / name).write_bytes(b"")
    assert segment_base_offsets(tmp_path) == [7, 100]
    assert is_kafka_transient("00000000000000000007.log.swap") and not is_kafka_transient("00000000000000000007.log")
    assert is_kafka_metadata("leader-epoch-checkpoint") and is_kafka_metadata(
        "00000000000000000100-0000000001.checkpoint"
    )
    assert not is_kafka_metadata("notes.txt")


def test_staged_names_and_which_run_made_them(tmp_path):
    final = str(tmp_path / "00000000000000000000.index")
    name = staged_path(final, "run-1~17").rsplit("/", 1)[1]
    assert name == ".00000000000000000000.index.run-1~17.rebuild.tmp"
    assert is_staged_name(name) and staged_by_run(name, "run-1")
    assert staged_by_run(".00000000000000000000.txnindex.run-1.rebuild.tmp", "run-1")
    assert not staged_by_run(name, "run-11") and not staged_by_run(name, "run")
    assert not staged_by_run(".00000000000000000000.index.run-1.7~3.rebuild.tmp", "run-1")  # run "run-1.7"
    assert not is_staged_name(".00000000000000000000.log.run-1.rebuild.tmp")  # we never stage a .log
    assert not is_staged_name("00000000000000000000.index.run-1.rebuild.tmp")  # not hidden


NAME_RULES = re.compile(r"\\d\{20\}|rebuild\\?\.tmp|delete\|future|^\.deleted$|\(\?P<topic>")


def _code_strings(path) -> list[str]:
    """The string literals of a module's code (docstrings left out), and ``020d`` format specs."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append(node.value)
    return found


def test_no_module_but_layout_spells_out_kafka_names():
    """Segment and partition names, Kafka's skipped names and staged names are spelled in one place."""
    offenders = []
    for package in ("indexlib", "jobs", "airflow_dags"):
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            if path.name == "layout.py":
                continue
            strings = _code_strings(path)
            offenders += [f"{path.name}: {text!r}" for text in strings if NAME_RULES.search(text) or text == "020d"]
    assert offenders == []
