"""design.md's layering: ``indexlib`` imports nothing from ``jobs`` (and no Spark); the DAGs import neither."""

from __future__ import annotations

import ast

import pytest

from .conftest import PROJECT_ROOT


def imported_modules(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(PROJECT_ROOT))] = names
    return found


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("indexlib", {"jobs", "pyspark", "airflow", "deltalake", "pyarrow", "yaml"}),
        ("airflow_dags", {"indexlib", "jobs"}),
    ],
)
def test_layers(package, forbidden):
    modules = imported_modules(package)
    assert len(modules) > 2
    assert {name: sorted(names & forbidden) for name, names in modules.items() if names & forbidden} == {}
