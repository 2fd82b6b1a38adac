"""Fleet kafka-index DAG: every broker verifies its own disks, all under one run id, into one audit table.

``inventory`` reads the inventory (``fleet.inventory``, a YAML file, or the Variable ``kafka_index_brokers``) and
builds each broker's ``kafka-index verify`` -> ``verify_broker``: one mapped task per broker (dynamic task
mapping), run on that broker's host by the runner (``fleet.runner``: ``ssh`` with the SSH provider,
``kubernetes`` with a pod on the broker's node, ``local``), each with its own time limit -> ``summary`` (runs
whatever the brokers' tasks ended with) reads the run's rows back from the table (``kafka-index audit --run ID
--json``), prints per broker segments checked, findings by kind and exit code, names brokers with no rows, and
fails the run when a broker's run failed or left no rows and (``fleet.fail_on_findings``) when any has findings.

The shared run id: the trigger form's ``fleet_run_id``, else ``fleet-<Airflow's run id, made file-name safe>``; a
re-run under the same id adds no row. Settings: ``conf/airflow.yaml`` or the Variable ``kafka_index_rebuild``
(its ``audit_table`` and ``fleet`` keys; see kafka_index_fleet_common).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared modules beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import parse_time_settings, run_settings, safe_name  # noqa: E402
from kafka_index_fleet_common import (  # noqa: E402
    INVENTORY_VARIABLE,
    RUN_TIME,
    broker_task_kwargs,
    fleet_settings,
    judge,
    kafka_index_args,
    load_inventory,
    parse_summary,
    storage_option_args,
)

DAG_ID = "kafka_index_fleet"
SETTINGS = parse_time_settings()
FLEET = fleet_settings(SETTINGS)


def fleet_now() -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's settings and fleet settings as they are now (the parse-time keys keep their parsed values)."""
    settings = run_settings(SETTINGS)
    now = fleet_settings(settings)
    return settings, {**FLEET, **{k: now[k] for k in RUN_TIME}}


def inventory(fleet: dict[str, Any]) -> list[dict[str, Any]]:
    from airflow.sdk import Variable

    try:
        return load_inventory(fleet, Variable.get(INVENTORY_VARIABLE, default=None))
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from None


def shared_run_id(params: dict[str, Any], airflow_run_id: str) -> str:
    return safe_name(params.get("fleet_run_id") or f"fleet-{safe_name(airflow_run_id)}")


with DAG(
    dag_id=DAG_ID,
    description="Verify every broker's own disks at once, into one audit table",
    schedule=SETTINGS["schedule"],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "fleet_run_id": Param(
            "",
            type="string",
            pattern=r"^[A-Za-z0-9_.\-]*$",
            description="the shared run id (empty: fleet-<Airflow's run id>); re-use one to re-run it",
        ),
    },  # fmt: skip
    tags=["kafka", "kafka-index", "fleet"],
    doc_md=__doc__,
) as dag:

    @task(task_id="inventory", multiple_outputs=True)
    def read_inventory() -> dict[str, Any]:
        """The shared run id and the brokers (one line per bad inventory entry; no audit table: fail)."""
        context = get_current_context()
        settings, fleet = fleet_now()
        if not settings["audit_table"]:
            raise AirflowFailException(
                "the fleet DAG needs the shared audit table: set audit_table in conf/airflow.yaml or the "
                "Variable kafka_index_rebuild (a path every broker reaches, or s3://...)"
            )
        return {"fleet_run_id": shared_run_id(context["params"], context["run_id"]), "brokers": inventory(fleet)}

    @task(task_id="commands")
    def commands(fleet_run_id: str, brokers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each broker's ``kafka-index verify``, as the keyword arguments of its mapped task."""
        settings, fleet = fleet_now()
        kwargs = []
        for b in brokers:
            args = kafka_index_args(fleet, b, mode="verify", run_id=fleet_run_id, audit_table=settings["audit_table"])
            kwargs.append(broker_task_kwargs(fleet, b, args))
            print(f"broker {b['id']} ({b['host']}): {shlex.join(args)}")
        return kwargs

    planned = read_inventory()
    kwargs = commands(planned["fleet_run_id"], planned["brokers"])
    limits: dict[str, Any] = {
        "task_id": "verify_broker",
        "execution_timeout": timedelta(minutes=float(FLEET["timeout_minutes"])),
        "max_active_tis_per_dagrun": int(FLEET["max_parallel"]),
        "retries": 0,
        "do_xcom_push": False,
    }
    if FLEET["runner"] == "ssh":
        from airflow.providers.ssh.operators.ssh import SSHOperator

        verify: Any = SSHOperator.partial(
            cmd_timeout=float(FLEET["timeout_minutes"]) * 60, conn_timeout=30, **limits
        ).expand_kwargs(kwargs)
    elif FLEET["runner"] == "local":
        from airflow.providers.standard.operators.bash import BashOperator

        verify = BashOperator.partial(**limits).expand_kwargs(kwargs)
    else:
        from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

        verify = KubernetesPodOperator.partial(
            namespace=FLEET["kubernetes"]["namespace"],
            image=FLEET["kubernetes"]["image"],
            get_logs=True,
            on_finish_action="delete_succeeded_pod",
            **limits,
        ).expand_kwargs(kwargs)

    @task(task_id="summary", trigger_rule="all_done")
    def summary(fleet_run_id: str, brokers: list[dict[str, Any]]) -> None:
        """The run's rows per broker, from the table; fails the run on a failed or silent broker, and findings."""
        settings, fleet = fleet_now()
        command = [
            *shlex.split(fleet["summary_kafka_index"]), "audit", "--run", fleet_run_id, "--json",
            "--audit-table", settings["audit_table"], *storage_option_args(fleet),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise AirflowFailException(f"the audit table could not be read ({done.returncode}): {done.stderr.strip()}")
        lines, problems = judge(brokers, parse_summary(done.stdout), bool(fleet["fail_on_findings"]))
        print(f"fleet run {fleet_run_id}, audit table {settings['audit_table']}:")
        for line in lines:
            print(line)
        if problems:
            raise AirflowFailException(f"fleet run {fleet_run_id}: " + "; ".join(problems))

    verify >> summary(planned["fleet_run_id"], planned["brokers"])
