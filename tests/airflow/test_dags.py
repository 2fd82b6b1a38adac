"""The Airflow DAGs, with real Airflow 3 in its own virtualenv (``.venv-airflow``, set up by ``make test``).

Structure, Params schema and rendering are read from a real ``DagBag`` (``dag_facts.py`` runs inside the
Airflow virtualenv); the end-to-end tests run ``airflow dags test`` of both DAGs with ``spark_default``
pointing at local Spark, on a generated log dir with damaged index files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexlib.generate import generate_partition
from indexlib.partition import rebuild_partition

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_VENV = ROOT / ".venv-airflow"
AIRFLOW = AIRFLOW_VENV / "bin" / "airflow"

pytestmark = pytest.mark.skipif(
    not AIRFLOW.exists(), reason="Airflow's own virtualenv .venv-airflow is missing: `make test` sets it up"
)


def airflow_env(home: Path, variable: dict) -> dict:
    project_bin = str(Path(sys.executable).parent)  # spark-submit and the jobs' Python live here
    return dict(
        os.environ,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "airflow_dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW_CONN_SPARK_DEFAULT="spark://local?deploy-mode=client",
        AIRFLOW_VAR_KAFKA_INDEX_REBUILD=json.dumps(variable),
        PATH=project_bin + os.pathsep + os.environ.get("PATH", ""),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-home")
    env = airflow_env(home, {"log_dirs": ["/data/a", "/data/b"], "report_dir": "/r", "repair_enabled": True})
    payloads = {
        "ok": {"mode": "repair", "partitions": "0,2-4", "log_dirs": ["/x"]},
        "bad_mode": {"mode": "explode"},
        "bad_partitions": {"partitions": "a-b"},
        "no_log_dirs": {"log_dirs": []},
        "bad_dry_run": {"dry_run": "yes"},
    }
    render = {
        "mode": "repair",
        "log_dirs": ["/x"],
        "topics": "orders",
        "partitions": "1",
        "dry_run": True,
        "truncate_corrupt_tail": True,
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
    return json.loads(lines[-1][6:])


def test_dagbag_imports_without_errors(facts):
    assert facts["import_errors"] == {}
    assert set(facts["dags"]) == {"kafka_index_scheduled", "kafka_index_on_demand"}


def test_scheduled_dag_structure(facts):
    dag = facts["dags"]["kafka_index_scheduled"]
    assert dag["schedule"] == "@daily" and dag["catchup"] is False
    assert dag["tasks"] == ["decide", "findings_left", "healthy", "prepare_reports", "repair", "verify"]
    assert dag["edges"] == [
        ["decide", "findings_left"],
        ["decide", "healthy"],
        ["decide", "repair"],
        ["prepare_reports", "verify"],
        ["verify", "decide"],
    ]
    assert dag["operators"]["verify"] == dag["operators"]["repair"] == "SparkSubmitOperator"
    assert "Branch" in dag["operators"]["decide"]
    assert dag["conn_ids"] == ["spark_default"]


def test_on_demand_dag_params_schema(facts):
    dag = facts["dags"]["kafka_index_on_demand"]
    assert dag["schedule"] is None and dag["tasks"] == ["build_arguments", "run_job"]
    params = dag["params"]
    assert set(params) == {"log_dirs", "topics", "partitions", "mode", "dry_run", "truncate_corrupt_tail"}
    assert params["mode"]["enum"] == ["verify", "rebuild", "repair"]
    assert params["log_dirs"]["type"] == "array" and params["log_dirs"]["minItems"] == 1
    assert params["dry_run"]["type"] == params["truncate_corrupt_tail"]["type"] == "boolean"
    assert facts["param_checks"] == {
        "ok": "valid",
        "bad_mode": "invalid: ParamValidationError",
        "bad_partitions": "invalid: ParamValidationError",
        "no_log_dirs": "invalid: ParamValidationError",
        "bad_dry_run": "invalid: ParamValidationError",
    }


def test_rendered_spark_submit_arguments(facts):
    verify = facts["rendered_verify"]
    assert verify["application"] == str(ROOT / "jobs" / "verify.py")
    assert verify["args"] == [
        "--log-dir",
        "/data/a",
        "--log-dir",
        "/data/b",
        "--run-id",
        "scheduled__2026-11-21T00_00_00_00_00-verify-try2",  # no ':' or '+' in the backup dir names it gives
        "--json",
        "/r/kafka_index_scheduled/scheduled__2026-11-21T00_00_00_00_00/verify.json",
        "--exit-zero-on-findings",
    ]
    on_demand = facts["rendered_on_demand"]
    assert on_demand["application"] == str(ROOT / "jobs" / "repair.py")
    assert on_demand["args"] == [
        "--log-dir",
        "/x",
        "--topics",
        "orders",
        "--partitions",
        "1",
        "--json",
        "/r/kafka_index_on_demand/manual__x/repair.json",
        "--dry-run",
        "--truncate-corrupt-tail",
    ]


def test_each_try_of_a_job_has_its_own_run_id(facts):
    """A writing run under a run id that an earlier run used is refused (its backups would not be kept), so a
    retried task must not repeat its first try's id: the try number is part of it (rendered here for try 2)."""
    repair = facts["rendered_repair_args"]
    assert repair[repair.index("--run-id") + 1] == "scheduled__2026-11-21T00_00_00_00_00-repair-try2"
    assert facts["on_demand_run_id"] == "manual__2026-11-23T16_34_09_00_00-repair-try2"


def test_the_form_refuses_what_the_job_cannot_honour(facts):
    """Truncating a corrupt tail is a repair's; with rebuild it used to be dropped silently."""
    assert facts["truncate_with_rebuild"] == "truncate_corrupt_tail applies to repair only, not to rebuild"


def test_cluster_settings_reach_spark_submit(facts):
    """With an archive the executors run its Python and the driver the project's venv (spark.pyspark.python
    alone would send the driver to ./env too); the conf mapping is passed as is and wins."""
    options = facts["submit_options_archive"]
    assert options["archives"] == "/d/env.tar.gz#env"
    quiet = f"-Dlog4j2.configurationFile={ROOT / 'conf' / 'log4j2.properties'}"
    assert options["conf"] == {
        "spark.driver.extraJavaOptions": quiet,
        "spark.pyspark.python": "/py",
        "spark.pyspark.driver.python": str(ROOT / ".venv" / "bin" / "python"),
        "spark.executor.memory": "2g",
    }
    local = facts["submit_options_local"]
    assert local["conf"] == {"spark.driver.extraJavaOptions": quiet} and "archives" not in local


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


def dags_test(env: dict, dag_id: str, conf: dict | None = None) -> subprocess.CompletedProcess:
    subprocess.run([str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, check=True, timeout=300)
    cmd = [str(AIRFLOW), "dags", "test", dag_id] + (["--conf", json.dumps(conf)] if conf else [])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=env["AIRFLOW_HOME"])


def state_of(done: subprocess.CompletedProcess) -> str:
    for line in (done.stdout + done.stderr).splitlines():
        if "DagRun Finished" in line:
            return line.split("state=")[1].split(",")[0]
    return "unknown"


def test_scheduled_dag_detects_and_repairs(tmp_path):
    logs, good = damaged_log_dir(tmp_path)
    audit = tmp_path / "audit"
    env = airflow_env(
        tmp_path / "home",
        {
            "log_dirs": [str(logs)],
            "repair_enabled": True,
            "report_dir": str(tmp_path / "reports"),
            "audit_table": str(audit),
            "backup_dir": str(tmp_path / "backups"),
        },
    )
    done = dags_test(env, "kafka_index_scheduled")
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    now = {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()}
    assert now == good  # every index file equals the rebuild again, nothing else changed
    verify_report = next((tmp_path / "reports").rglob("verify.json"))
    flagged = {os.path.relpath(f["file"], logs) for f in json.loads(verify_report.read_text())["remaining_findings"]}
    assert flagged == {
        "orders-0/00000000000000000000.index",
        "orders-1/00000000000000000000.timeindex",
        "payments-0/00000000000000000000.index",
    }
    from jobs import audit as audit_table

    rows = audit_table.read(str(audit)).to_pylist()
    modes = {(r["run_mode"], r["record_type"]) for r in rows}
    assert modes == {("verify", "segment"), ("verify", "run"), ("repair", "segment"), ("repair", "run")}
    repaired = sorted((r["topic"], r["partition"], r["base_offset"]) for r in rows if r["action"] == "repaired")
    assert repaired == [("orders", 0, 0), ("orders", 1, 0), ("payments", 0, 0)]


def test_on_demand_dag_touches_only_the_chosen_topic(tmp_path):
    logs, good = damaged_log_dir(tmp_path)
    env = airflow_env(
        tmp_path / "home",
        {
            "report_dir": str(tmp_path / "reports"),
            "audit_table": str(tmp_path / "audit"),
            "backup_dir": str(tmp_path / "backups"),
        },
    )
    before = {str(p.relative_to(logs)): p.stat().st_mtime_ns for p in logs.rglob("*") if p.is_file()}
    done = dags_test(
        env, "kafka_index_on_demand", {"log_dirs": [str(logs)], "topics": "orders", "mode": "repair", "dry_run": False}
    )
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
    the log dir changes (it used to rewrite every index file in place)."""
    logs, _ = damaged_log_dir(tmp_path)
    before = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    env = airflow_env(
        tmp_path / "home",
        {
            "report_dir": str(tmp_path / "reports"),
            "audit_table": str(tmp_path / "audit"),
            "backup_dir": str(tmp_path / "backups"),
        },
    )
    done = dags_test(env, "kafka_index_on_demand", {"log_dirs": [str(logs)], "mode": "rebuild"})
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    after = {str(p.relative_to(logs)): (p.stat().st_mtime_ns, p.read_bytes()) for p in logs.rglob("*") if p.is_file()}
    assert after == before
    assert not (tmp_path / "backups").exists()
    report = json.loads(next((tmp_path / "reports").rglob("rebuild.json")).read_text())
    assert {s["action"] for s in report["segments"]} == {"would_rebuild"} and len(report["segments"]) == 6
