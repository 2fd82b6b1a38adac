"""design.md's layering, and indexlib's folders by stage (README, "Architecture"):

* ``indexlib`` imports nothing from ``jobs`` (and no Spark); the DAGs import neither;
* inside indexlib the stages point one way: format <- recovery <- storage <- engine <- cli (``testing`` sits on
  ``format``);
* ``jobs`` uses indexlib only through its public names: ``indexlib`` and each stage's package (its
  ``__init__``), never a module inside a stage;
* ``recovery`` does no file I/O: it computes over what ``storage`` read; the engine reaches files only
  through ``storage``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT

INDEXLIB = PROJECT_ROOT / "indexlib"
#: each stage and the stages it may import (itself included)
MAY_IMPORT = {
    "format": {"format"},
    "recovery": {"format", "recovery"},
    "storage": {"format", "recovery", "storage"},
    "engine": {"format", "recovery", "storage", "engine"},
    "cli": {"format", "recovery", "storage", "engine", "cli"},
    "testing": {"format", "testing"},
}
#: what recovery may use of ``os``: path arithmetic on strings, nothing that touches a file
PURE_OS = {"os.fspath", "os.PathLike", "os.path.join", "os.path.basename", "os.path.dirname", "os.path.normpath"}
#: what the engine may use of ``os`` besides: resolving paths, and its own processes
ENGINE_OS = PURE_OS | {
    "os.path.realpath",
    "os.path.relpath",
    "os.path.abspath",
    "os.sep",
    "os.getcwd",
    "os.getppid",
    "os._exit",
    "os.cpu_count",
    "os.sched_getaffinity",
}
#: a stopped command's stdout pointed at /dev/null
STDOUT_OS = {"os.open", "os.close", "os.dup2", "os.devnull", "os.O_WRONLY"}
#: and ``pool``: its process pool's own result pipe, written to end a message a killed worker tore
POOL_PIPE_OS = {"os.write", "os.set_blocking"}
IO_MODULES = {"mmap", "fcntl", "shutil", "pathlib", "glob", "io", "tempfile", "subprocess"}


def sources(package: str) -> list[Path]:
    return sorted((PROJECT_ROOT / package).rglob("*.py"))


def imported_modules(package: str) -> dict[str, set[str]]:
    """Top-level names of the absolute imports of every module of ``package``."""
    found: dict[str, set[str]] = {}
    for path in sources(package):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(PROJECT_ROOT))] = names
    return found


def indexlib_imports(path: Path) -> set[str]:
    """The indexlib modules ``path`` imports, as dotted names (``indexlib.format.records``), relative imports
    resolved; ``from X import name`` counts X.name when that is a module."""
    package = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                is_module = (PROJECT_ROOT / candidate.replace(".", "/")).with_suffix(".py").exists() or (
                    PROJECT_ROOT / candidate.replace(".", "/")
                ).is_dir()
                found.add(candidate if is_module else module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "indexlib" or name.startswith("indexlib.")}


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("indexlib", {"jobs", "pyspark", "airflow", "deltalake", "pyarrow"}),
        ("airflow_dags", {"indexlib", "jobs"}),
    ],
)
def test_layers(package, forbidden):
    modules = imported_modules(package)
    assert len(modules) > 2
    assert {name: sorted(names & forbidden) for name, names in modules.items() if names & forbidden} == {}


def test_indexlib_needs_yaml_only_to_read_a_yaml_settings_file():
    """PyYAML is not an indexlib dependency: only the front end's reader of a YAML settings file imports it,
    inside the function that reads one (without it, that read says so)."""
    where = {}
    for path in sources("indexlib"):
        tree = ast.parse(path.read_text())
        top = {a.name for node in tree.body if isinstance(node, ast.Import) for a in node.names}
        top |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
        anywhere = "yaml" in imported_modules_of(tree)
        if "yaml" in top or anywhere:
            where[str(path.relative_to(PROJECT_ROOT))] = "top level" if "yaml" in top else "in a function"
    assert where == {"indexlib/cli/settings_files.py": "in a function"}


def imported_modules_of(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_stage_imports_only_the_stages_below_it():
    wrong = {}
    for stage, allowed in MAY_IMPORT.items():
        assert (INDEXLIB / stage / "__init__.py").exists(), stage
        for path in sources(f"indexlib/{stage}"):
            stages = {name.split(".")[1] for name in indexlib_imports(path) if name.count(".") >= 1}
            if stages - allowed:
                wrong[str(path.relative_to(PROJECT_ROOT))] = sorted(stages - allowed)
    assert wrong == {}
    top = {p.name for p in INDEXLIB.glob("*.py")}
    assert top == {"__init__.py", "__main__.py"}, "every module lives in a stage's folder"


def test_jobs_use_only_indexlibs_public_names():
    deep = {
        str(path.relative_to(PROJECT_ROOT)): sorted(name for name in indexlib_imports(path) if name.count(".") > 1)
        for path in sources("jobs")
    }
    assert {path: names for path, names in deep.items() if names} == {}


def file_io(path: Path, allowed_os: set[str]) -> list[str]:
    """What ``path`` uses that touches files: an I/O module, ``open()``, or an ``os`` name outside ``allowed_os``."""
    bad = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            bad.update(a.name for a in node.names if a.name.split(".")[0] in IO_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in IO_MODULES or (node.module == "os" and node.names):
                bad.add(f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            bad.add("open()")
        elif isinstance(node, ast.Attribute) and ast.unparse(node).startswith("os."):
            name = ast.unparse(node)
            if name not in allowed_os and not any(p.startswith(name + ".") for p in allowed_os):
                bad.add(name)
    return sorted(bad)


def test_recovery_does_no_file_io():
    used = {str(p.relative_to(PROJECT_ROOT)): file_io(p, PURE_OS) for p in sources("indexlib/recovery")}
    assert {path: names for path, names in used.items() if names} == {}


def test_the_engine_reaches_files_only_through_storage():
    """Every open, stat, listing, rename, lock and fsync of a run is in ``storage/`` (the seam where another
    store plugs in); the engine resolves paths, runs processes and, on a signal, points its stdout at
    /dev/null (``interrupts``) and writes its process pool's pipe (``pool``)."""
    used = {}
    for path in sources("indexlib/engine"):
        allowed = ENGINE_OS | {"interrupts.py": STDOUT_OS, "pool.py": POOL_PIPE_OS}.get(path.name, set())
        used[str(path.relative_to(PROJECT_ROOT))] = file_io(path, allowed)
    assert {path: names for path, names in used.items() if names} == {}


#: the modules of a store's backend: one client (a library's requests) and one store over it
BACKENDS = {"indexlib.storage.object_store", "indexlib.storage.object_clients"}


def test_a_backend_is_reached_only_through_the_store_interface():
    """Issue 39: the engine, the command lines and the jobs name a store only by its spec; ``store_for`` in
    ``storage/store.py`` builds it, and nothing else imports a backend (a client imports the store it serves).
    So a new object store is a client in ``object_clients.py`` (and its scheme), a new kind of store a module
    whose class ``store_for`` returns: README "How it works" lists the files."""
    importers: dict[str, set[str]] = {}
    for package in ("indexlib", "jobs", "airflow_dags"):
        for path in sources(package):
            for name in indexlib_imports(path) & BACKENDS:
                importers.setdefault(name, set()).add(str(path.relative_to(PROJECT_ROOT)))
    assert importers == {
        "indexlib.storage.object_store": {"indexlib/storage/store.py", "indexlib/storage/object_clients.py"},
        "indexlib.storage.object_clients": {"indexlib/storage/store.py"},
    }


def test_the_engine_uses_storage_only_through_its_interface():
    """Issue 39: the engine imports ``indexlib.storage``'s own names (its ``__init__``: the store of a run's paths,
    discovery, and what only a broker's disk has), never a module inside it; the store's interface is among them."""
    deep = {}
    for path in sources("indexlib/engine"):
        names = sorted(n for n in indexlib_imports(path) if n.startswith("indexlib.storage."))
        if names:
            deep[str(path.relative_to(PROJECT_ROOT))] = names
    assert deep == {}
    import indexlib.storage

    assert {"Store", "StoreSpec", "store_for", "LOCAL"} <= set(indexlib.storage.__all__)
