"""Reading a log dir from object storage: how fast, how much memory, and why obstore. Against moto's S3 server on
127.0.0.1, started as the tests start it (``audit_writers.moto_server``: plain moto, no patch).

Plain moto answers every GET, ranged or not, by reading the whole object out of its store first: a ranged GET costs
moto about the object's size, so its serving rate falls as objects grow (~55 MB/s in 8 MiB windows of a 256 MiB
object, ~14 MB/s of a 1 GiB one, on the machines measured). The study of client libraries (``/work/libtrial``,
2026-11-28) patched moto in-process to serve a range in O(range); this runner keeps plain moto, so the speed limit
beside each figure is what ``http.client`` (the lightest client: a fixed signature, which moto does not check)
gets from the same server in the same windows.

* ``verify``: a generated log dir (corpus a of ``common.CORPORA``: 4 partitions x 2 segments of 256 MiB, 16 KiB
  batches, with their index files) uploaded, then in each run, the order alternating: the whole process
  ``python -m indexlib verify s3://... --jobs N`` (N = 1, 2), a plain read of the same ``.log`` objects in the same
  8 MiB ranged windows with obstore (a whole process, N threads: one request in flight each, as a worker's one
  read ahead), the same with ``http.client`` (the limit), and ``verify`` of the local copy. The issue's target:
  verify within 1.5x of the plain read.
* ``memory``: two partitions of one 1 GiB segment each (170-byte batches: the most index entries), ``verify
  s3://... --partitions 0 --jobs 1`` (one process: it is the worker) and ``verify s3://... --jobs 2`` (the parent, a fork
  server and 2 workers), and the first beside it from the local copy; each process's own peak (VmHWM, read every
  2 ms until it exits) and the tree's (VmRSS summed, sampled). Target: under 256 MiB per worker.
* ``libraries``: obstore, ``pyarrow.fs.S3FileSystem`` and fsspec's s3fs (skipped in one line when not importable;
  ``--s3fs-python`` runs its child with another interpreter) and ``http.client`` (the limit), each in its own
  process per run: a 1 GiB object read in 8 MiB ranged windows (MB/s; the process's peak RSS), then 200 objects
  of 300 KiB read whole (objects/s); and whether the library can send a conditional ranged read (If-Match).

    .venv/bin/python benchmarks/object_storage.py [--parts verify,memory,libraries] [--runs 3] [--json FILE]
        [--s3fs-python PYTHON] [--quick]

``--quick``: small sizes, one run (a smoke test, not a figure). MB = 1e6 bytes, MiB = 2**20 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from audit_writers import BUCKET, REQUEST, moto_server, s3_options  # noqa: E402
from common import (  # noqa: E402
    CMD,
    MIB,
    BenchError,
    MachineWatch,
    _descendants,
    compile_bytecode,
    header,
    make_corpus,
    make_log_dir,
    med,
    run_indexlib,
    runs_list,
    scratch,
    timed,
    tree_env,
)

WINDOW = 8 << 20  # = indexlib.storage.object_store.CHUNK (checked in main): the ranged reads of a .log
REGION = "us-east-1"
TARGET_RATIO, TARGET_WORKER_MIB = 1.5, 256
LIBRARIES = ("obstore", "pyarrow", "s3fs", "http")
#: what http.client sends: no request is anonymous (moto refuses those in a private bucket), none is checked
AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
)
IF_MATCH = {  # can the library send a conditional ranged read (If-Match)? From its API (checked against moto)
    "obstore": "yes: `get(store, key, options={'range': ..., 'if_match': etag})` (412 -> PreconditionError); "
    "what indexlib sends",
    "pyarrow": "no: `open_input_file` / `open_input_stream` take no request options; a file opened before the "
    "object is replaced reads the new bytes silently",
    "s3fs": "yes, through its file object: `fs.open(path, 'rb')` sends the ETag of its HEAD as If-Match on every "
    "ranged read (FileExpired); `cat_file(path, start, end)` sends none",
    "http": "by hand (any header)",
}


# ------------------------------------------------------------------------------------- clients (in the children)
class Client:
    """One library's two calls: ``ranges(key)`` -> read(start, end) of one object; ``whole(key)``."""

    def __init__(self, lib: str, endpoint: str) -> None:
        host, port = endpoint.split("://", 1)[1].rsplit(":", 1)
        if lib == "obstore":
            import obstore
            from obstore.store import S3Store

            store = S3Store(
                BUCKET, endpoint=endpoint, access_key_id="testing", secret_access_key="testing", region=REGION,
                client_options={"allow_http": True},
            )  # fmt: skip
            self.version = obstore.__version__
            self.ranges = lambda key: lambda start, end: obstore.get_range(store, key, start=start, end=end)
            self.whole = lambda key: obstore.get(store, key).bytes()
        elif lib == "pyarrow":
            import pyarrow
            import pyarrow.fs

            fs = pyarrow.fs.S3FileSystem(
                access_key="testing", secret_key="testing", region=REGION, endpoint_override=f"{host}:{port}",
                scheme="http",
            )  # fmt: skip
            self.version = pyarrow.__version__

            def ranges(key):
                file = fs.open_input_file(f"{BUCKET}/{key}")  # a HEAD, then a ranged GET per read_at
                return lambda start, end: file.read_at(end - start, start)

            def whole(key):
                with fs.open_input_stream(f"{BUCKET}/{key}") as stream:
                    return stream.read()

            self.ranges, self.whole = ranges, whole
        elif lib == "s3fs":
            import s3fs

            fs = s3fs.S3FileSystem(
                key="testing", secret="testing", endpoint_url=endpoint, client_kwargs={"region_name": REGION}
            )
            self.version = s3fs.__version__

            def ranges(key):
                file = fs.open(f"{BUCKET}/{key}", "rb", block_size=WINDOW, cache_type="none")  # If-Match reads

                def read(start, end):
                    file.seek(start)
                    return file.read(end - start)

                return read

            self.ranges, self.whole = ranges, lambda key: fs.cat_file(f"{BUCKET}/{key}")
        else:  # http.client: one keep-alive connection; moto takes any signature (it checks none by default)
            import http.client

            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            self.version = f"Python {sys.version.split()[0]}"

            def get(key, headers):
                conn.request("GET", f"/{BUCKET}/{key}", headers={**headers, "Authorization": AUTHORIZATION})
                response = conn.getresponse()
                body = response.read()
                if response.status >= 300:
                    raise OSError(f"GET {key}: HTTP {response.status}")
                return body

            self.ranges = lambda key: lambda start, end: get(key, {"Range": f"bytes={start}-{end - 1}"})
            self.whole = lambda key: get(key, {})


def vm_kib(field: str, pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), 0)
    except OSError:
        return 0


def read_windows(client: Client, key: str, size: int) -> int:
    read = client.ranges(key)
    return sum(len(read(start, min(size, start + WINDOW))) for start in range(0, size, WINDOW))


def child(spec: dict) -> None:
    """``read``: the objects in 8 MiB windows by ``jobs`` threads (an object each at a time, biggest first).
    ``library``: one 1 GiB object in windows, then the small objects whole; its figures on stdout as JSON."""
    if spec["what"] == "read":
        todo: queue.Queue = queue.Queue()
        for key, size in sorted(spec["objects"], key=lambda o: -o[1]):
            todo.put((key, size))

        def reader() -> int:
            client, got = Client(spec["lib"], spec["endpoint"]), 0
            while True:
                try:
                    key, size = todo.get_nowait()
                except queue.Empty:
                    return got
                got += read_windows(client, key, size)

        with ThreadPoolExecutor(spec["jobs"]) as threads:
            got = sum(threads.map(lambda _: reader(), range(spec["jobs"])))
        if got != sum(size for _, size in spec["objects"]):
            raise SystemExit(f"read {got} bytes, not {sum(size for _, size in spec['objects'])}")
        return
    client = Client(spec["lib"], spec["endpoint"])
    ready = vm_kib("VmHWM")
    started = time.perf_counter()
    got = read_windows(client, spec["big"], spec["big_size"])
    seq = time.perf_counter() - started
    peak = vm_kib("VmHWM")
    started = time.perf_counter()
    small = sum(len(client.whole(key)) for key in spec["small"])
    whole = time.perf_counter() - started
    print(json.dumps({"version": client.version, "seq_s": seq, "bytes": got, "small_s": whole, "small_bytes": small,
                      "ready_kib": ready, "peak_kib": peak}))  # fmt: skip


def run_child(spec: dict, python: str = sys.executable) -> str:
    proc = subprocess.run([python, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"child {spec['what']} {spec['lib']} exited with {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


# ------------------------------------------------------------------------------------------ the parent's tools
def upload(endpoint: str, local_root: str, prefix: str) -> list[tuple[str, int]]:
    """Every file under ``local_root`` as an object under ``prefix``, laid out as on disk; the (key, size) of each."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=endpoint, region=REGION, access_key_id="testing", secret_access_key="testing",
                    client_options={"allow_http": True})  # fmt: skip
    objects = []
    for path in sorted(Path(local_root).rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(local_root)}"
            obstore.put(store, key, path)
            objects.append((key, path.stat().st_size))
    return objects


def flags(endpoint: str) -> list[str]:
    return [flag for k, v in s3_options(endpoint).items() for flag in ("--storage-option", f"{k}={v}")]


def requests_since(log: str, offset: int) -> str:
    """The requests moto logged after ``offset``, counted by method and status (``GET 206``: a ranged read)."""
    with open(log, "rb") as f:
        f.seek(offset)
        found = REQUEST.findall(f.read())
    counts: dict[str, int] = {}
    for method, path, status in found:
        what = f"{method.decode()} {'list' if b'list-type' in path else status.decode()}"
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))


def process_peaks(args: list[str], interval: float = 0.002) -> dict:
    """One ``python -m indexlib ARGS`` (exit 0): each process's own peak RSS (VmHWM, read every ``interval`` s
    until it exits) with its role, and the tree's peak (VmRSS summed over its processes, sampled)."""
    with open(os.devnull, "w") as out:
        proc = subprocess.Popen(CMD + args, env=tree_env(), stdout=out, stderr=subprocess.PIPE, text=True)
        roles: dict[int, str] = {}
        peaks: dict[int, int] = {}
        tree = 0
        while proc.poll() is None:
            total = 0
            for pid in _descendants(proc.pid):
                if pid not in roles:
                    roles[pid] = role_of(pid, proc.pid, roles)
                peaks[pid] = max(peaks.get(pid, 0), vm_kib("VmHWM", pid))
                total += vm_kib("VmRSS", pid)
            tree = max(tree, total)
            time.sleep(interval)
        stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise BenchError(f"`python -m indexlib {' '.join(args)}` exited with {proc.returncode}: {stderr[-2000:]}")
    return {"procs": [(roles[pid], peaks[pid] * 1024) for pid in sorted(peaks)], "tree": tree * 1024}


def role_of(pid: int, main: int, roles: dict[int, str]) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return "gone"
    if pid == main:
        return "main"
    if roles.get(parent) == "fork server":
        return "worker"
    if b"resource_tracker" in cmdline:
        return "resource tracker"
    return "fork server" if b"forkserver" in cmdline else "other"


def cell(seconds: list[float], nbytes: int) -> str:
    return f"{med(seconds):.1f} s = {nbytes / med(seconds) / 1e6:.0f} MB/s"


# -------------------------------------------------------------------------------------------------- the parts
def verify_part(root: str, args: argparse.Namespace) -> dict:
    corpus = make_corpus(root, "a", args.scale, indexes=True)
    log = os.path.join(root, "moto-verify.log")
    watch = MachineWatch()
    with moto_server(log) as endpoint:
        print("[verify] uploading ...", file=sys.stderr, flush=True)
        objects = upload(endpoint, corpus["log_dir"], "logs-a")
        logs = [(key, size) for key, size in objects if key.endswith(".log")]
        uri = f"s3://{BUCKET}/logs-a"

        def way(kind: str, jobs: int) -> None:
            if kind == "verify":
                run_indexlib(["verify", uri, *flags(endpoint), "--jobs", str(jobs), "-q"])
            elif kind == "local":
                run_indexlib(["verify", corpus["log_dir"], "--jobs", str(jobs), "-q"])
            else:
                run_child({"what": "read", "lib": kind, "endpoint": endpoint, "objects": logs, "jobs": jobs})

        order = [(kind, jobs) for jobs in (1, 2) for kind in ("verify", "obstore", "http", "local")]
        runs: list[dict[str, float]] = []
        requests: dict[str, str] = {}
        for run in range(args.runs):
            watch.before_run()
            seconds = {}
            for kind, jobs in order if run % 2 == 0 else order[::-1]:
                print(f"[verify run {run + 1}/{args.runs}] {kind} --jobs {jobs}", file=sys.stderr, flush=True)
                offset = os.path.getsize(log)
                seconds[f"{kind} {jobs}"] = timed(lambda: way(kind, jobs))
                requests.setdefault(f"{kind} {jobs}", requests_since(log, offset))
            runs.append(seconds)
    nbytes = sum(size for _, size in logs)
    header(f"verify: {corpus['label']}", args.runs, watch)
    print()
    print(
        f"Reading {nbytes / 1e6:.0f} MB of `.log` from moto's S3 server (plain moto: a ranged GET costs it the whole "
        "object); whole processes, medians; plain read = the same objects in the same 8 MiB ranged GETs, one in "
        "flight per thread; limit = the same with http.client; ratio per run, then the median:"
    )
    print()
    print(
        "| `--jobs` | `verify s3://...` | plain read, obstore | **verify / plain read** (target <= "
        f"{TARGET_RATIO}x) | limit: plain read, http.client | `verify` of the local copy (tmpfs) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for jobs in (1, 2):
        s = {kind: [r[f"{kind} {jobs}"] for r in runs] for kind in ("verify", "obstore", "http", "local")}
        ratios = [v / o for v, o in zip(s["verify"], s["obstore"], strict=True)]
        met = "met" if med(ratios) <= TARGET_RATIO else "**missed**"
        print(
            f"| {jobs} | {cell(s['verify'], nbytes)} | {cell(s['obstore'], nbytes)} | **{med(ratios):.2f}x** "
            f"({runs_list(ratios)}), {met} | {cell(s['http'], nbytes)} | {cell(s['local'], nbytes)} |"
        )
    print()
    print("Requests moto logged per run (first run):")
    print()
    for name, counts in requests.items():
        if not name.startswith("local"):
            print(f"* {name.replace(' ', ' --jobs ')}: {counts}")
    return {"bytes": nbytes, "runs": runs, "requests": requests}


def memory_part(root: str, args: argparse.Namespace) -> dict:
    seg_bytes = max(1 << 20, int((1 << 30) * args.scale))
    print(f"[memory] generating 2 x {seg_bytes} B ...", file=sys.stderr, flush=True)
    pdirs, _, batches, _ = make_log_dir(os.path.join(root, "mem"), "mem", 2, 1, seg_bytes, 170, indexes=True)
    watch = MachineWatch()
    with moto_server(os.path.join(root, "moto-memory.log")) as endpoint:
        upload(endpoint, os.path.join(root, "mem"), "mem")
        uri = f"s3://{BUCKET}/mem"
        cases = {
            "S3, one partition, `--jobs 1`": [
                "verify",
                uri,
                "--partitions",
                "0",
                *flags(endpoint),
                "--jobs",
                "1",
                "-q",
            ],
            "S3, two partitions, `--jobs 2`": ["verify", uri, *flags(endpoint), "--jobs", "2", "-q"],
            "local copy, one partition, `--jobs 1`": ["verify", pdirs[0], "--jobs", "1", "-q"],
        }
        runs = []
        for run in range(args.runs):
            watch.before_run()
            print(f"[memory run {run + 1}/{args.runs}]", file=sys.stderr, flush=True)
            runs.append({case: process_peaks(case_args) for case, case_args in cases.items()})
    header(f"memory: 2 partitions x one segment of {seg_bytes / MIB:.0f} MiB, 170-byte batches", args.runs, watch)
    print()
    print(
        f"`verify` of one segment of {seg_bytes / MIB:.0f} MiB ({batches // 2:,} batches) each worker; peak RSS "
        "of each process (VmHWM), median [max] over the runs; with `--jobs 1` the one process is the worker:"
    )
    print()
    print(f"| case | worker peak RSS | <= {TARGET_WORKER_MIB} MiB | tree peak (VmRSS summed) | each process |")
    print("| --- | ---: | --- | ---: | --- |")
    for case in cases:
        procs = [r[case]["procs"] for r in runs]
        worker = [max(p for role, p in ps if role == ("worker" if "worker" in dict(ps) else "main")) for ps in procs]
        tree = [r[case]["tree"] for r in runs]
        each = ", ".join(f"{role} {p / MIB:.0f}" for role, p in procs[0])
        met = "yes" if med(worker) / MIB <= TARGET_WORKER_MIB else "**no**"
        print(
            f"| {case} | {med(worker) / MIB:.0f} MiB [{max(worker) / MIB:.0f}] | {met} | {med(tree) / MIB:.0f} MiB "
            f"| {each} (MiB, run 1) |"
        )
    return {"segment_bytes": seg_bytes, "runs": runs}


def libraries_part(root: str, args: argparse.Namespace) -> dict:
    big_size = max(WINDOW, int((1 << 30) * args.scale)) // WINDOW * WINDOW
    small_count = 200 if args.scale >= 1 else 20
    data = os.path.join(root, "libraries")
    os.makedirs(os.path.join(data, "small"))
    block = os.urandom(16 << 20)
    with open(os.path.join(data, "big.bin"), "wb") as f:
        for at in range(0, big_size, len(block)):
            f.write(block[: big_size - at])
    for n in range(small_count):
        with open(os.path.join(data, "small", f"{n:04d}.bin"), "wb") as f:
            f.write(os.urandom(300 << 10))
    pythons = {lib: sys.executable for lib in LIBRARIES}
    if args.s3fs_python:
        pythons["s3fs"] = args.s3fs_python
    if subprocess.run([pythons["s3fs"], "-c", "import s3fs"], capture_output=True).returncode != 0:
        print(f"libraries: s3fs is not importable by {pythons['s3fs']}: skipped (see --s3fs-python)")
        del pythons["s3fs"]
    watch = MachineWatch()
    with moto_server(os.path.join(root, "moto-libraries.log")) as endpoint:
        objects = upload(endpoint, data, "lib")
        small = [key for key, _ in objects if "/small/" in key]
        spec = {"what": "library", "endpoint": endpoint, "big": "lib/big.bin", "big_size": big_size, "small": small}
        runs = []
        for run in range(args.runs):
            watch.before_run()
            libs = list(pythons) if run % 2 == 0 else list(pythons)[::-1]
            print(f"[libraries run {run + 1}/{args.runs}] {', '.join(libs)}", file=sys.stderr, flush=True)
            runs.append({lib: json.loads(run_child({**spec, "lib": lib}, pythons[lib])) for lib in libs})
    header(f"libraries: one {big_size / MIB:.0f} MiB object, {small_count} x 300 KiB objects", args.runs, watch)
    print()
    print(
        "Each library in its own process per run, medians: the big object read in 8 MiB ranged windows, one at a "
        f"time; its peak RSS (VmHWM) and the RSS after the import and the client; then {small_count} objects of "
        "300 KiB read whole, one at a time. http.client: the limit (moto's own serving rate):"
    )
    print()
    print(
        f"| library | {big_size / MIB:.0f} MiB in 8 MiB windows | peak RSS of that read | after import + client "
        f"| {small_count} x 300 KiB whole | conditional ranged read (If-Match) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for lib in pythons:
        r = [x[lib] for x in runs]
        seq = [x["bytes"] / x["seq_s"] / 1e6 for x in r]
        per_s = [len(small) / x["small_s"] for x in r]
        name = f"{lib} {r[0]['version']}" if lib != "http" else f"http.client ({r[0]['version']}), the limit"
        print(
            f"| {name} | {med(seq):.0f} MB/s ({runs_list(seq, '{:.0f}')}) | {med([x['peak_kib'] for x in r]) / 1024:.0f}"
            f" MiB | {med([x['ready_kib'] for x in r]) / 1024:.0f} MiB | {med(per_s):.0f} objects/s "
            f"({runs_list(per_s, '{:.0f}')}) | {IF_MATCH[lib]} |"
        )
    return {"big_bytes": big_size, "small": small_count, "pythons": pythons, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="verify,memory,libraries")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure here")
    parser.add_argument("--s3fs-python", metavar="PYTHON", help="the interpreter of the s3fs child (default: this)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one run: a smoke test, not a figure")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    from indexlib.storage.object_store import CHUNK

    assert CHUNK == WINDOW, "the runner's windows are no longer indexlib's"
    import moto
    import obstore

    args.scale = 1 / 32 if args.quick else 1.0
    args.runs = 1 if args.quick else args.runs
    compile_bytecode()
    print(f"moto {moto.__version__} (plain), obstore {obstore.__version__}")
    raw = {}
    parts = {"verify": verify_part, "memory": memory_part, "libraries": libraries_part}
    try:
        for name in args.parts.split(","):
            with scratch(f"bench-object-storage-{name}-") as root:
                print()
                raw[name] = parts[name](root, args)
    except BenchError as exc:
        print(f"object_storage: FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
