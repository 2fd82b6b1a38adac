"""The ``dump`` command of both command lines (``python -m indexlib dump``, ``kafka-index dump``): several files
in turn, each dumped (or with ``--check`` checked), and one exit code.

Exit codes: 0 every file dumped without problems (or passed ``--check``); 1 a file has problems (listed) or
fails ``--check``; 2 a file cannot be dumped (missing, unreadable, not a segment or checkpoint file name, not a
regular file, a snapshot or checkpoint Kafka refuses to read: one line on stderr naming it, and the other files are
still dumped). The highest code wins. Several files with
``--json`` print one JSON array of the dumps (one file: the dump itself, as before).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from ...format.errors import error_line
from ...storage.store import LOCAL, ObjectStoreError, local_copy
from ..run_planning import store_spec
from .index_check import check_index_file, format_check
from .model import DumpOptions, DumpUsageError, dump_kind
from .reading import read_dump
from .text import iter_json, write_dump, write_lines

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


def options_from(args: argparse.Namespace) -> DumpOptions:
    """The :class:`DumpOptions` the parsed options ask for (:func:`indexlib.cli.options.add_dump_command`)."""
    return DumpOptions(
        deep_iteration=args.deep_iteration,
        print_data_log=args.print_data_log,
        payload_format=args.payload_format,
        decoder=args.decoder,
        max_bytes=args.max_bytes,
    )


def run_dump_command(args: argparse.Namespace, out: TextIO, err: TextIO, prog: str) -> int:
    """Dump (or check) every FILE of ``args`` to ``out``; errors one line each on ``err``; the exit code."""
    options = options_from(args)
    if args.check and (args.as_json or args.deep_iteration or args.print_data_log or args.decoder):
        raise DumpUsageError("--check prints its verdict as text and takes no other dump option")
    try:
        store = store_spec(args.files, getattr(args, "storage_option", None))
    except ValueError as exc:
        raise DumpUsageError(str(exc)) from None
    if args.check and store != LOCAL:
        raise DumpUsageError("--check reads index files on a local disk; verify checks a log dir in object storage")
    code = EXIT_OK
    written = 0
    several_json = args.as_json and len(args.files) > 1 and not args.check
    if several_json:
        out.write("[")
    for path in args.files:
        local = path
        try:
            if args.check:
                result = check_index_file(path)
                write_lines(out, format_check(result))
                code = max(code, EXIT_PROBLEMS if result.failed else EXIT_OK)
                continue
            limit = options.max_bytes if dump_kind(path)[1] == "log" else None
            with local_copy(store, path, limit) as local:  # an object: its bytes in a private temporary file
                if several_json:
                    dump = read_dump(local, options, shown=path)
                    out.write(("" if written == 0 else ",\n") + "".join(iter_json(dump)))
                    written += 1
                    code = max(code, EXIT_PROBLEMS if dump.problems else EXIT_OK)
                else:
                    code = max(code, write_dump(local, args.as_json, out, options, shown=path))
        except BrokenPipeError:  # stdout, not the file: the command line ends quietly
            raise
        except (OSError, ValueError, ObjectStoreError) as exc:
            out.flush()
            print(f"{prog}: error: {error_line(exc, path).replace(local, path)}", file=err)
            code = EXIT_BAD_INPUT
    if several_json:
        out.write("]\n")
    out.flush()
    return code
