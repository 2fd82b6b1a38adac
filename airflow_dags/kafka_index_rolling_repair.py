"""Rolling repair of a fleet (triggered by hand): one broker at a time, stop it, repair its disks, start it, and
wait until the cluster reports no under-replicated partitions before the next one.

``plan`` reads the inventory (as the fleet DAG does) and the trigger form (dry run: on by default; the brokers,
default all, in inventory order) -> ``roll`` goes broker by broker on its host, through the runner (``ssh`` or
``local``): ``fleet.stop_command``, ``kafka-index repair`` (its backups in ``backup_dir`` on the host),
``fleet.start_command``, then ``fleet.healthy_command`` on the Airflow worker until it exits 0 (at most
``healthy_timeout_minutes``). It stops at the first failure and says where: the broker, the step, the exit code,
the brokers done and the ones not touched (a broker whose repair failed is left stopped, for a person to look
at). A dry run stops and starts nothing and runs ``repair --dry-run`` (it reads only): it lists what it would do.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared modules beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import parse_time_settings, run_settings, safe_name, sync_param  # noqa: E402
from kafka_index_fleet_common import (  # noqa: E402
    INVENTORY_VARIABLE,
    RUN_TIME,
    fill,
    fleet_settings,
    kafka_index_args,
    load_inventory,
)

DAG_ID = "kafka_index_rolling_repair"
SETTINGS = parse_time_settings()
FLEET = fleet_settings(SETTINGS)


class StepFailed(Exception):
    def __init__(self, step: str, code: int) -> None:
        super().__init__(f"{step}: exit {code}")
        self.step = step
        self.code = code


def on_host(fleet: dict[str, Any], broker: dict[str, Any], step: str, command: str, timeout: float) -> None:
    """Run ``command`` on the broker's host through the runner; its output goes to the task log."""
    print(f"broker {broker['id']} ({broker['host']}): {step}: {command}", flush=True)
    if fleet["runner"] == "ssh":
        from airflow.providers.ssh.hooks.ssh import SSHHook

        hook = SSHHook(
            ssh_conn_id=broker.get("ssh_conn_id") or fleet["ssh_conn_id"], remote_host=broker["host"], conn_timeout=30
        )
        with hook.get_conn() as client:
            code, out, err = hook.exec_ssh_client_command(client, command, get_pty=False, environment=None,
                                                          timeout=timeout)  # fmt: skip
        text = (out + err).decode(errors="replace").rstrip()
    else:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout)
        code, text = done.returncode, (done.stdout + done.stderr).rstrip()
    if text:
        print(text, flush=True)
    if code != 0:
        raise StepFailed(step, code)


def wait_healthy(fleet: dict[str, Any], broker: dict[str, Any]) -> None:
    """``healthy_command`` (on this worker) until it exits 0; StepFailed after ``healthy_timeout_minutes``."""
    command = fill(fleet["healthy_command"], broker)
    deadline = time.monotonic() + float(fleet["healthy_timeout_minutes"]) * 60
    while True:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            print(f"broker {broker['id']}: the cluster is healthy: {command}", flush=True)
            return
        if time.monotonic() > deadline:
            raise StepFailed(f"wait for no under-replicated partitions ({command})", done.returncode)
        time.sleep(float(fleet["healthy_poll_seconds"]))


with DAG(
    dag_id=DAG_ID,
    description="One broker at a time: stop, repair, start, wait until no partition is under-replicated",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "dry_run": Param(True, type="boolean", description="stop and start nothing; report what repair would do"),
        "brokers": Param(
            [],
            type="array",
            items={"type": "integer"},
            description="broker ids to roll, in inventory order (empty: every broker)",
        ),
        "sync": sync_param(SETTINGS["sync"]),
    },  # fmt: skip
    tags=["kafka", "kafka-index", "fleet"],
    doc_md=__doc__,
) as dag:

    @task(task_id="roll")
    def roll() -> None:
        context = get_current_context()
        settings = run_settings(SETTINGS)
        now = fleet_settings(settings)
        fleet = {**FLEET, **{k: now[k] for k in RUN_TIME}}
        if fleet["runner"] not in ("ssh", "local"):
            raise AirflowFailException(f"the rolling repair runs over the ssh or local runner, not {fleet['runner']}")
        from airflow.sdk import Variable

        try:
            brokers = load_inventory(fleet, Variable.get(INVENTORY_VARIABLE, default=None))
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None
        chosen = list(context["params"].get("brokers") or [])
        unknown = sorted(set(chosen) - {b["id"] for b in brokers})
        if unknown:
            raise AirflowFailException(f"brokers {unknown} are not in the inventory")
        if chosen:
            brokers = [b for b in brokers if b["id"] in chosen]
        dry_run = bool(context["params"].get("dry_run", True))
        run_id = f"rolling-{safe_name(context['run_id'])}"
        limit = float(fleet["timeout_minutes"]) * 60
        done: list[int] = []
        for n, broker in enumerate(brokers):
            repair = kafka_index_args(
                fleet, broker, mode="repair", run_id=run_id, audit_table=settings["audit_table"], dry_run=dry_run,
                backup_dir=settings["backup_dir"], sync=context["params"].get("sync", settings["sync"]),
            )  # fmt: skip
            step = "stop"
            try:
                if dry_run:
                    print(f"broker {broker['id']}: dry run: would stop: {fill(fleet['stop_command'], broker)}")
                    on_host(fleet, broker, "repair --dry-run", shlex.join(repair), limit)
                    print(f"broker {broker['id']}: dry run: would start: {fill(fleet['start_command'], broker)}")
                else:
                    on_host(fleet, broker, "stop", fill(fleet["stop_command"], broker), 600)
                    step = "repair"
                    on_host(fleet, broker, "repair", shlex.join(repair), limit)
                    step = "start"
                    on_host(fleet, broker, "start", fill(fleet["start_command"], broker), 600)
                    step = "wait"
                    wait_healthy(fleet, broker)
            except Exception as exc:  # StepFailed, an SSH or OS error, a timeout
                left = [b["id"] for b in brokers[n + 1 :]]
                stopped = " (left stopped)" if step in ("repair", "start") else ""
                raise AirflowFailException(
                    f"rolling repair stopped at broker {broker['id']} ({broker['host']}){stopped}, step {step}: "
                    f"{exc}; done: {done or 'none'}; not touched: {left or 'none'}"
                ) from None
            done.append(broker["id"])
        print(f"rolling repair{' (dry run)' if dry_run else ''} done: brokers {done}, run id {run_id}")

    roll()
