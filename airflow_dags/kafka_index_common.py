"""Shared by the kafka-index DAGs: their settings, the ``spark-submit`` arguments of the jobs, and the operator
that submits them.

No index logic lives here: the DAGs only submit ``jobs/spark_job.py MODE`` and read the JSON report it writes.
Settings: ``conf/airflow.yaml``, overridden key by key by the Airflow Variable ``kafka_index_rebuild`` (JSON),
read at two moments:

- ``RUN_TIME`` keys, all but the schedule, are each run's (log dirs, reports, audit, backups, the jobs' extra
  arguments, Spark conf and Python, the Spark connection, the project's files and what spark-submit ships): read
  by the run's ``build_arguments`` task, where the Variable is always readable, and passed to the jobs through XCom.
- ``PARSE_TIME``: the schedule alone, which Airflow reads from the parsed DAG. Where the Variable cannot be read
  while parsing (``airflow dags test`` parses without the Variables of the metadata DB; a plain import),
  conf/airflow.yaml's counts; the scheduler's DAG processor reads the Variable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

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
    "sync": "auto",  # how the writing jobs make their files durable (SYNC_METHODS)
    # log dirs in object storage (s3://...): their endpoint, region and such, as --storage-option KEY=VALUE (on the
    # spark-submit command line the task log shows: credentials belong in the driver's and executors' environment)
    "storage_options": {},
    "fleet": {},  # the fleet DAGs' settings (kafka_index_fleet_common.FLEET_DEFAULTS)
}
# each run's settings, read by its build_arguments task; the others shape the DAG, read when it is parsed
RUN_TIME = (
    "log_dirs",
    "repair_enabled",
    "report_dir",
    "audit_table",
    "backup_dir",
    "sync",
    "storage_options",
    "extra_args",
    "conf",
    "driver_python",
    "spark_conn_id",
    "project_dir",
    "py_files",
    "archives",
    "fleet",  # its parse-time keys (runner, connection, limits) keep their parsed values: see the fleet DAGs
)
PARSE_TIME = tuple(k for k in DEFAULTS if k not in RUN_TIME)  # the schedule
MODES = ("verify", "rebuild", "repair", "recover")
#: how a writing job makes its files durable (``kafka-index --sync``): auto (the job's default: syncfs when it holds
#: every broker lock it writes under, else fsync), an fsync of each file and dir, or one syncfs per file system
SYNC_METHODS = ("auto", "fsync", "syncfs")


def sync_param(default: str) -> Any:
    """A form's ``sync`` field (the on-demand and rolling-repair DAGs), ``default`` from the settings."""
    from airflow.sdk import Param

    return Param(
        default,
        type="string",
        enum=list(SYNC_METHODS),
        title="Sync",
        description="rebuild, repair or recover: how what is written is made durable: auto (syncfs when the job "
        "holds the broker lock of every log dir it writes, on Linux 5.17+, else fsync), fsync of each file and dir, "
        "or syncfs, one per file system (much faster over many small partitions; also writes out everything else "
        "waiting on those file systems). The job's report and audit rows say which was used",
    )


def load_settings(variable_json: str | None) -> dict[str, Any]:
    """``DEFAULTS`` < ``conf/airflow.yaml`` < the Variable's JSON (None: no Variable). Unknown keys are an error."""
    settings = dict(DEFAULTS)
    if SETTINGS_FILE.exists():
        import yaml

        settings.update(yaml.safe_load(SETTINGS_FILE.read_text()) or {})
    if variable_json:
        try:
            value = json.loads(variable_json)
        except ValueError as exc:
            raise ValueError(f"Airflow Variable {VARIABLE}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"Airflow Variable {VARIABLE}: a JSON object is needed, got {variable_json!r}")
        settings.update(value)
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(
            f"kafka-index DAG settings ({SETTINGS_FILE}, Variable {VARIABLE}): unknown keys {sorted(unknown)}"
        )
    if settings["sync"] not in SYNC_METHODS:
        raise ValueError(
            f"kafka-index DAG settings ({SETTINGS_FILE}, Variable {VARIABLE}): sync must be one of {SYNC_METHODS}, "
            f"got {settings['sync']!r}"
        )
    if isinstance(settings["log_dirs"], str):
        settings["log_dirs"] = [d for d in settings["log_dirs"].split(",") if d]
    settings["project_dir"] = settings["project_dir"] or str(PROJECT_DIR)
    return settings


def parse_time_settings() -> dict[str, Any]:
    """The settings while the DAG file is parsed: only their ``PARSE_TIME`` keys shape the DAG (and the on-demand
    form's default log dirs); a run reads the others again (:func:`run_settings`)."""
    try:
        from airflow.sdk import Variable

        variable: str | None = Variable.get(VARIABLE, default=None)
    except Exception:  # Variables are not readable while parsing here (a plain import, `airflow dags test`)
        variable = None
    return load_settings(variable)


def run_settings(parsed: dict[str, Any]) -> dict[str, Any]:
    """The settings of a run, read inside its task: the ``RUN_TIME`` keys from conf/airflow.yaml and the Variable
    as they are now; the others keep the values of ``parsed``, which the DAG and its operators were built with."""
    from airflow.sdk import Variable

    now = load_settings(Variable.get(VARIABLE, default=None))
    return {**parsed, **{k: now[k] for k in RUN_TIME}}


def require_log_dirs(settings: dict[str, Any]) -> list[str]:
    """The run's log dirs; none is a failure (not retried) saying where to set them."""
    if not settings["log_dirs"]:
        raise AirflowFailException(
            f"no Kafka log dirs to work on: set log_dirs in {SETTINGS_FILE} or in the Airflow Variable {VARIABLE} (JSON)"
        )
    return [str(d) for d in settings["log_dirs"]]


def application(settings: dict[str, Any]) -> str:
    """The Spark job every DAG submits (its first argument is the mode)."""
    return os.path.join(settings["project_dir"], "jobs", "spark_job.py")


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
    exit_zero_on_findings: bool = False,
    sync: str = "auto",
) -> list[str]:
    """The ``jobs/spark_job.py`` arguments: the mode, then ``kafka-index``'s options, but ``--run-id``: each try has its
    own, added by :class:`JobSubmitOperator`. A dry run exits 0 on findings (they are its answer); a run that
    could not do its work (a segment not staged or written, bad usage) still fails. ``sync``: how a writing mode makes
    its files durable (verify writes nothing: not passed)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if sync not in SYNC_METHODS:
        raise ValueError(f"sync must be one of {SYNC_METHODS}, got {sync!r}")
    if not log_dirs:
        raise ValueError("at least one log dir is needed")
    if truncate_corrupt_tail and mode != "repair":  # a combination the job cannot honour: refuse, never drop it
        raise ValueError(f"truncate_corrupt_tail applies to repair only, not to {mode}")
    args: list[str] = [mode]
    for d in log_dirs:
        args += ["--log-dir", d]
    if topics:
        args += ["--topics", topics]
    if partitions:
        args += ["--partitions", partitions]
    for key, value in sorted((settings.get("storage_options") or {}).items()):
        args += ["--storage-option", f"{key}={value}"]
    if settings.get("audit_table"):
        args += ["--audit-table", settings["audit_table"]]
    if settings.get("backup_dir") and mode != "verify":
        args += ["--backup-dir", settings["backup_dir"]]
    args += ["--json", report]  # progress: a line every 10 s in the task log
    if mode != "verify" and dry_run:  # verify never writes; a dry rebuild or repair writes nothing either
        args.append("--dry-run")
    if mode == "repair" and truncate_corrupt_tail:
        args.append("--truncate-corrupt-tail")
    if mode != "verify" and sync != "auto":  # auto: the job's default
        args += ["--sync", sync]
    if exit_zero_on_findings or (mode != "verify" and dry_run):
        args.append("--exit-zero-on-findings")
    return args + [str(a) for a in settings.get("extra_args") or []]


def submit_options(settings: dict[str, Any]) -> dict[str, Any]:
    """What :class:`JobSubmitOperator` submits with, from a run's settings (XCom-able): the application, the Spark
    connection and what spark-submit ships; its ``conf`` is :func:`spark_conf`."""
    options: dict[str, Any] = {"application": application(settings), "conn_id": settings["spark_conn_id"]}
    if settings.get("py_files"):
        options["py_files"] = settings["py_files"]
    if settings.get("archives"):
        options["archives"] = settings["archives"]
    return options


def spark_conf(settings: dict[str, Any]) -> dict[str, str]:
    """The jobs' ``spark-submit --conf``: the driver runs ``driver_python`` (default: the project's venv), never
    the ``python3`` first on the worker's PATH (Airflow's own, without the project); the executors too, unless
    ``archives`` brings theirs (``./env/bin/python``). The ``conf`` setting wins over both."""
    # the driver's JVM logs errors only, as a local run does (spark-submit's default is INFO)
    log4j = os.path.join(settings["project_dir"], "conf", "log4j2.properties")
    python = settings.get("driver_python") or os.path.join(settings["project_dir"], ".venv", "bin", "python")
    conf: dict[str, str] = {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
        "spark.pyspark.driver.python": python,
        # local mode, or a cluster with the project's venv at the same path on every node
        "spark.pyspark.python": "./env/bin/python" if settings.get("archives") else python,
    }
    conf.update({str(k): str(v) for k, v in (settings.get("conf") or {}).items()})
    return conf


class JobSubmitOperator(SparkSubmitOperator):
    """``spark-submit`` of a job whose arguments and conf come from an upstream task (XCom), with ``--run-id``
    rendered at each try from ``job_run_id`` (templated, ``<run id>-<mode>-try<N>``): the job refuses a
    writing run under an id that an earlier run may have replaced files under, so a retry needs its own."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "job_run_id", "submit")

    def __init__(self, *, job_run_id: str, submit: Any, **kwargs: Any) -> None:
        super().__init__(verbose=False, env_vars={"PYTHONUNBUFFERED": "1"}, **kwargs)
        self.job_run_id = job_run_id
        self.submit = submit  # the run's submit_options (XCom), resolved when the task runs

    def execute(self, context: Context) -> None:
        """Submit the job with the run's :func:`submit_options`; push the outcome its ``--json`` report states
        (:func:`job_outcome`) as the task's return value in XCom (``operator.output``)."""
        # the provider keeps the connection and the archives in private attributes its hook is built from
        if not (hasattr(self, "_conn_id") and hasattr(self, "_archives")):  # pragma: no cover - another provider
            raise AirflowFailException("this apache-spark provider has no _conn_id/_archives: pin the supported one")
        self.application = self.submit["application"]
        self._conn_id = self.submit["conn_id"]
        self.py_files = self.submit.get("py_files")
        self._archives = self.submit.get("archives")
        self.application_args = [*(self.application_args or []), "--run-id", self.job_run_id]
        super().execute(context)
        context["ti"].xcom_push(key="return_value", value=job_outcome(self.application_args))


def safe_name(run_id: str) -> str:
    """An Airflow run id as a file-name-safe run id: ``manual__2026-11-23T16:34:09+00:00`` ->
    ``manual__2026-11-23T16_34_09_00_00`` (it names backup dirs and staged files)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


def report_path(settings: dict[str, Any], dag_id: str, run_id: str, task: str) -> str:
    safe = safe_name(run_id)
    return os.path.join(settings["report_dir"], dag_id, safe, f"{task}.json")


def job_outcome(application_args: list[str]) -> dict[str, Any] | None:
    """What a finished job's ``--json`` report says, small enough for XCom: its run id, exit code and the kinds of
    the error findings that remain (kind -> count). Read on the host that submitted the job, where its driver wrote
    the report (client deploy mode, the DAGs' way); None where there is none here (cluster deploy mode)."""
    args = list(application_args)
    if "--json" not in args:
        return None
    path = args[args.index("--json") + 1]
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError:
        return None
    kinds: dict[str, int] = {}
    for finding in report["remaining_findings"]:
        kinds[finding["kind"]] = kinds.get(finding["kind"], 0) + 1
    return {"run_id": report["run_id"], "exit_code": report["exit_code"], "remaining": kinds, "report": path}


def findings_in(outcome: dict[str, Any] | None) -> int:
    """Error findings that remain after a job, from its outcome (:func:`job_outcome`, through XCom)."""
    if outcome is None:
        raise ValueError("the job's outcome is not known: its --json report was not on the host that submitted it")
    return sum(outcome["remaining"].values())
