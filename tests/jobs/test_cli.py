"""``kafka-index``'s commands that need no Spark: lookup (text and JSON) and dump, in process; they are
the library's (``python -m indexlib lookup|dump``), so both command lines print the same."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil

import pytest

from indexlib.cli.dump import dump_file
from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition
from jobs.cli import main

from ..conftest import KAFKA_REAL, copy_fixture, dump_into_head, requires_kafka_real

LOCAL_KAFKA = KAFKA_REAL / "local-apache-kafka-4.1.0"


def test_lookup_prints_the_entry_used_and_the_batch_found(capsys, tmp_path):
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=50, seed=3)
    rebuild_partition(part, index_interval_bytes=2000)
    log = part / "00000000000000000000.log"
    batches = dump_file(log)["batches"]
    target = batches[30]
    assert main(["lookup", "--segment", str(log), "--offset", str(target["last_offset"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"offset index entry: offset \d+ -> byte \d+", out[0])
    assert out[1].startswith(f"offset {target['last_offset']}: batch at byte {target['position']} ")
    assert f"(offsets {target['base_offset']}..{target['last_offset']}" in out[1]
    assert main(["lookup", "--segment", str(log), "--timestamp", str(target["max_timestamp"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("time index entry: ") and out[2].startswith(f"timestamp {target['max_timestamp']}: ")
    past = batches[-1]["last_offset"] + 10
    assert main(["lookup", "--segment", str(log), "--offset", str(past)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == f"offset {past}: not in this segment"
    assert main(["lookup", "--segment", str(log), "--offset", str(past), "--json"]) == 1  # one exit-code rule
    assert json.loads(capsys.readouterr().out)["batch"] is None


def test_a_lookup_names_the_index_file_that_is_missing(capsys, tmp_path):
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=20, seed=3)
    rebuild_partition(part)
    log = part / "00000000000000000000.log"
    (part / "00000000000000000000.timeindex").unlink()
    assert main(["lookup", "--segment", str(log), "--timestamp", "5"]) == 2
    line = one_error_line(capsys)
    assert "00000000000000000000.timeindex: no such file" in line and ".log:" not in line
    assert main(["lookup", "--segment", str(log), "--offset", "5"]) == 0  # an offset needs no .timeindex
    capsys.readouterr()
    (part / "00000000000000000000.index").unlink()
    assert main(["lookup", "--segment", str(log), "--offset", "5"]) == 2
    assert "00000000000000000000.index: no such file" in one_error_line(capsys)


def test_dump_is_the_librarys(capsys, tmp_path):
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=20, seed=4)
    rebuild_partition(part)
    index = part / "00000000000000000000.timeindex"
    assert main(["dump", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == dump_file(index)


def test_both_command_lines_answer_a_lookup_alike(capsys, tmp_path):
    from indexlib.cli.main import main as indexlib_main

    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=30, seed=5)
    rebuild_partition(part, index_interval_bytes=1000)
    log = str(part / "00000000000000000000.log")
    for argv in (["--offset", "17"], ["--timestamp", "0", "--json"], ["--offset", "100000"]):
        code = main(["lookup", "--segment", log, *argv])
        ours = capsys.readouterr().out
        assert indexlib_main(["lookup", "--segment", log, *argv]) == code
        assert capsys.readouterr().out == ours


# --------------------------------------------------------------------- bad input: exit 2 before any work
@pytest.mark.parametrize("suffix, as_json", [(".log", False), (".log", True), (".timeindex", True)])
def test_dump_into_a_closed_pipe_ends_quietly(big_partition, suffix, as_json):
    """``kafka-index dump FILE | head -1``: no message and exit 141 (was ``[Errno 32] Broken pipe``, exit 2),
    as ``python -m indexlib dump``."""
    import sys

    argv = [sys.executable, "-m", "jobs.cli", "dump", str(big_partition / f"00000000000000000000{suffix}")]
    code, err, first = dump_into_head(argv + (["--json"] if as_json else []))
    assert first and err == "" and code == 141


@pytest.mark.parametrize("target", [["--offset", "-1"], ["--offset", str(2**63)], ["--timestamp", str(2**63)]])
def test_lookup_refuses_a_target_no_segment_can_hold(capsys, tmp_path, target):
    """A usage error, exit 2, one line naming the option (``--offset -1`` found the first batch, exit 0)."""
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=20, seed=3)
    rebuild_partition(part)
    assert main(["lookup", "--segment", str(part / "00000000000000000000.log"), *target]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"kafka-index: error: {' '.join(target)}: ")


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kafka-index: error: ") and "Traceback" not in err[0], err
    return err[0]


def test_bad_input_is_refused_before_anything_runs(capsys, tmp_path):
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=10, seed=6)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    table = tmp_path / "audit"
    base = ["--audit-table", str(table), "--no-progress"]
    cases = [
        (["verify", "--log-dir", str(logs), "--topics", "order"], "no partition matches --topics 'order'"),
        (["verify", "--log-dir", str(logs), "--partitions", "7-9"], "no partition matches --partitions '7-9'"),
        (["verify", "--log-dir", str(logs / "orders-0")], "--log-dir names a partition dir; give its log dir"),
        (["verify", "--log-dir", str(logs), "--json", str(tmp_path / "missing" / "r.json")], "does not exist"),
        (["verify", "--log-dir", str(logs), "--json", str(tmp_path)], "--json names a directory"),
        (["repair", "--log-dir", str(logs), "--backup-dir", str(a_file)], "--backup-dir must be a directory"),
        (["verify", "--log-dir", str(logs), "--audit-table", str(a_file)], "--audit-table must be a directory"),
        (["verify", "--log-dir", str(logs), "--audit-table", str(a_file / "x")], "--audit-table must be a directory"),
        (["verify", "--log-dir", str(logs), "--index-interval-bytes", str(2**63)], "must be between 0 and 2147483647"),
        (
            ["verify", "--log-dir", str(logs), "--segment-index-bytes", "3000000000"],
            "must be between 12 and 2147483647",
        ),
    ]
    for argv, message in cases:
        assert main(argv[:1] + base + argv[1:]) == 2, argv  # the case's own options come last and win
        assert message in one_error_line(capsys), argv
    assert not (tmp_path / "missing").exists() and not table.exists() and not list(logs.rglob("*.index"))


def test_a_topic_config_for_no_partition_warns_or_with_strict_refuses(spark, capsys, tmp_path):
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=10, seed=7)
    rebuild_partition(logs / "orders-0")
    topics = tmp_path / "topics.json"
    topics.write_text('{"ordres": {"index.interval.bytes": 512}}')
    argv = ["verify", "--log-dir", str(logs), "--topic-config", str(topics), "--audit-table", "none", "--no-progress"]
    assert main(argv + ["--strict"]) == 2
    assert "topic(s) 'ordres' match no partition of this run (--strict)" in one_error_line(capsys)
    assert main(argv + ["--json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["exit_code"] == 0  # stdout is pure JSON: the tables went to stderr
    assert "warning: " in err and "'ordres' match no partition" in err and "healthy" in err


def test_audit_time_forms_and_where_they_apply(capsys, tmp_path):
    from datetime import UTC, datetime, timedelta

    from jobs.audit_commands import parse_time as _parse_time
    from jobs.usage import UsageError

    now = datetime(2026, 11, 23, 15, 30, tzinfo=UTC)
    assert _parse_time("7d", now) == now - timedelta(days=7)
    assert _parse_time("12h", now) == now - timedelta(hours=12) and _parse_time("30m", now) == now - timedelta(
        minutes=30
    )
    assert _parse_time("today", now) == datetime(2026, 11, 23, tzinfo=UTC)
    assert _parse_time("yesterday", now) == datetime(2026, 11, 22, tzinfo=UTC)
    assert _parse_time("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=UTC)
    try:
        _parse_time("last week", now)
        raise AssertionError("accepted")
    except UsageError as exc:
        assert "give 7d, 12h, 30m, today, yesterday or an ISO date/time" in str(exc)
    # --since with --latest used to be ignored silently
    assert main(["audit", "--audit-table", str(tmp_path / "t"), "--latest", "--since", "7d"]) == 2
    assert "--since/--until choose the window of --repaired, --failing and --damage" in one_error_line(capsys)
    # a time before year 1 used to be blamed on the table ("audit table t: Python int too large ...")
    for option, value in (("--since", "99999999999d"), ("--since", "999999d"), ("--until", "0001-01-03")):
        assert main(["audit", "--audit-table", str(tmp_path / "t"), "--repaired", option, value]) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"kafka-index: error: {option}: {value!r}") and "audit table" not in line, line


def test_both_command_lines_say_their_version(capsys):
    from indexlib import __version__
    from indexlib.cli.main import main as indexlib_main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kafka-index {__version__}"
    assert indexlib_main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"python -m indexlib {__version__}"


def test_help_lists_only_the_options_of_each_command_and_explains_every_one(capsys):
    helps = {}
    for command in ("verify", "rebuild", "repair", "dump", "lookup", "audit"):
        assert main([command, "--help"]) == 0
        helps[command] = capsys.readouterr().out
    assert "--backup-dir" not in helps["verify"] and "--force" not in helps["verify"]
    assert "--dry-run" not in helps["verify"] and "--audit-dry-run" not in helps["verify"]
    for command in ("rebuild", "repair"):
        assert "--backup-dir" in helps[command] and "--force" in helps[command] and "--audit-dry-run" in helps[command]
    assert "--output-dir" in helps["rebuild"] and "--output-dir" not in helps["repair"]
    for command, text in helps.items():
        # every option has a help text: argparse prints an option with none on a line of its own, no words after
        lines = text.split("options:", 1)[1].splitlines()
        bare = [ln for ln in lines if re.fullmatch(r"\s+-[-\w]+(?:\s+[A-Z_.]+)?(?:, -[-\w]+(?:\s+[A-Z_.]+)?)*", ln)]
        continuation = [
            i for i, ln in enumerate(lines) if ln in bare and i + 1 < len(lines) and lines[i + 1].startswith(" " * 20)
        ]
        assert len(bare) == len(continuation), (command, bare)


def _options_of(parser, command: str) -> dict[str, tuple]:
    """``--option`` -> (dest, type, metavar, help without its default) of one subcommand's parser."""
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        a.option_strings[-1] if a.option_strings else a.dest: (
            a.dest,
            a.type,
            a.metavar,
            (a.help or "").replace(" (default %(default)s)", ""),
        )
        for a in commands.choices[command]._actions
        if not isinstance(a, argparse._HelpAction)
    }


@pytest.mark.parametrize("command", ["rebuild", "verify", "dump", "lookup"])
def test_the_options_both_command_lines_take_are_declared_once(command):
    """``python -m indexlib`` and ``kafka-index`` share each option's declaration (indexlib.cli.options): the
    same name means the same destination, type and help in both."""
    from indexlib.cli.main import build_parser as library_parser
    from jobs.cli import build_parser as jobs_parser

    library, jobs = _options_of(library_parser(), command), _options_of(jobs_parser(), command)
    shared = set(library) & set(jobs)
    expected = {
        "rebuild": {"--index-interval-bytes", "--segment-index-bytes", "--json", "--run-id", "--backup-dir", "--force",
                    "--output-dir", "--broker-id", "--topics", "--partitions", "--quiet", "--verbose", "--server-properties", "--topic-config"},
        "verify": {"--index-interval-bytes", "--segment-index-bytes", "--json", "--broker-id", "--topics", "--partitions",
                   "--quiet", "--verbose", "--server-properties", "--topic-config"},
        "dump": {"files", "--json", "--deep-iteration", "--print-data-log", "--payload-format", "--max-bytes",
                 "--offsets-decoder", "--transaction-log-decoder", "--check"},
        "lookup": {"--segment", "--offset", "--timestamp", "--ceiling", "--json"},
    }[command]  # fmt: skip
    assert expected <= shared
    assert {name: library[name] for name in shared} == {name: jobs[name] for name in shared}


def test_python_m_indexlib_repair_takes_kafka_index_repairs_options_but_the_engine():
    """Issue 41: ``python -m indexlib repair`` has every option of ``kafka-index repair`` (one declaration each),
    but ``--engine`` (it runs a local pool), and takes its log dirs as LOG_DIRs too; the library's command line
    lists it, and finds it through the entry point the project registers."""
    from importlib.metadata import entry_points

    from indexlib.cli import COMMAND_PLUGINS
    from indexlib.cli.main import build_parser as library_parser
    from jobs.cli import build_parser as jobs_parser
    from jobs.cli import indexlib_repair, indexlib_repair_parser

    wrapped = argparse.ArgumentParser()
    wrapped.add_subparsers().add_parser("repair", parents=[indexlib_repair_parser()], add_help=False)
    library, jobs = _options_of(wrapped, "repair"), _options_of(jobs_parser(), "repair")
    assert set(jobs) - set(library) == {"--engine"} and set(library) - set(jobs) == {"paths"}
    assert {name: library[name] for name in jobs if name != "--engine"} == {
        name: jobs[name] for name in jobs if name != "--engine"
    }
    assert "repair" in _subcommands(library_parser())
    [entry] = entry_points(group=COMMAND_PLUGINS, name="repair")
    assert entry.load() is indexlib_repair


def _subcommands(parser) -> set[str]:
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(commands.choices)


def test_python_m_indexlib_repair_without_the_package_that_provides_it_is_one_line(monkeypatch, capsys):
    """Where no installed package registers ``repair`` (the library alone), or its entry point cannot be loaded:
    one line, exit 2. (The entry points are replaced here: this venv has the project installed.)"""
    import importlib.metadata

    from indexlib.cli import COMMAND_PLUGINS
    from indexlib.cli.main import main as indexlib_main

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    assert indexlib_main(["repair", "/var/lib/kafka/data"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m indexlib: error: repair: no installed package provides it") and "\n" not in err
    broken = importlib.metadata.EntryPoint(name="repair", value="no_such_module_here:repair", group=COMMAND_PLUGINS)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [broken])
    assert indexlib_main(["repair", "/var/lib/kafka/data"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "python -m indexlib: error: repair: cannot load no_such_module_here:repair: No module named 'no_such_module_here'"
    )


def test_python_m_indexlib_repair_is_kafka_index_repair_on_the_local_engine(tmp_path):
    """Issue 41: ``python -m indexlib repair LOG_DIR`` and ``kafka-index repair --log-dir LOG_DIR --engine local``,
    as users run them (whole processes), on two copies of one damaged log dir: the same exit code, report and
    files after; when the audit table cannot take the rows (its ``_delta_log`` is garbage) both exit 3 with one line
    of their own program's name, and keep the same rows in their journals, which ``kafka-index audit --recover``
    merges into the same table rows."""
    import subprocess
    import sys

    from jobs import audit_queries

    from ..conftest import DAMAGE_CASES, PROJECT_ROOT, damage_log_dir

    made = tmp_path / "made"
    for i, name in enumerate(("orders-0", "orders-1")):
        generate_partition(made / name, segments=2, batches_per_segment=40, transactional_producers=2, seed=40 + i)
        rebuild_partition(made / name)
    damage_log_dir(made, DAMAGE_CASES[2])  # scrambled .index entries: a repair rewrites one file
    runs = {}
    for command in (["-m", "indexlib", "repair", "{logs}"], ["-m", "jobs.cli", "repair", "--log-dir", "{logs}",
                                                             "--engine", "local"]):  # fmt: skip
        root = tmp_path / command[1]
        logs, table, journal = copy_fixture(made, root / "logs"), root / "audit", root / "journal"
        (table / "_delta_log").mkdir(parents=True)
        (table / "_delta_log" / "00000000000000000000.json").write_text("garbage\n")
        argv = [sys.executable, *(str(logs) if a == "{logs}" else a for a in command), "--audit-table", str(table),
                "--audit-journal", str(journal), "--backup-dir", str(root / "backups"), "--run-id", "same",
                "--json", str(root / "report.json"), "--no-progress", "--jobs", "2"]  # fmt: skip
        done = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        journaled = {json.dumps(r, sort_keys=True, default=str).replace(str(root), "ROOT")
                     for r in _journal_rows(journal)}  # fmt: skip
        shutil.rmtree(table)  # the table can take rows again: the journal's are merged
        assert main(["audit", "--recover", "--audit-table", str(table), "--audit-journal", str(journal)]) == 0
        rows = audit_queries.read(str(table)).to_pylist()
        stored = {json.dumps(_row_facts(r), sort_keys=True, default=str).replace(str(root), "ROOT") for r in rows}
        report = {k: v for k, v in json.loads((root / "report.json").read_text()).items()
                  if k not in ("started", "finished", "phase_seconds")}  # fmt: skip
        for segment in report["segments"]:
            del segment["seconds"]
        runs[command[1]] = (done, logs, journaled, stored, report)
    (library, library_logs, *library_audit, library_report), (jobs, jobs_logs, *jobs_audit, jobs_report) = runs.values()
    assert library.returncode == jobs.returncode == 3, (library.stderr, jobs.stderr)
    assert library.stderr.startswith("python -m indexlib: warning: audit table") and jobs.stderr.startswith(
        "kafka-index: warning: audit table"
    )
    assert "`kafka-index audit --recover`" in library.stderr  # the command that merges them: not the library's

    def rooted(out: str, root: str) -> str:
        """``out`` with the run's root as R, absolute or relative to the commands' cwd (shorter: a checkout beside
        the temporary dirs, as one cloned under /tmp)."""
        for form in (str(tmp_path / root), os.path.relpath(tmp_path / root, PROJECT_ROOT)):
            out = out.replace(form, "R")
        return out

    assert rooted(library.stderr.replace("python -m indexlib:", "kafka-index:"), "indexlib") == (
        rooted(jobs.stderr, "jobs.cli")
    )

    def timeless(out: str, root: str) -> str:
        return re.sub(r" in \d+\.\d+ s", " in T s", rooted(out, root))

    assert timeless(library.stdout, "indexlib") == timeless(jobs.stdout, "jobs.cli")
    assert _files(library_logs) == _files(jobs_logs)
    assert library_audit == jobs_audit and library_audit[0]
    assert {json.loads(r)["status"] for r in library_audit[1] if json.loads(r)["record_type"] == "segment"} == {
        "ok",
        "repaired",
    }
    assert library_report["segments"] and json.dumps(library_report).replace(str(tmp_path / "indexlib"), "") == (
        json.dumps(jobs_report).replace(str(tmp_path / "jobs.cli"), "")
    )


def _journal_rows(journal_dir) -> list[dict]:
    from jobs import journal

    rows: list[dict] = []
    for path in sorted(journal_dir.glob("*.jsonl")):
        rows += [_row_facts(r) for r in journal.rows_of(journal.read(str(path)))[0]]
    return rows


def _row_facts(row: dict) -> dict:
    """An audit row without what differs between two runs of one command (its times)."""
    return {k: v for k, v in row.items() if k not in ("run_started", "run_finished", "date", "duration_s")}


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_quiet_prints_the_verdict_and_verbose_the_phases(spark, capsys, tmp_path):
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=7)  # no index files: findings
    base = ["verify", "--log-dir", str(logs), "--audit-table", str(tmp_path / "audit"), "--no-progress"]
    assert main([*base, "--quiet"]) == 1
    out = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert out[-1].startswith("verify ") and f"{len(out) - 1} finding(s) remain" in out[-1]  # one line each, then it
    assert {line.split(" ")[0] for line in out[:-1]} == {"index_missing", "timeindex_missing"}
    assert main([*base, "-v"]) == 1
    out = capsys.readouterr().out
    assert "index_missing" in out and re.search(r"^phases: scan \d+\.\d\d s, replay", out, flags=re.M)
    assert main([*base, "-q", "-v"]) == 2  # one or the other


def test_quiet_is_quiet_from_the_jvms_start_as_a_whole_process(tmp_path):
    """`kafka-index verify -q` as a user runs it: the verdict on stdout, and nothing on stderr: no Spark start-up
    banner ("Setting default log level ..."), not even the line Java 17 prints at the JVM's start for the
    incubator module Spark 4 loads (the JVM's stderr is filtered)."""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=5, seed=2)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", str(logs), "-q", "--audit-table", "none",
         "--no-progress"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()  # the findings that remain, one line each, and the verdict: nothing of Spark's
    assert "2 finding(s) remain" in lines[-1] and len(lines) == 3, done.stdout
    assert done.stderr == "", done.stderr


def test_the_venvs_spark_submit_runs_a_job_from_a_shell_without_the_venv(tmp_path):
    """The README's local spark-submit line with the project's .venv/bin/spark-submit, from a new shell whose
    PATH has no venv (pyspark's script alone looks for Spark and runs the job with the python3 on PATH)."""
    import subprocess
    import sys
    from pathlib import Path

    from ..conftest import PROJECT_ROOT

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=5, seed=3)
    rebuild_partition(logs / "orders-0")
    submit = Path(sys.executable).parent / "spark-submit"
    java = shutil.which("java")
    assert java is not None
    shell_env = {"PATH": f"{os.path.dirname(java)}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    shell_env.update({k: v for k, v in os.environ.items() if k == "JAVA_HOME"})
    done = subprocess.run(
        [str(submit), "--master", "local[1]",
         "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile={PROJECT_ROOT}/conf/log4j2.properties",
         "jobs/spark_job.py", "verify", "--log-dir", str(logs), "--audit-table", "none", "--no-progress"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
        env=shell_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].endswith("healthy"), done.stdout


def test_json_to_stdout_pipes_into_a_json_reader(tmp_path):
    """`kafka-index verify ... --json - | python -m json.tool`, as a real process and a real pipe: nothing
    but the JSON reaches stdout (tables, progress and the JVM's lines go to stderr)."""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=10, seed=7)
    job = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", str(logs), "--json", "-", "--audit-table", "none"],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    reader = subprocess.run([sys.executable, "-m", "json.tool"], stdin=job.stdout, capture_output=True, text=True)
    assert job.stdout is not None
    job.stdout.close()
    assert job.wait(timeout=300) == 1  # findings: no index files
    assert reader.returncode == 0, reader.stderr
    assert json.loads(reader.stdout)["remaining_findings"]


def test_the_local_engine_answers_as_spark_and_writes_the_same_audit_rows(spark, capsys, tmp_path):
    """``--engine local`` (a broker host without a JVM): the same findings, ``--json`` segments and audit rows as
    the Spark map, and no Spark session is used; a repair through it fixes the files."""
    from jobs import audit_queries

    logs = tmp_path / "logs"
    for i, name in enumerate(("orders-0", "orders-1")):
        generate_partition(logs / name, segments=2, batches_per_segment=40, seed=30 + i)
        rebuild_partition(logs / name)
    (logs / "meta.properties").write_text("version=1\nnode.id=7\ncluster.id=engineCluster000000000A\n")
    good = (logs / "orders-1/00000000000000000000.index").read_bytes()
    os.unlink(logs / "orders-1/00000000000000000000.index")
    reports = {}
    for engine in ("spark", "local"):
        table = tmp_path / f"audit-{engine}"
        args = ["verify", "--log-dir", str(logs), "--run-id", "r1", "--audit-table", str(table), "--engine", engine,
                "--audit-journal", str(tmp_path / "journal"), "--json", str(tmp_path / f"{engine}.json")]  # fmt: skip
        assert main(args + (["--jobs", "2"] if engine == "local" else [])) == 1
        reports[engine] = json.loads((tmp_path / f"{engine}.json").read_text())
        rows = audit_queries.read(str(table)).to_pylist()
        reports[engine]["rows"] = sorted(
            (r["record_type"], r["broker_id"], r["topic"], r["partition"], r["base_offset"], r["status"],
             tuple(r["finding_kinds"] or ()), r["exit_code"])
            for r in rows
        )  # fmt: skip
    timing = {"duration_s", "seconds", "elapsed_s", "scan_s"}
    for engine in reports:
        for s in reports[engine]["segments"]:
            for key in timing & set(s):
                s.pop(key)
    for key in ("segments", "remaining_findings", "rows"):
        assert reports["local"][key] == reports["spark"][key], key
    assert {r[1] for r in reports["local"]["rows"]} == {7}  # the broker of meta.properties on every row
    capsys.readouterr()
    assert main(["repair", "--log-dir", str(logs), "--engine", "local", "--audit-table", "none",
                 "--backup-dir", str(tmp_path / "bk")]) == 0  # fmt: skip
    assert (logs / "orders-1/00000000000000000000.index").read_bytes() == good


@requires_kafka_real
def test_both_command_lines_select_alike_and_find_the_same(spark, capsys, tmp_path):
    """Issue 25: ``python -m indexlib`` takes kafka-index's selection and verbosity options from the same code;
    on a real broker's log dir (some files damaged) both choose the same partitions and find the same, with the
    same exit code, for each selection, and refuse a bad selection alike."""
    from indexlib.cli.main import main as library_main

    logs = tmp_path / "logs"
    for name in ("plain-0", "txn-0", "txn-1", "java-perf-0", "java-perf-1", "comp-gzip-0"):
        copy_fixture(LOCAL_KAFKA / name, logs / name)
    os.truncate(logs / "txn-1" / f"{0:020d}.timeindex", 5)
    os.unlink(logs / "java-perf-1" / f"{0:020d}.index")
    selections = [  # (the options, the exit code: 1 when a damaged partition is chosen)
        ([], 1),
        (["--topics", "txn|java-perf"], 1),
        (["--topics", "java-perf", "--partitions", "1"], 1),
        (["--partitions", "0"], 0),
    ]
    for selection, code in selections:
        library_json, jobs_json = tmp_path / "library.json", tmp_path / "jobs.json"
        library_code = library_main(["verify", str(logs), "--jobs", "1", "--json", str(library_json), "-q", *selection])
        jobs_code = main(["verify", "--log-dir", str(logs), "--audit-table", "none", "--no-progress",
                          "--json", str(jobs_json), "-q", *selection])  # fmt: skip
        capsys.readouterr()
        library, jobs = json.loads(library_json.read_text()), json.loads(jobs_json.read_text())
        assert library_code == jobs_code == code, selection

        def seen(report):
            return sorted((s["topic"], s["partition"], s["base_offset"]) for s in report["segments"])

        def found(report):
            return sorted((f["kind"], f["file"], f["entry"]) for f in report["remaining_findings"])

        assert seen(library) == seen(jobs) and seen(library), selection
        assert found(library) == found(jobs), selection
    for bad in (["--topics", "("], ["--partitions", "x"], ["--topics", "nothing-matches"]):
        assert library_main(["verify", str(logs), *bad]) == 2
        library_err = capsys.readouterr().err.strip().splitlines()[-1]
        assert main(["verify", "--log-dir", str(logs), "--audit-table", "none", *bad]) == 2
        jobs_err = capsys.readouterr().err.strip().splitlines()[-1]
        assert library_err.split("error: ", 1)[1].split(" in ")[0] == jobs_err.split("error: ", 1)[1].split(" in ")[0]


@requires_kafka_real
def test_the_audit_run_row_names_the_files_a_run_wrote_beside_the_segments(tmp_path, capsys, monkeypatch):
    """A repair's rewritten producer snapshot and a recover's recovery-point checkpoint, rolled segment and
    snapshots are in the run row's ``files_written`` (``--engine local``, a real Delta table)."""
    from indexlib.storage import file_system_sync
    from jobs import audit_queries

    from ..indexlib.test_recover import crashed_log_dir
    from ..indexlib.test_state_files import _rewrite_snapshot, copy_log_dir

    logs = copy_log_dir(tmp_path, "txn-0")
    snapshot = logs / "txn-0" / "00000000000000000011.snapshot"
    _rewrite_snapshot(snapshot, lambda e: dataclasses.replace(e, epoch=e.epoch + 1))
    table = tmp_path / "audit"
    assert main(["repair", "--log-dir", str(logs), "--engine", "local", "--audit-table", str(table), "--run-id",
                 "fix", "--backup-dir", str(tmp_path / "bk"), "--no-progress", "--audit-journal", str(tmp_path / "j")]) == 0  # fmt: skip
    assert "rewritten from the log" in capsys.readouterr().out
    rows = audit_queries.read(str(table)).to_pylist()
    [run_row] = [r for r in rows if r["record_type"] == "run"]
    assert run_row["files_written"] == [str(snapshot)]
    [partition_row] = [r for r in rows if r["record_type"] == "partition"]
    assert (partition_row["topic"], partition_row["partition"], partition_row["files_written"]) == (
        "txn",
        0,
        [str(snapshot)],
    )
    assert os.path.exists(os.path.join(partition_row["backup_location"], snapshot.name))
    assert "producer_snapshot_mismatch" in run_row["findings_json"] and run_row["status"] == "ok"

    crashed = crashed_log_dir(tmp_path / "crash", partitions=1, point=0)
    registered: list[list[str]] = []  # --sync syncfs: the file systems the run registered (then as it would)
    monkeypatch.setattr(file_system_sync, "register", lambda dirs, real=file_system_sync.register: (
        registered.append(sorted(dirs)), real(dirs))[1])  # fmt: skip
    assert main(["recover", "--log-dir", str(crashed), "--engine", "local", "--audit-table", str(table), "--run-id",
                 "rec", "--backup-dir", str(tmp_path / "bk"), "--no-progress", "--audit-journal", str(tmp_path / "j"),
                 "--sync", "syncfs"]) == 0  # fmt: skip
    assert registered[0] == sorted([str(crashed), str(tmp_path / "bk")]) and not file_system_sync.active()
    [run_row] = [
        r for r in audit_queries.read(str(table)).to_pylist() if r["run_id"] == "rec" and r["record_type"] == "run"
    ]
    written = {os.path.relpath(w, crashed) for w in run_row["files_written"]}
    assert "recovery-point-offset-checkpoint" in written
    end = max(int(n.name[:20]) for n in (crashed / "orders-0").glob("*.log"))
    rolled = {f"orders-0/{end:020d}.log", f"orders-0/{end:020d}.index", f"orders-0/{end:020d}.snapshot"}
    assert rolled <= written
    [partition_row] = [
        r
        for r in audit_queries.read(str(table)).to_pylist()
        if r["run_id"] == "rec" and r["record_type"] == "partition"
    ]
    assert rolled <= {os.path.relpath(w, crashed) for w in partition_row["files_written"]}


def _killed_in_the_map(batch, run_id):
    """A pool task whose worker is SIGKILLed (as by the OOM killer) before it stages anything."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("command_line", ["kafka-index", "python -m indexlib"])
def test_a_killed_pool_worker_is_one_line_and_exit_1_on_both_command_lines(capsys, tmp_path, monkeypatch, command_line):
    """Issue 36: a worker of the local pool killed under the map is one line naming how it died, exit 1 (as a killed
    Spark executor), every file as it was, no traceback, and no worker left holding the log dir's locks."""
    import multiprocessing

    from indexlib.cli.main import main as indexlib_main
    from indexlib.engine import pool

    logs = tmp_path / "logs"
    for n in range(2):
        generate_partition(logs / f"t-{n}", segments=2, batches_per_segment=30, seed=50 + n)
    before = {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    monkeypatch.setattr(pool, "process_segments", _killed_in_the_map)
    if command_line == "kafka-index":
        code = main(["rebuild", "--log-dir", str(logs), "--engine", "local", "--jobs", "2", "--audit-table", "none",
                     "--force", "--backup-dir", str(tmp_path / "bk"), "--no-progress"])  # fmt: skip
    else:
        code = indexlib_main(["rebuild", str(logs), "--jobs", "2", "--force", "--backup-dir", str(tmp_path / "bk")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"{command_line}: error: a worker process was killed by SIGKILL"), err
    assert "no file was replaced" in lines[0]
    assert {p: p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before
    assert multiprocessing.active_children() == []


def test_a_log_dir_given_as_an_argument_gets_a_hint_and_nothing_runs(capsys, tmp_path):
    """``kafka-index verify PATH`` (``python -m indexlib``'s form): one line saying how log dirs are given, exit 2."""
    assert main(["verify", str(tmp_path), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"kafka-index: error: unrecognized arguments: {tmp_path} (log dirs are given as --log-dir {tmp_path})\n"
    )
    assert main(["verify", "--log-dir", str(tmp_path), "--bogus"]) == 2  # any other usage error: argparse's own
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_no_java_anywhere_is_named_with_what_to_do(monkeypatch, tmp_path):
    """Spark's JVM cannot start without java: the one line it fails with says so, and that --engine local needs
    none; with java on PATH or JAVA_HOME set, nothing is added (the JVM's own reason stands)."""
    from jobs.session import java_hint

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no java on PATH and JAVA_HOME is not set" in java_hint() and "--engine local" in java_hint()
    monkeypatch.setenv("JAVA_HOME", "/opt/jdk")
    assert java_hint() == ""
    monkeypatch.delenv("JAVA_HOME")
    (tmp_path / "java").write_text("#!/bin/sh\n")
    (tmp_path / "java").chmod(0o755)
    assert java_hint() == ""


def test_an_empty_run_id_is_refused_as_python_m_indexlib_refuses_it(capsys, tmp_path):
    """``--run-id ''`` names no backup dir: refused in one line (it once ran under a generated id)."""
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=20, seed=3)
    assert main(["repair", "--log-dir", str(logs), "--run-id", "", "--engine", "local", "--audit-table", "none"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafka-index: error: run id '': it names backup dirs") and len(err.splitlines()) == 1


def test_stdout_and_stderr_merged_into_one_log_keep_their_order(tmp_path):
    """Issue 37: ``kafka-index ... > log 2>&1`` (a task's log): the run's report (stdout) comes before the error
    printed after it (stderr: here the audit table, whose ``_delta_log`` is garbage, cannot take the rows), as they
    were printed; block-buffered, the whole report once came after that error."""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    logs, table = tmp_path / "logs", tmp_path / "audit"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=10, seed=2)
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("garbage\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a scheduler's worker runs it
    argv = [sys.executable, "-m", "jobs.cli", "verify", "--log-dir", str(logs), "--engine", "local",
            "--audit-table", str(table), "--no-progress"]  # fmt: skip
    with open(tmp_path / "log", "w") as log:
        done = subprocess.run(argv, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=300)
    lines = (tmp_path / "log").read_text().splitlines()
    assert done.returncode == 3
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verify verify-"))
    error = next(i for i, line in enumerate(lines) if line.startswith("kafka-index: error: audit table"))
    assert verdict < error, lines
