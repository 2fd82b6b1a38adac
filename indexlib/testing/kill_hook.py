"""A ``sitecustomize`` hook for tests that kill a run at a chosen call: ``KILL_AT=<family>:<N>`` makes the process
send itself SIGKILL just before its Nth call of that family (:data:`KILLED_AT`: every change to a name or a size,
and every fsync), with one counter for all its threads (``strace -e inject=...:when=N`` counts per thread, and a
run fsyncs from several threads where an fsync waits); ``KILL_AT=count:<file>`` counts every family and writes the
counts there as JSON at exit. The kill is real; only the moment is chosen."""

from __future__ import annotations

import os

#: the calls a kill can be sent at, by family: ``os`` functions wrapped
KILLED_AT = {
    "rename": ("rename", "replace"),
    "truncate": ("truncate", "ftruncate"),
    "unlink": ("unlink", "remove"),
    "fsync": ("fsync", "fdatasync"),
}

KILL_HOOK = f"""
import atexit, json, os, signal, threading
_family, _, _arg = os.environ.get("KILL_AT", "").partition(":")
_lock, _counts = threading.Lock(), {{}}
def _hooked(family, real):
    def call(*args, **kwargs):
        with _lock:
            _counts[family] = n = _counts.get(family, 0) + 1
            if family == _family and n == int(_arg):
                os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
if _family:
    for _name, _calls in {KILLED_AT!r}.items():
        for _call in _calls:
            setattr(os, _call, _hooked(_name, getattr(os, _call)))
if _family == "count":
    atexit.register(lambda: open(_arg, "w").write(json.dumps(_counts)))
"""


def kill_hook_env(directory: str | os.PathLike[str], kill_at: str, pythonpath: str = "") -> dict[str, str]:
    """Write the hook into ``directory`` (made if missing); the environment a Python child needs to load it with
    ``kill_at``: ``KILL_AT``, ``PYTHONPATH`` (the hook first, then ``pythonpath``), and no ``.pyc`` writes (so that
    the counts are the run's own)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "sitecustomize.py"), "w") as f:
        f.write(KILL_HOOK)
    path = os.pathsep.join(p for p in (os.fspath(directory), pythonpath) if p)
    return {"KILL_AT": kill_at, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
