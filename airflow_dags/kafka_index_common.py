"""Shared by the kafka-index DAGs: their settings and the ``spark-submit`` arguments of the jobs.

No index logic lives here: the DAGs only submit ``jobs/<mode>.py`` and read the JSON report it writes.
Settings: ``conf/airflow.yaml``, overridden key by key by the Airflow Variable ``kafka_index_rebuild``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PROJECT_DIR = Path(__file__).resolve().parent.parent
SETTINGS_FILE = PROJECT_DIR / "conf" / "airflow.yaml"
VARIABLE = "kafka_index_rebuild"
DEFAULTS: dict[str, Any] = {
    "log_dirs": [],
    "repair_enabled": False,
    "schedule": "@daily",
    "spark_conn_id": "spark_default",
    "project_dir": None,
    "py_files": None,
    "archives": None,
    "driver_python": None,
    "conf": {},
    "extra_args": [],
    "report_dir": "/tmp/kafka-index-reports",
    "audit_table": None,
    "backup_dir": None,
}
MODES = ("verify", "rebuild", "repair")


def load_settings(variable_json: str | None = None) -> dict[str, Any]:
    """``DEFAULTS`` < ``conf/airflow.yaml`` < the Airflow Variable (JSON). Unknown keys are an error."""
    settings = dict(DEFAULTS)
    if SETTINGS_FILE.exists():
        import yaml

        settings.update(yaml.safe_load(SETTINGS_FILE.read_text()) or {})
    if variable_json is None:
        variable_json = _variable()
    if variable_json:
        settings.update(json.loads(variable_json))
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"kafka-index DAG settings: unknown keys {sorted(unknown)}")
    if isinstance(settings["log_dirs"], str):
        settings["log_dirs"] = [d for d in settings["log_dirs"].split(",") if d]
    settings["project_dir"] = settings["project_dir"] or str(PROJECT_DIR)
    return settings


def _variable() -> str | None:
    try:
        from airflow.sdk import Variable

        value: str | None = Variable.get(VARIABLE, default=None)
        return value
    except Exception:  # no Airflow metadata available while parsing (e.g. a plain import in tests)
        return None


def application(settings: dict[str, Any], mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return os.path.join(settings["project_dir"], "jobs", f"{mode}.py")


def job_arguments(
    settings: dict[str, Any],
    *,
    mode: str,
    log_dirs: list[str],
    report: str,
    topics: str | None = None,
    partitions: str | None = None,
    dry_run: bool = False,
    truncate_corrupt_tail: bool = False,
    run_id: str | None = None,
    exit_zero_on_findings: bool = False,
) -> list[str]:
    """The ``jobs/<mode>.py`` arguments (same spelling as ``kafka-index``)."""
    if not log_dirs:
        raise ValueError("at least one log dir is needed")
    if truncate_corrupt_tail and mode != "repair":  # a combination the job cannot honour: refuse, never drop it
        raise ValueError(f"truncate_corrupt_tail applies to repair only, not to {mode}")
    args: list[str] = []
    for d in log_dirs:
        args += ["--log-dir", d]
    if topics:
        args += ["--topics", topics]
    if partitions:
        args += ["--partitions", partitions]
    if settings.get("audit_table"):
        args += ["--audit-table", settings["audit_table"]]
    if settings.get("backup_dir") and mode != "verify":
        args += ["--backup-dir", settings["backup_dir"]]
    if run_id:
        args += ["--run-id", run_id]
    args += ["--json", report]  # progress: a line every 10 s in the task log
    if mode != "verify" and dry_run:  # verify never writes; a dry rebuild or repair writes nothing either
        args.append("--dry-run")
    if mode == "repair" and truncate_corrupt_tail:
        args.append("--truncate-corrupt-tail")
    if exit_zero_on_findings:
        args.append("--exit-zero-on-findings")
    return args + [str(a) for a in settings.get("extra_args") or []]


def submit_options(settings: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``SparkSubmitOperator`` shared by every job."""
    options = {"conn_id": settings["spark_conn_id"], "verbose": False, "env_vars": {"PYTHONUNBUFFERED": "1"}}
    # the driver's JVM logs errors only, as a local run does (spark-submit's default is INFO)
    log4j = os.path.join(settings["project_dir"], "conf", "log4j2.properties")
    conf: dict[str, str] = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}"}
    if settings.get("py_files"):
        options["py_files"] = settings["py_files"]
    if settings.get("archives"):
        # executors run Python from the archive; the driver (client mode) runs the project's own venv
        options["archives"] = settings["archives"]
        conf["spark.pyspark.python"] = "./env/bin/python"
        conf["spark.pyspark.driver.python"] = settings.get("driver_python") or os.path.join(
            settings["project_dir"], ".venv", "bin", "python"
        )
    conf.update({str(k): str(v) for k, v in (settings.get("conf") or {}).items()})
    options["conf"] = conf
    return options


def safe_name(run_id: str) -> str:
    """An Airflow run id as a file-name-safe run id: ``manual__2026-11-23T16:34:09+00:00`` ->
    ``manual__2026-11-23T16_34_09_00_00`` (it names backup dirs and staged files)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


def report_path(settings: dict[str, Any], dag_id: str, run_id: str, task: str) -> str:
    safe = safe_name(run_id)
    return os.path.join(settings["report_dir"], dag_id, safe, f"{task}.json")


def findings_in(report_file: str) -> int:
    """Error findings left in a job's JSON report (a missing report is an error)."""
    with open(report_file, encoding="utf-8") as f:
        return len(json.load(f)["remaining_findings"])
