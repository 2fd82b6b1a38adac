"""indexlib.format.errors: every error message names the file it concerns, in one line; every error indexlib
raises on purpose is a KafkaIndexError, and still the builtin it once was."""

from __future__ import annotations

import ast
import builtins
import errno
import importlib
import os
import pathlib
import pickle

import pytest

import indexlib
from indexlib import KafkaIndexError, OffsetIndex, TimeIndex, cli, engine, recovery, storage, testing
from indexlib.cli.main import InputError
from indexlib.cli.remote_inventory import RemoteInventoryError
from indexlib.cli.run_planning import NotYetTieredError
from indexlib.format.checkpoint import CheckpointError
from indexlib.format.compression import CodecUnavailableError
from indexlib.format.errors import describe_error, error_line
from indexlib.format.meta_properties import MetaPropertiesError
from indexlib.format.producer_snapshot import SnapshotError
from indexlib.recovery.checks import VerifyInputError
from indexlib.recovery.findings import FindingKindError
from indexlib.storage.cluster_metadata_files import ClusterMetadataError
from indexlib.storage.file_system_sync import SyncfsUnavailableError
from indexlib.storage.publish import BackupExistsError, ChangedSinceReadError, UnrebuildableSegmentError
from indexlib.storage.store import ObjectChangedError, ObjectStoreError, UnknownStoreError


def test_an_oserror_line_names_its_file_and_the_second_file_of_a_rename():
    assert error_line(FileNotFoundError(errno.ENOENT, "No such file or directory", "/d/a.index"), None) == (
        "/d/a.index: No such file or directory"
    )
    crossing = OSError(errno.EXDEV, "Invalid cross-device link", "/d/.a.tmp", None, "/e/a.index")
    assert error_line(crossing, None) == "/d/.a.tmp: Invalid cross-device link (/e/a.index)"
    assert describe_error(crossing) == "Invalid cross-device link"


def test_another_error_is_prefixed_with_the_file_unless_it_names_it_or_a_file_beside_it():
    assert error_line(ValueError("bad entry"), "/d/a.index") == "/d/a.index: bad entry"
    assert error_line(ValueError("/d/a.index: bad\nentry"), "/d/a.index") == "/d/a.index: bad entry"
    assert error_line(ValueError("/d/b.timeindex: torn"), "/d/a.index") == "/d/b.timeindex: torn"
    assert error_line(RuntimeError(), None) == "RuntimeError"


@pytest.mark.parametrize("cls, entry_size", [(OffsetIndex, 8), (TimeIndex, 12)])
def test_a_closed_index_names_itself_in_every_refusal(tmp_path, cls, entry_size):
    path = tmp_path / f"{5:020d}{'.index' if cls is OffsetIndex else '.timeindex'}"
    index = cls(path, 5, 100 * entry_size)
    assert index.base_offset == 5 and index.max_index_size == 100 * entry_size
    if cls is OffsetIndex:
        index.append(10, 100)
    else:
        index.maybe_append(1000, 10)
    index.close_handler()
    for call in (lambda: index.lookup(10), lambda: list(index), lambda: index.to_numpy()):
        with pytest.raises(ValueError, match=f"^{os.fspath(path)}: index is closed$"):
            call()


# ------------------------------------------------------------------------------------- the error tree
INDEXLIB = pathlib.Path(indexlib.__file__).parent


def _raises() -> list[tuple[str, int, str, type[BaseException], ast.Call | None]]:
    """Every ``raise <class>`` / ``raise <class>(...)`` in indexlib: (file, line, enclosing function, the class
    it resolves to in its module, the call). A bare ``raise`` and a raise of a caught exception held in a
    variable (``raise stop``) re-raise something already raised and are left out."""
    found = []
    for path in sorted(INDEXLIB.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        parts = path.relative_to(INDEXLIB.parent).with_suffix("").parts
        module = importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        tree = ast.parse(path.read_text(), str(path))
        functions: dict[int, str] = {}  # node -> the innermost function holding it (ast.walk: outer first)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.update((id(inner), node.name) for inner in ast.walk(node))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            call = node.exc if isinstance(node.exc, ast.Call) else None
            target = call.func if call is not None else node.exc
            value: object = None
            if isinstance(target, ast.Name):
                value = vars(module).get(target.id, getattr(builtins, target.id, None))
            if not (isinstance(value, type) and issubclass(value, BaseException)):
                continue
            found.append(
                (str(path.relative_to(INDEXLIB.parent)), node.lineno, functions.get(id(node), ""), value, call)
            )
    return found


def _allowed_builtin(cls: type[BaseException], function: str, call: ast.Call | None) -> bool:
    """The builtins indexlib may raise: a programming error (``AssertionError``, ``NotImplementedError``), a
    module ``__getattr__``'s ``AttributeError``, and the OS's own error for a file (an ``OSError`` built with an
    errno, as ``os`` raises it)."""
    if cls in (AssertionError, NotImplementedError):
        return True
    if cls is AttributeError and function == "__getattr__":
        return True
    if issubclass(cls, OSError) and call is not None and len(call.args) >= 2:
        first = call.args[0]
        return not (isinstance(first, ast.Constant) and isinstance(first.value, str))
    return False


def test_every_error_indexlib_raises_on_purpose_is_in_the_kafka_index_error_tree():
    raises = _raises()
    ours = [r for r in raises if issubclass(r[3], KafkaIndexError)]
    assert len(ours) > 100  # the walk sees the library's raises
    outside = [
        f"{file}:{line}: {cls.__name__}"
        for file, line, function, cls, call in raises
        if not issubclass(cls, KafkaIndexError) and not _allowed_builtin(cls, function, call)
    ]
    assert outside == []


#: every error class of the tree except the base, with the builtin a caller may still catch it as
ERROR_CLASSES = [
    (indexlib.CorruptIndexError, ValueError),
    (indexlib.InvalidOffsetError, ValueError),
    (indexlib.IndexOffsetOverflowError, ValueError),
    (indexlib.IndexFullError, ValueError),
    (indexlib.InvalidTimestampError, ValueError),
    (indexlib.ReadOnlyIndexError, PermissionError),
    (indexlib.ClosedIndexError, ValueError),
    (indexlib.IndexArgumentError, ValueError),
    (indexlib.IndexInUseError, BufferError),
    (indexlib.ShortWriteError, OSError),
    (indexlib.NotARegularFileError, ValueError),
    (indexlib.FileNameError, ValueError),
    (indexlib.InvalidRecordError, ValueError),
    (SnapshotError, ValueError),
    (CheckpointError, ValueError),
    (MetaPropertiesError, ValueError),
    (recovery.SettingError, ValueError),
    (FindingKindError, ValueError),
    (VerifyInputError, ValueError),
    (storage.LogDirError, ValueError),
    (storage.PartitionFilterError, ValueError),
    (engine.RunOptionError, ValueError),
    (engine.TargetDirError, ValueError),
    (engine.LockedLogDirError, RuntimeError),
    (engine.RunInUseError, RuntimeError),
    (engine.WorkerDiedError, RuntimeError),
    (engine.StagingClosedError, RuntimeError),
    (UnrebuildableSegmentError, ValueError),
    (UnrebuildableSegmentError, TypeError),
    (BackupExistsError, FileExistsError),
    (ChangedSinceReadError, ValueError),
    (SyncfsUnavailableError, ValueError),
    (cli.JsonTargetError, ValueError),
    (cli.LookupTargetError, ValueError),
    (cli.SettingsFileError, ValueError),
    (InputError, Exception),
    (testing.GeneratorArgumentError, ValueError),
    (CodecUnavailableError, ImportError),
    (cli.DumpUsageError, ValueError),
    (ClusterMetadataError, OSError),
    (UnknownStoreError, ValueError),
    (ObjectStoreError, RuntimeError),
    (ObjectChangedError, RuntimeError),
    (RemoteInventoryError, ValueError),
    (NotYetTieredError, ValueError),
]


@pytest.mark.parametrize("cls, builtin", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_each_error_is_a_kafka_index_error_and_the_builtin_it_replaced(cls, builtin):
    assert issubclass(cls, KafkaIndexError) and issubclass(cls, builtin)
    error = cls("/d/a.index: bad")
    assert isinstance(error, KafkaIndexError) and isinstance(error, builtin)
    assert str(error) == "/d/a.index: bad"
    assert pickle.loads(pickle.dumps(error)).args == error.args  # crosses from a Spark executor intact


def test_every_error_class_of_indexlib_is_listed():
    """A new error class joins ERROR_CLASSES (and so the check above)."""
    listed = {cls for cls, _ in ERROR_CLASSES}
    defined = {cls for *_, cls, _ in _raises() if issubclass(cls, KafkaIndexError)}
    assert defined <= listed
