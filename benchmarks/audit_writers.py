"""Many brokers' runs writing into one audit table at the same instant (issue 23): how many fail, how many rows
are lost or doubled, how many commit conflicts are retried, how long a write takes.

Each writer is its own process (as each broker's run is), holding one broker's rows of one shared run id (a
fleet's brokers share the run id and the log dir path), and calls ``jobs.audit.write`` at one agreed instant.
The table is a local path, or on a real S3 API server (moto's, on 127.0.0.1: it enforces the conditional writes
delta-rs relies on, made atomic here as S3 makes them: :func:`serve_moto`). Then the table is read back: every broker's rows exactly once.

    .venv/bin/python benchmarks/audit_writers.py [--writers 8] [--rows 200] [--runs 3] [--where local,s3]

``--quick``: 4 writers, 20 rows, one run. Needs ``moto[server]`` for ``s3`` (the ``spark-test`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

BUCKET = "kafka-index-audit"
CLUSTER = "fleet-cluster"
LOG_DIR = "/var/lib/kafka/data"  # the same path on every broker


def s3_options(endpoint: str) -> dict[str, str]:
    """delta-rs storage options for moto's server (any key pair; plain HTTP on 127.0.0.1)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: a request in moto's log: (method, path with its query, status)
REQUEST = re.compile(rb'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST) (\S+) HTTP/1\.[01](?:\x1b\[[0-9;]*m)*" (\d{3})')


@contextlib.contextmanager
def moto_server(log_path: str | None = None, env: dict[str, str] | None = None) -> Iterator[str]:
    """A real S3 API server (``moto.server``) on 127.0.0.1 with the bucket made; yields its endpoint. Stopped by
    its PID at the end. ``env``: more of its environment (``INITIAL_NO_AUTH_ACTION_COUNT``: credentials checked
    after that many requests)."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(log_path or os.devnull, "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--moto-server", str(port)],
        stdout=log,
        stderr=log,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start on {endpoint}") from None
                time.sleep(0.1)
        request = urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def serve_moto(port: int) -> None:
    """moto's S3 server on 127.0.0.1:``port``, as ``python -m moto.server`` runs it, but with S3's conditional writes
    atomic, as S3 makes them: moto checks ``If-None-Match``/``If-Match`` and then writes, and its threaded server
    let two PUTs pass the check together (under load: one writer's Delta commit then silently replaced another's,
    and its rows were lost). A conditional PUT holds one lock from its check to its write; nothing else waits."""
    import threading

    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    conditional = threading.Lock()

    def atomic_conditional_puts(environ, start_response):  # type: ignore[no-untyped-def]
        if environ["REQUEST_METHOD"] == "PUT" and ({"HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH"} & environ.keys()):
            with conditional:
                return list(app(environ, start_response))
        return app(environ, start_response)

    run_simple("127.0.0.1", port, atomic_conditional_puts, threaded=True, request_handler=MotoRequestHandler)


def broker_rows(broker: int, run_id: str, rows: int, started: datetime) -> list[dict[str, object]]:
    """One broker's rows of the run: ``rows`` segment rows and its run row (the key columns as a run writes them)."""
    from jobs import audit

    common = audit.run_common(run_id, "verify", started, started)
    identity = {"cluster_id": CLUSTER, "broker_id": broker, "directory_id": f"dir-{broker}"}
    segments = [
        {**common, **identity, "record_type": "segment", "log_dir": LOG_DIR, "topic": f"orders{i % 4}",
         "partition": i // 4, "base_offset": 0, "segments": 1, "status": "ok", "action": "none", "files_written": []}
        for i in range(rows)
    ]  # fmt: skip
    run = {**common, **identity, "record_type": "run", "log_dir": LOG_DIR, "topic": "", "partition": -1,
           "base_offset": -1, "segments": rows, "status": "ok", "action": "verify", "exit_code": 0}  # fmt: skip
    return [*segments, run]


def child(args: argparse.Namespace) -> None:
    """One writer: build the broker's rows, wait for the agreed instant, write; one JSON line on stdout."""
    from jobs import audit

    options = json.loads(args.storage_options)
    started = datetime.fromisoformat(args.started)
    table = audit.to_table(broker_rows(args.broker, args.run_id, args.rows, started))
    time.sleep(max(0.0, args.start_at - time.time()))
    clock = time.perf_counter()
    try:
        result = audit.write(args.table, table, storage_options=options)
        out = {"broker": args.broker, "ok": True, "inserted": result.inserted, "retries": result.retries}
    except Exception as exc:
        out = {"broker": args.broker, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out["seconds"] = time.perf_counter() - clock
    print(json.dumps(out), flush=True)


def run_writers(
    table: str, writers: int, rows: int, storage_options: dict[str, str], run_id: str = "fleet-run-1"
) -> dict[str, object]:
    """``writers`` processes, one broker each, write at one instant; returns their results and the table's
    rows of ``run_id`` per broker (counts, and keys seen more than once)."""
    from jobs import audit_queries

    started = datetime.now(UTC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, *filter(None, [os.environ.get("PYTHONPATH")])])}
    start_at = time.time() + 3.0 + 0.25 * writers  # every child imported and its rows built by then
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                "--table",
                table,
                "--broker",
                str(b),
                "--run-id",
                run_id,
                "--rows",
                str(rows),
                "--start-at",
                str(start_at),
                "--started",
                started.isoformat(),
                "--storage-options",
                json.dumps(storage_options),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )  # fmt: skip
        for b in range(1, writers + 1)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines else {"ok": False, "error": f"exit {p.returncode}: {err[-500:]}"})
    stored = audit_queries.query(
        table,
        f"SELECT broker_id, record_type, topic, \"partition\", base_offset FROM audit WHERE run_id = '{run_id}'",
        storage_options,
    ).to_pylist()
    keys = [(r["broker_id"], r["record_type"], r["topic"], r["partition"], r["base_offset"]) for r in stored]
    per_broker: dict[int, int] = {}
    for r in stored:
        per_broker[r["broker_id"]] = per_broker.get(r["broker_id"], 0) + 1
    return {
        "results": results,
        "failed": sum(not r["ok"] for r in results),
        "retries": sum(r.get("retries", 0) for r in results),
        "rows": len(stored),
        "expected": writers * (rows + 1),
        "duplicates": len(keys) - len(set(keys)),
        "per_broker": per_broker,
        "seconds": [r["seconds"] for r in results if "seconds" in r],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rows", type=int, default=200, help="segment rows per broker (plus its run row)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--where", default="local,s3", help="local, s3 or both")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("--table", "--run-id", "--started", "--storage-options"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--broker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--moto-server", type=int, metavar="PORT", help=argparse.SUPPRESS)  # moto_server's process
    args = parser.parse_args(argv)
    if args.moto_server is not None:
        serve_moto(args.moto_server)
        return 0
    if args.child:
        child(args)
        return 0
    if args.quick:
        args.writers, args.rows, args.runs = 4, 20, 1
    print(f"# {args.writers} writers x {args.rows + 1} rows, one table, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n")
    print("| table | run | failed | rows (expected) | duplicates | retries | write s (median, max) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    bad = 0
    for where in args.where.split(","):
        for run in range(1, args.runs + 1):
            with contextlib.ExitStack() as stack:
                if where == "s3":
                    endpoint = stack.enter_context(moto_server())
                    table, options = f"s3://{BUCKET}/audit-{run}", s3_options(endpoint)
                else:
                    table, options = os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "audit"), {}
                got = run_writers(table, args.writers, args.rows, options)
            seconds: list[float] = got["seconds"]  # type: ignore[assignment]
            print(
                f"| {where} | {run} | {got['failed']} | {got['rows']} ({got['expected']}) | {got['duplicates']} | "
                f"{got['retries']} | {statistics.median(seconds):.2f}, {max(seconds):.2f} |"
            )
            bad += bool(got["failed"] or got["rows"] != got["expected"] or got["duplicates"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
