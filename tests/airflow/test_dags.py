"""The Airflow DAGs, with real Airflow 3 in its own virtualenv (``.venv-airflow``, set up by ``make test``).

Structure, Params schema and rendering are read from a real ``DagBag`` (``dag_facts.py`` runs inside the
Airflow virtualenv); the end-to-end tests run ``airflow dags test`` of both DAGs with ``spark_default``
pointing at local Spark, on a generated log dir with damaged index files, their settings set with ``airflow
variables set`` and the environment a user's shell has (``airflow_env``).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark
import pytest

from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition

from ..conftest import requires_object_storage, upload

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_VENV = ROOT / ".venv-airflow"
AIRFLOW = AIRFLOW_VENV / "bin" / "airflow"

pytestmark = pytest.mark.skipif(
    not AIRFLOW.exists(), reason="Airflow's own virtualenv .venv-airflow is missing: `make test` sets it up"
)


PROJECT_BIN = Path(sys.executable).parent  # the project's venv: its spark-submit, and the jobs' Python
PYSPARK_HOME = Path(pyspark.__file__).parent  # Spark itself: its bin/spark-submit, jars


def airflow_env(home: Path, *, env_variable: dict | None = None, plain_spark_submit: bool = False) -> dict:
    """What a user's shell has: Airflow's venv first on PATH (its ``python3`` is the first one), then the
    project's ``spark-submit``; no PYSPARK_PYTHON or PYSPARK_DRIVER_PYTHON (the DAGs must choose the jobs'
    Python themselves). ``plain_spark_submit``: Spark's own ``$SPARK_HOME/bin/spark-submit`` (the pyspark
    package's, as a cluster's is) instead of the project's, whose line added by ``make`` defaults
    PYSPARK_PYTHON to the project's venv. PYTHONPATH: this tree, so that the jobs' driver and executors import
    this checkout's ``jobs``/``indexlib`` even when the project's venv is an editable install of another one.
    ``env_variable``: the Variable as AIRFLOW_VAR_KAFKA_INDEX_REBUILD (readable while parsing too)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    submit_bin = PYSPARK_HOME / "bin" if plain_spark_submit else PROJECT_BIN
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "airflow_dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW_CONN_SPARK_DEFAULT="spark://local?deploy-mode=client",
        PATH=os.pathsep.join([str(AIRFLOW_VENV / "bin"), str(submit_bin), os.environ.get("PATH", "")]),
        PYTHONPATH=str(ROOT),
    )
    if plain_spark_submit:
        env["SPARK_HOME"] = str(PYSPARK_HOME)
    if env_variable is not None:
        env["AIRFLOW_VAR_KAFKA_INDEX_REBUILD"] = json.dumps(env_variable)
    return env


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-home")
    reports = str(home / "r")  # the build_arguments tasks create their run's report dir
    env = airflow_env(
        home,
        env_variable={
            "log_dirs": ["/data/a", "/data/b"],
            "report_dir": reports,
            "repair_enabled": True,
            "spark_conn_id": "kafka_index_spark",
            "sync": "fsync",  # the scheduled repair's, and the forms' default
        },
    )
    payloads = {
        "ok": {"mode": "repair", "partitions": "0,2-4", "log_dirs": ["/x"]},
        "bad_mode": {"mode": "explode"},
        "bad_partitions": {"partitions": "a-b"},
        "no_log_dirs": {"log_dirs": []},
        "bad_dry_run": {"dry_run": "yes"},
        "bad_sync": {"sync": "fdatasync"},
    }
    render = {
        "mode": "repair",
        "log_dirs": ["/x"],
        "topics": "orders",
        "partitions": "1",
        "dry_run": True,
        "truncate_corrupt_tail": True,
        "sync": "syncfs",
    }
    done = subprocess.run(
        [
            str(AIRFLOW_VENV / "bin" / "python"),
            str(ROOT / "tests/airflow/dag_facts.py"),
            str(ROOT / "airflow_dags"),
            json.dumps(payloads),
            json.dumps(render),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("FACTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return dict(json.loads(lines[-1][6:]), reports=reports)


def test_dagbag_imports_without_errors(facts):
    assert facts["import_errors"] == {}
    assert {"kafka_index_scheduled", "kafka_index_on_demand"} <= set(facts["dags"])  # and the fleet DAGs


def test_scheduled_dag_structure(facts):
    dag = facts["dags"]["kafka_index_scheduled"]
    assert dag["schedule"] == "@daily" and dag["catchup"] is False
    assert dag["tasks"] == ["build_arguments", "decide", "findings_left", "healthy", "repair", "verify"]
    assert dag["edges"] == [
        ["build_arguments", "decide"],
        ["build_arguments", "repair"],
        ["build_arguments", "verify"],
        ["decide", "findings_left"],
        ["decide", "healthy"],
        ["decide", "repair"],
        ["verify", "decide"],
        ["verify", "findings_left"],  # the verify outcome through XCom: no report file shared between hosts
    ]
    assert dag["operators"]["verify"] == dag["operators"]["repair"] == "JobSubmitOperator"
    assert "Branch" in dag["operators"]["decide"]
    assert dag["conn_ids"] == ["spark_default"]


def test_on_demand_dag_params_schema(facts):
    dag = facts["dags"]["kafka_index_on_demand"]
    assert dag["schedule"] is None and dag["tasks"] == ["build_arguments", "run_job"]
    params = dag["params"]
    assert set(params) == {"log_dirs", "topics", "partitions", "mode", "dry_run", "truncate_corrupt_tail", "sync"}
    assert params["sync"]["enum"] == ["auto", "fsync", "syncfs"]
    assert dag["param_defaults"]["sync"] == "fsync"  # the settings' sync (the Variable's here; conf/airflow.yaml: auto)
    assert params["mode"]["enum"] == ["verify", "rebuild", "repair", "recover"]
    assert params["log_dirs"]["type"] == "array" and params["log_dirs"]["minItems"] == 1
    assert params["dry_run"]["type"] == params["truncate_corrupt_tail"]["type"] == "boolean"
    assert facts["param_checks"] == {
        "ok": "valid",
        "bad_mode": "invalid: ParamValidationError",
        "bad_partitions": "invalid: ParamValidationError",
        "no_log_dirs": "invalid: ParamValidationError",
        "bad_dry_run": "invalid: ParamValidationError",
        "bad_sync": "invalid: ParamValidationError",
    }


def test_spark_submit_arguments_built_at_run_time(facts):
    """The build_arguments tasks, run as a task would: the jobs' arguments and conf from the settings read then."""
    scheduled = facts["scheduled_arguments"]
    # what spark-submit runs and with which connection: the run's settings too, through XCom
    application = str(ROOT / "jobs" / "spark_job.py")
    assert scheduled["submit"] == {"application": application, "conn_id": "kafka_index_spark"}
    assert all("build_arguments" in source for source in facts["scheduled_submit_from"].values())
    verify_report = f"{facts['reports']}/kafka_index_scheduled/scheduled__2026-11-21T00_00_00_00_00/verify.json"
    assert scheduled["verify"] == [
        "verify",
        "--log-dir",
        "/data/a",
        "--log-dir",
        "/data/b",
        "--json",
        verify_report,  # no ':' or '+' in the report dir (nor in the backup dir that the run id names)
        "--exit-zero-on-findings",
    ]
    assert scheduled["repair"] == [
        "repair",
        "--log-dir",
        "/data/a",
        "--log-dir",
        "/data/b",
        "--json",
        verify_report.replace("verify.json", "repair.json"),
        "--sync",
        "fsync",  # the settings' sync (the Variable's)
    ]
    assert scheduled["verify_report"] == verify_report and scheduled["repair_enabled"] is True
    assert scheduled["conf"] == facts["spark_conf_local"]
    on_demand = facts["on_demand_arguments"]
    assert on_demand["submit"] == {"application": application, "conn_id": "kafka_index_spark"}
    assert "build_arguments" in facts["on_demand_submit_from"]
    assert on_demand["args"] == [
        "repair",
        "--log-dir",
        "/x",
        "--topics",
        "orders",
        "--partitions",
        "1",
        "--json",
        f"{facts['reports']}/kafka_index_on_demand/manual__2026-11-23T16_34_09_00_00/repair.json",
        "--dry-run",
        "--truncate-corrupt-tail",
        "--sync",
        "syncfs",
        "--exit-zero-on-findings",
    ]
    assert on_demand["conf"] == facts["spark_conf_local"]


def test_each_try_of_a_job_has_its_own_run_id(facts):
    """A writing run under a run id that an earlier run used is refused (its backups would not be kept), so a
    retried task must not repeat its first try's id: the try number is part of it (rendered here for try 2)."""
    assert facts["scheduled_run_ids"] == {
        "verify": "scheduled__2026-11-21T00_00_00_00_00-verify-try2",
        "repair": "scheduled__2026-11-21T00_00_00_00_00-repair-try2",
    }
    assert facts["on_demand_run_id"] == "manual__2026-11-23T16_34_09_00_00-repair-try2"


def test_only_dry_runs_exit_zero_on_findings(facts):
    """A dry run's findings are its answer (the job still fails when it could not do its work); a verify, or a
    rebuild or repair that writes, leaves findings red."""
    assert facts["exit_zero_on_findings"] == {
        "verify": False,
        "verify dry": False,  # verify writes nothing anyway: the form's dry run does not apply to it
        "rebuild": False,
        "rebuild dry": True,
        "repair": False,
        "repair dry": True,
        "recover": False,
        "recover dry": True,
    }


def test_the_form_refuses_what_the_job_cannot_honour(facts):
    """Truncating a corrupt tail is a repair's; with rebuild it used to be dropped silently."""
    assert facts["truncate_with_rebuild"] == "truncate_corrupt_tail applies to repair only, not to rebuild"
    assert facts["bad_sync"] == "sync must be one of ('auto', 'fsync', 'syncfs'), got 'fdatasync'"
    assert facts["bad_sync_setting"].endswith("sync must be one of ('auto', 'fsync', 'syncfs'), got 'fdatasync'")


def test_the_form_passes_sync_to_the_writing_modes_only(facts):
    """``--sync syncfs`` reaches the job of each writing mode, as the job's own parser reads its arguments; verify
    writes nothing and its command line has no ``--sync``."""
    from jobs.cli import build_parser

    for mode, args in facts["sync_args"].items():
        parsed = build_parser().parse_args(args)  # a usage error exits: the test fails
        assert parsed.command == mode
        if mode == "verify":
            assert "--sync" not in args and not hasattr(parsed, "sync")
        else:
            assert parsed.sync == "syncfs"


def test_the_jobs_run_the_projects_python(facts):
    """Driver and local executors run the project's Python (default ``<project>/.venv/bin/python``), never the
    ``python3`` first on the worker's PATH (Airflow's venv: ``No module named 'jobs'``); ``driver_python`` sets it."""
    quiet = f"-Dlog4j2.configurationFile={ROOT / 'conf' / 'log4j2.properties'}"
    venv_python = str(ROOT / ".venv" / "bin" / "python")
    assert facts["spark_conf_local"] == {
        "spark.driver.extraJavaOptions": quiet,
        "spark.pyspark.driver.python": venv_python,
        "spark.pyspark.python": venv_python,
    }
    assert "archives" not in facts["submit_options_local"] and "conf" not in facts["submit_options_local"]
    mine = facts["spark_conf_driver_python"]
    assert mine["spark.pyspark.driver.python"] == mine["spark.pyspark.python"] == "/opt/ki/bin/python"


def test_cluster_settings_reach_spark_submit(facts):
    """With an archive the executors run its Python and the driver the project's venv (spark.pyspark.python
    alone would send the driver to ./env too); the conf mapping is passed as is and wins."""
    assert facts["submit_options_archive"]["archives"] == "/d/env.tar.gz#env"
    quiet = f"-Dlog4j2.configurationFile={ROOT / 'conf' / 'log4j2.properties'}"
    assert facts["spark_conf_archive"] == {
        "spark.driver.extraJavaOptions": quiet,
        "spark.pyspark.python": "/py",
        "spark.pyspark.driver.python": str(ROOT / ".venv" / "bin" / "python"),
        "spark.executor.memory": "2g",
    }


# ----------------------------------------------------------------------------- airflow dags test
def damaged_log_dir(root: Path) -> tuple[Path, dict[str, bytes]]:
    """Three partitions with correct indexes (the expected bytes), then three index files damaged."""
    logs = root / "logs"
    for i, name in enumerate(("orders-0", "orders-1", "payments-0")):
        generate_partition(logs / name, segments=2, batches_per_segment=60, transactional_producers=2, seed=10 + i)
        rebuild_partition(logs / name)
    good = {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    os.unlink(logs / "orders-0/00000000000000000000.index")
    os.truncate(logs / "orders-1/00000000000000000000.timeindex", 5)
    os.unlink(logs / "payments-0/00000000000000000000.index")
    return logs, good


def run_variable(tmp_path: Path, **more) -> dict:
    """The Variable of an end-to-end run: reports, audit table and backups under ``tmp_path``; the jobs' Python
    is the project's venv running these tests (a git worktree of the project may have no ``.venv`` of its own)."""
    return {
        "report_dir": str(tmp_path / "reports"),
        "audit_table": str(tmp_path / "audit"),
        "backup_dir": str(tmp_path / "backups"),
        "driver_python": sys.executable,
        **more,
    }


@functools.cache
def migrated_db() -> Path:
    """A metadata DB fresh from ``airflow db migrate`` (about 9 s), made once per test process and copied into each
    run's AIRFLOW_HOME; removed when the process exits."""
    home = Path(tempfile.mkdtemp(prefix="airflow-migrated-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    subprocess.run([str(AIRFLOW), "db", "migrate"], env=airflow_env(home), capture_output=True, check=True, timeout=300)
    return home / "airflow.db"


def dags_test(
    env: dict, dag_id: str, conf: dict | None = None, variable: dict | None = None
) -> subprocess.CompletedProcess:
    """``airflow dags test``; ``variable``: first ``airflow variables set kafka_index_rebuild`` in the metadata
    DB of ``env``'s AIRFLOW_HOME, as a user sets it (not readable while ``dags test`` parses the DAG)."""

    def airflow(*args: str) -> None:
        subprocess.run([str(AIRFLOW), *args], env=env, capture_output=True, text=True, check=True, timeout=300)

    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_db(), home / "airflow.db")  # as `airflow db migrate` leaves it
    if variable is not None:
        airflow("variables", "set", "kafka_index_rebuild", json.dumps(variable))
    cmd = [str(AIRFLOW), "dags", "test", dag_id] + (["--conf", json.dumps(conf)] if conf else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=env["AIRFLOW_HOME"])


def state_of(done: subprocess.CompletedProcess) -> str:
    for line in (done.stdout + done.stderr).splitlines():
        if "DagRun Finished" in line:
            return line.split("state=")[1].split(",")[0]
    return "unknown"


def test_scheduled_dag_detects_and_repairs(tmp_path):
    """The settings as a user sets them, with ``airflow variables set`` in the metadata DB: ``dags test`` cannot
    read that Variable while it parses the DAG (the DAG used to run its jobs on a placeholder, ``<set
    log_dirs>``), so the run's settings are read in a task, and the jobs work on exactly those log dirs."""
    logs, good = damaged_log_dir(tmp_path)
    audit = tmp_path / "audit"
    env = airflow_env(tmp_path / "home")
    variable = run_variable(tmp_path, log_dirs=[str(logs)], repair_enabled=True)
    done = dags_test(env, "kafka_index_scheduled", variable=variable)
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    now = {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert now == good  # every index file equals the rebuild again, nothing else changed
    reports = {p.name: json.loads(p.read_text()) for p in (tmp_path / "reports").rglob("*.json")}
    assert set(reports) == {"verify.json", "repair.json"}
    for mode in ("verify", "repair"):
        assert reports[f"{mode}.json"]["log_dirs"] == [str(logs)]
        assert reports[f"{mode}.json"]["run_id"].endswith(f"-{mode}-try1")  # each try its own run id
    flagged = {os.path.relpath(f["file"], logs) for f in reports["verify.json"]["remaining_findings"]}
    assert flagged == {
        "orders-0/00000000000000000000.index",
        "orders-1/00000000000000000000.timeindex",
        "payments-0/00000000000000000000.index",
    }
    from jobs import audit_queries as audit_table

    rows = audit_table.read(str(audit)).to_pylist()
    modes = {(r["run_mode"], r["record_type"]) for r in rows}
    assert modes == {("verify", "segment"), ("verify", "run"), ("repair", "segment"), ("repair", "run")}
    repaired = sorted((r["topic"], r["partition"], r["base_offset"]) for r in rows if r["action"] == "repaired")
    assert repaired == [("orders", 0, 0), ("orders", 1, 0), ("payments", 0, 0)]


def test_scheduled_dag_with_repair_disabled_fails_naming_what_verify_found_through_xcom(tmp_path):
    """Issue 37: the branch and ``findings_left`` read the verify task's outcome from XCom (they no longer open the
    report file, which is on the host that ran verify): the run fails, naming the kinds found and the verify run;
    nothing is repaired."""
    logs, _ = damaged_log_dir(tmp_path)
    before = {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    env = airflow_env(tmp_path / "home")
    done = dags_test(env, "kafka_index_scheduled", variable=run_variable(tmp_path, log_dirs=[str(logs)],
                                                                          repair_enabled=False))  # fmt: skip
    out = done.stdout + done.stderr
    assert state_of(done) == "failed", out[-4000:]
    found = "verify found 4 problems ({'index_missing': 2, 'bad_length': 1, 'time_index_missing_final_entry': 1})"
    assert f"{found} and repair is disabled" in out, out[-4000:]
    assert "-verify-try1" in out.split("repair is disabled", 1)[1].splitlines()[0]  # the audit table's run id
    assert {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == before


def test_scheduled_dag_without_log_dirs_fails_with_one_clear_line(tmp_path):
    """No log dirs in conf/airflow.yaml nor in the Variable: the run fails in the task that reads the settings,
    saying where to set them, and no job runs (it used to run verify on the placeholder ``<set log_dirs>``)."""
    env = airflow_env(tmp_path / "home")
    done = dags_test(env, "kafka_index_scheduled", variable=run_variable(tmp_path))
    out = done.stdout + done.stderr
    assert state_of(done) == "failed", out[-4000:]
    assert (
        f"no Kafka log dirs to work on: set log_dirs in {ROOT / 'conf' / 'airflow.yaml'} "
        "or in the Airflow Variable kafka_index_rebuild (JSON)"
    ) in out, out[-4000:]
    assert "spark-submit" not in out and "<set log_dirs>" not in out
    assert not (tmp_path / "reports").exists()


def test_on_demand_dag_touches_only_the_chosen_topic(tmp_path):
    """Through Spark's own spark-submit (no line defaulting PYSPARK_PYTHON, as on a cluster) with Airflow's venv
    first on PATH: the DAG sets the driver's and the local executors' Python to the project's (a task failed
    with ``No module named 'jobs'`` when they ran Airflow's ``python3``)."""
    logs, good = damaged_log_dir(tmp_path)
    env = airflow_env(tmp_path / "home", plain_spark_submit=True)
    variable = run_variable(tmp_path)
    before = {str(p.relative_to(logs)): p.stat().st_mtime_ns for p in logs.rglob("*") if p.is_file()}
    form = {"log_dirs": [str(logs)], "topics": "orders", "mode": "repair", "dry_run": False}
    done = dags_test(env, "kafka_index_on_demand", form, variable)
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    for name in ("orders-0/00000000000000000000.index", "orders-1/00000000000000000000.timeindex"):
        assert (logs / name).read_bytes() == good[name]
    assert not (logs / "payments-0/00000000000000000000.index").exists()  # other topic: untouched
    after = {str(p.relative_to(logs)): p.stat().st_mtime_ns for p in logs.rglob("*") if p.is_file()}
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {"orders-0/00000000000000000000.index", "orders-1/00000000000000000000.timeindex"}
    (run_dir,) = (tmp_path / "backups").iterdir()  # named by the job's run id, made safe from Airflow's
    assert run_dir.name.startswith("manual__") and run_dir.name.endswith("-repair-try1")
    assert not set(run_dir.name) & set(":+ ") and sorted(p.name for p in run_dir.iterdir()) == [
        "orders-1"
    ]  # orders-0 had no .index to keep


def test_on_demand_dry_run_rebuild_writes_nothing(tmp_path):
    """The form's default "Dry run" with mode=rebuild: the job reports what it would rebuild and no file in
    the log dir changes (it used to rewrite every index file in place). The Spark connection is the one the
    Variable names, set with ``airflow variables set`` (which ``dags test`` cannot read while it parses): the only
    one there is, so the job runs only if the connection is read when the run starts."""
    logs, _ = damaged_log_dir(tmp_path)
    before = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    env = airflow_env(tmp_path / "home")
    env["AIRFLOW_CONN_KAFKA_INDEX_SPARK"] = env.pop("AIRFLOW_CONN_SPARK_DEFAULT")
    variable = run_variable(tmp_path, spark_conn_id="kafka_index_spark")
    done = dags_test(env, "kafka_index_on_demand", {"log_dirs": [str(logs)], "mode": "rebuild"}, variable)
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    after = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    assert after == before
    assert not (tmp_path / "backups").exists()
    report = json.loads(next((tmp_path / "reports").rglob("rebuild.json")).read_text())
    assert {s["action"] for s in report["segments"]} == {"would_rebuild"} and len(report["segments"]) == 6


def test_on_demand_dry_run_repair_that_finds_work_succeeds(tmp_path):
    """A dry run's findings are its answer: a dry-run repair over damaged files ends green and its report
    lists the repairs it would make (the job exited 1 for the findings, and the run ended red)."""
    logs, _ = damaged_log_dir(tmp_path)
    before = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    env = airflow_env(tmp_path / "home")
    variable = run_variable(tmp_path)
    done = dags_test(env, "kafka_index_on_demand", {"log_dirs": [str(logs)], "mode": "repair"}, variable)
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    after = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    assert after == before and not (tmp_path / "backups").exists()
    report = json.loads(next((tmp_path / "reports").rglob("repair.json")).read_text())
    would = sorted(
        (s["topic"], s["partition"], s["base_offset"]) for s in report["segments"] if s["action"] == "would_repair"
    )
    assert would == [("orders", 0, 0), ("orders", 1, 0), ("payments", 0, 0)]
    assert {os.path.relpath(f["file"], logs) for f in report["remaining_findings"]} == {
        "orders-0/00000000000000000000.index",
        "orders-1/00000000000000000000.timeindex",
        "payments-0/00000000000000000000.index",
    }


@requires_object_storage
def test_on_demand_dag_verifies_a_log_dir_in_object_storage(s3, tmp_path):
    """Issue 39: the form's log dir is a copy in S3 (moto on 127.0.0.1), the Variable's ``storage_options`` its
    endpoint; the job's executors read the bucket, the run ends green, and the report and audit rows name the
    URIs."""
    from deltalake import DeltaTable

    logs = tmp_path / "logs"
    for p in range(2):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=40, seed=p)
        rebuild_partition(logs / f"orders-{p}")
    uri = upload(s3[1], logs, "airflow/logs")
    env = airflow_env(tmp_path / "home")
    variable = run_variable(tmp_path, storage_options=s3[0])
    done = dags_test(env, "kafka_index_on_demand", {"log_dirs": [uri], "mode": "verify"}, variable)
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    assert "--storage-option AWS_ENDPOINT_URL=" in done.stdout + done.stderr  # the task log shows the command
    report = json.loads(next((tmp_path / "reports").rglob("verify.json")).read_text())
    assert report["remaining_findings"] == [] and len(report["segments"]) == 4
    rows = DeltaTable(str(tmp_path / "audit")).to_pyarrow_table().to_pylist()
    assert {r["log_dir"] for r in rows if r["record_type"] == "segment"} == {uri}
