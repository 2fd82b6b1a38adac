"""How much memory? Peak memory of whole ``python -m indexlib`` processes (issues 3, 10, 11), each run untimed
under ``/usr/bin/time -v`` (``common.memory_run``): ``ru_maxrss`` (exact peak RSS of the largest process, which
counts mapped file pages: the pure-Python scan maps the whole segment, the compiled one reads it through a 1 MiB
buffer) and the sampled peaks of ``RssAnon`` (the processes' own memory) and ``VmRSS`` summed over the process tree.

* ``segment``: one partition holding one segment (``--segments``, default 170,170p,4k,16k: 1 GiB of 170-byte
  batches, the same of one idempotent producer, of 4 KiB, of 16 KiB batches; times ``--scale``):
  ``rebuild PARTITION_DIR --output-dir OUT --jobs 1`` compiled and pure (``KAFKA_INDEX_PURE_PYTHON=1``), and the
  compiled ``verify`` of the healthy partition; "above the baseline" subtracts the peak ``RssAnon`` of the same
  command on a one-batch partition. Issue 11's bound: <= 64 MiB above the baseline.
* ``logdir``: corpora a and b (``common.CORPORA``): ``rebuild LOG_DIR --output-dir OUT --jobs 2`` (the parent and
  its 2 pool workers), and beside it one single-partition ``--jobs 1`` process.

Run: ``.venv/bin/python benchmarks/memory.py [--cases segment,logdir] [--segments 170,16k] [--runs R] [--scale S]
[--json FILE]``; ``--quick``: small files, one run. The 5 runs of a case agree within 1 MiB on the machines
measured; 3 runs are enough.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    LOG_NAME,
    MIB,
    BenchError,
    compile_bytecode,
    header,
    make_corpus,
    med,
    memory_run,
    scratch,
)

PURE = {"KAFKA_INDEX_PURE_PYTHON": "1"}
COMPILED = {"KAFKA_INDEX_PURE_PYTHON": ""}
SEGMENTS = {  # key: (label, segment bytes, batch bytes, producer id)
    "170": ("1 GiB of 170-byte batches", 1 << 30, 170, -1),
    "170p": ("1 GiB of 170-byte batches of an idempotent producer", 1 << 30, 170, 42),
    "4k": ("1 GiB of 4 KiB batches", 1 << 30, 4096, -1),
    "16k": ("1 GiB of 16 KiB batches", 1 << 30, 16384, -1),
}
TARGET_ANON_MIB = 64.0


def f(values) -> str:
    return f"{med(values) / MIB:.0f} MiB [{max(values) / MIB:.0f}]"


def segment_case(root: str, args) -> None:
    from indexlib.testing.generate import write_uniform_segment

    tiny = os.path.join(root, "tiny", "bench-0")
    os.makedirs(tiny)
    write_uniform_segment(os.path.join(tiny, LOG_NAME), total_bytes=170, batch_bytes=170)
    cases = {}
    for key in args.segments.split(","):
        label, seg_bytes, batch, producer = SEGMENTS[key]
        pdir = os.path.join(root, f"case-{key}", "bench-0")
        os.makedirs(pdir)
        n = write_uniform_segment(
            os.path.join(pdir, LOG_NAME), total_bytes=max(1 << 20, int(seg_bytes * args.scale)), batch_bytes=batch,
            producer_id=producer,
        )  # fmt: skip
        cases[key] = (pdir, n)
    runs = []
    for run in range(args.runs):
        r: dict = {}
        for mode, env in (("compiled", COMPILED), ("pure", PURE)):
            out = tempfile.mkdtemp(dir=root)
            r[f"base {mode}"] = memory_run(
                ["rebuild", tiny, "--output-dir", out, "--jobs", "1"], interval=0.0005, **env
            )
            shutil.rmtree(out)
        for key, (pdir, _n) in cases.items():
            print(f"[run {run + 1}/{args.runs}] segment {key}", file=sys.stderr, flush=True)
            for mode, env in (("compiled", COMPILED), ("pure", PURE)):
                out = tempfile.mkdtemp(dir=root)
                r[f"{key} {mode}"] = memory_run(
                    ["rebuild", pdir, "--output-dir", out, "--jobs", "1"], interval=0.0005, **env
                )
                if mode == "compiled":  # a healthy partition: the rebuilt index files beside a link of the .log
                    healthy = os.path.join(out, "bench-0")
                    os.link(os.path.join(pdir, LOG_NAME), os.path.join(healthy, LOG_NAME))
                    r[f"{key} verify"] = memory_run(["verify", healthy, "--jobs", "1"], interval=0.0005, **env)
                shutil.rmtree(out)
        runs.append(r)
    header(f"segment: files in {root} ; --scale {args.scale}", len(runs))
    print()
    print(
        "One segment, `python -m indexlib rebuild PARTITION_DIR --output-dir OUT --jobs 1` (compiled; pure = "
        "`KAFKA_INDEX_PURE_PYTHON=1`) and the compiled `verify` of the healthy partition; median [max]; baseline = "
        "the same command's peak RssAnon on a one-batch partition:"
    )
    print()
    print(
        "| case | command | peak RSS (ru_maxrss) | peak VmRSS (sampled) | peak RssAnon (sampled) | baseline RssAnon "
        f"| RssAnon above baseline | per batch | <= {TARGET_ANON_MIB:.0f} MiB |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for key, (_pdir, n) in cases.items():
        for what in ("compiled", "verify", "pure"):
            m = [r[f"{key} {what}"] for r in runs]
            base = [r[f"base {'pure' if what == 'pure' else 'compiled'}"]["RssAnon"] for r in runs]
            above = [x["RssAnon"] - b for x, b in zip(m, base, strict=True)]
            met = ("yes" if med(above) / MIB <= TARGET_ANON_MIB else "**no**") if what != "pure" else "-"
            print(
                f"| {key} ({n:,} batches) | {what if what == 'verify' else what + ' rebuild'} "
                f"| {f([x['maxrss'] for x in m])} | {f([x['VmRSS'] for x in m])} | {f([x['RssAnon'] for x in m])} "
                f"| {f(base)} | {f(above)} | {med(above) / n:.0f} B | {met} |"
            )
    args.raw["segment"] = runs


def logdir_case(root: str, args) -> None:
    corpora = [make_corpus(root, key, args.scale, 100 * i) for i, key in enumerate(("a", "b"))]
    runs = []
    for run in range(args.runs):
        r: dict = {}
        for c in corpora:
            print(f"[run {run + 1}/{args.runs}] logdir {c['key']}", file=sys.stderr, flush=True)
            out = tempfile.mkdtemp(dir=root)
            r[c["key"]] = memory_run(["rebuild", c["log_dir"], "--output-dir", out, "--jobs", "2"], interval=0.002)
            shutil.rmtree(out)
            out = tempfile.mkdtemp(dir=root)
            r[c["key"] + " one"] = memory_run(["rebuild", c["pdirs"][0], "--output-dir", out, "--jobs", "1"])
            shutil.rmtree(out)
        runs.append(r)
    print()
    print(
        "A log dir, `python -m indexlib rebuild LOG_DIR --output-dir OUT --jobs 2` (median [max]; ru_maxrss = the "
        "largest single process of the tree; tree sum = summed over the parent and its workers, sampled every ~2 ms):"
    )
    print()
    print(
        "| corpus | ru_maxrss | tree sum VmRSS | tree sum RssAnon | largest single process VmRSS (sampled) "
        "| processes seen | one single-partition process (`--jobs 1`): ru_maxrss |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in corpora:
        m = [r[c["key"]] for r in runs]
        one = [r[c["key"] + " one"]["maxrss"] for r in runs]
        print(
            f"| {c['key']}: {c['label']} | {f([x['maxrss'] for x in m])} | {f([x['VmRSS'] for x in m])} "
            f"| {f([x['RssAnon'] for x in m])} | {f([x['single_VmRSS'] for x in m])} | {max(x['procs'] for x in m)} "
            f"| {f(one)} |"
        )
    args.raw["logdir"] = runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="segment,logdir")
    parser.add_argument("--segments", default="170,170p,4k,16k", help="segment: subset of 170, 170p, 4k, 16k")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the segment sizes")
    parser.add_argument("--json", metavar="FILE", help="also write every raw figure here")
    parser.add_argument("--quick", action="store_true", help="small files, one run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.scale = 1, 0.01
    args.raw = {}
    compile_bytecode()
    try:
        with scratch("bench-memory-") as root:
            if "segment" in args.cases:
                segment_case(root, args)
            if "logdir" in args.cases:
                logdir_case(root, args)
    except BenchError as exc:
        print(f"memory: FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(args.raw, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
