"""indexlib.format.errors: every error message names the file it concerns, in one line."""

from __future__ import annotations

import errno
import os

import pytest

from indexlib import OffsetIndex, TimeIndex
from indexlib.format.errors import describe_error, error_line


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
