"""Shared by the fleet DAGs (``kafka_index_fleet``, ``kafka_index_rolling_repair``): the broker inventory, the
command each broker's host runs, the Kubernetes pod of a broker, and the judgment of a run's summary.

No index logic lives here (and no import of ``indexlib``/``jobs``): a broker's host runs ``kafka-index`` (the
packed environment from ``make package-full``, or the project), which reads its own disks and writes its rows
into the shared audit table; the summary reads them back with ``kafka-index audit --run ID --json``.

Settings: the ``fleet`` key of ``conf/airflow.yaml`` (or of the Airflow Variable ``kafka_index_rebuild``),
merged key by key over :data:`FLEET_DEFAULTS`; the inventory: a YAML file (``fleet.inventory``) or, when that
is null, the Airflow Variable ``kafka_index_brokers`` (JSON, same shape).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any

INVENTORY_VARIABLE = "kafka_index_brokers"
RUNNERS = ("ssh", "kubernetes", "local")
ENGINES = ("spark", "local")
FLEET_DEFAULTS: dict[str, Any] = {
    # [run time] the brokers: a YAML file; null: the Airflow Variable kafka_index_brokers (JSON, same shape)
    "inventory": None,
    # [parse time] how a broker's task reaches its host: ssh | kubernetes | local
    "runner": "ssh",
    # [parse time] the SSH provider's connection (its user, key, port, host key); a broker's ssh_conn_id wins
    "ssh_conn_id": "kafka_index_ssh",
    # [run time] what runs on the host: spark (the Spark job in local mode) | local (a process pool, no JVM)
    "engine": "spark",
    # [run time] kafka-index on the broker hosts (a command line: the packed env's bin/kafka-index)
    "kafka_index": "/opt/kafka-index/env/bin/kafka-index",
    # [run time] kafka-index where the summary runs (the Airflow worker); null: <project_dir>/.venv/bin/kafka-index
    "summary_kafka_index": None,
    # [run time] delta-rs storage options passed to every kafka-index (not secrets: they would be in the task
    # logs; keep keys in the hosts' environment, AWS_* variables, or an instance role)
    "audit_storage_options": {},
    # [run time] the run fails when any broker has findings (a broker whose run failed or left no rows: always)
    "fail_on_findings": True,
    # [run time] extra arguments of every broker's kafka-index verify, e.g. ["--jobs", "4"]
    "extra_args": [],
    # [parse time] a broker's task is stopped after this many minutes (the others go on)
    "timeout_minutes": 120,
    # [parse time] brokers verified at once in one run
    "max_parallel": 16,
    # [parse time] the kubernetes runner's pod (runner: kubernetes)
    "kubernetes": {
        "namespace": "kafka",
        "image": "kafka-index-rebuild:latest",
        "service_account": None,
        "kafka_index": "kafka-index",  # in the image
        # the broker's data on its node: a hostPath (one dir per broker node) or a PVC per broker ({broker_id})
        "host_path": None,
        "pvc": "data-kafka-{broker_id}",
        "mount_path": "/var/lib/kafka/data",
        "node_label": "kubernetes.io/hostname",
    },
    # [run time] the rolling repair (kafka_index_rolling_repair): commands on the broker host ({broker_id},
    # {host} filled in), and a command on the Airflow worker whose exit 0 means: no under-replicated partitions
    "stop_command": "sudo systemctl stop kafka",
    "start_command": "sudo systemctl start kafka",
    "healthy_command": "kafka-topics.sh --bootstrap-server {host}:9092 --describe --under-replicated-partitions "
    "| grep -q . && exit 1 || exit 0",
    "healthy_timeout_minutes": 30,
    "healthy_poll_seconds": 10,
}
RUN_TIME = (
    "inventory",
    "engine",
    "kafka_index",
    "summary_kafka_index",
    "audit_storage_options",
    "fail_on_findings",
    "extra_args",
    "stop_command",
    "start_command",
    "healthy_command",
    "healthy_timeout_minutes",
    "healthy_poll_seconds",
)
BROKER_KEYS = {"id", "host", "log_dirs", "server_properties", "ssh_conn_id", "node"}


def fleet_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The ``fleet`` settings: :data:`FLEET_DEFAULTS` < the ``fleet`` key of the merged DAG settings; unknown keys
    and bad values are one ``ValueError`` line each."""
    given = settings.get("fleet") or {}
    if not isinstance(given, dict):
        raise ValueError(f"fleet settings: a mapping is needed, got {given!r}")
    unknown = sorted(set(given) - set(FLEET_DEFAULTS))
    if unknown:
        raise ValueError(f"fleet settings: unknown keys {unknown}")
    fleet = {**FLEET_DEFAULTS, **given}
    fleet["kubernetes"] = {**FLEET_DEFAULTS["kubernetes"], **(given.get("kubernetes") or {})}
    if fleet["runner"] not in RUNNERS:
        raise ValueError(f"fleet settings: runner must be one of {RUNNERS}, got {fleet['runner']!r}")
    if fleet["engine"] not in ENGINES:
        raise ValueError(f"fleet settings: engine must be one of {ENGINES}, got {fleet['engine']!r}")
    if not fleet["summary_kafka_index"]:
        fleet["summary_kafka_index"] = os.path.join(settings["project_dir"], ".venv", "bin", "kafka-index")
    return fleet


# ----------------------------------------------------------------------------------------- inventory
#: a broker's node.id is a Java int
MAX_BROKER_ID = 2**31 - 1


def _short(value: Any) -> str:
    """``repr(value)``, cut to 80 characters: an error line stays one line however big the value."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_inventory(text: str, source: str) -> list[dict[str, Any]]:
    """The brokers of an inventory (YAML or JSON text): ``brokers:`` (or a bare list) of mappings with ``id``
    (the broker's node.id), ``host``, ``log_dirs`` (list) and/or ``server_properties`` (its path on the host),
    optionally ``ssh_conn_id`` and ``node`` (the Kubernetes node; default: host). Every bad entry is one line of
    the ``ValueError``, which names ``source`` and the entry."""
    import yaml

    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ValueError(f"{source}: YAML aliases (*name) are not taken in an inventory; write each broker out")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(data, dict) and "brokers" in data:
        if set(data) != {"brokers"}:
            raise ValueError(
                f"{source}: unknown top-level keys {sorted(map(str, set(data) - {'brokers'}))} beside brokers"
            )
        data = data["brokers"]
    if not isinstance(data, list) or not data:
        raise ValueError(f"{source}: a list of brokers is needed (brokers: [...]), got {type(data).__name__}")
    errors: list[str] = []
    brokers: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    for n, entry in enumerate(data, 1):
        where = f"{source}: broker #{n}"
        if not isinstance(entry, dict):
            errors.append(f"{where}: a mapping is needed, got {_short(entry)}")
            continue
        if isinstance(entry.get("id"), int) and not isinstance(entry.get("id"), bool):
            where += f" (id {entry['id']})"
        problems = []
        unknown = sorted(set(entry) - BROKER_KEYS)
        if unknown:
            problems.append(f"unknown keys {unknown} (known: {sorted(BROKER_KEYS)})")
        broker_id = entry.get("id")
        if not isinstance(broker_id, int) or isinstance(broker_id, bool) or not 0 <= broker_id <= MAX_BROKER_ID:
            problems.append(f"id must be a broker id (an integer from 0 to {MAX_BROKER_ID}), got {_short(broker_id)}")
        elif broker_id in seen:
            problems.append(f"id {broker_id} repeats broker #{seen[broker_id]}")
        else:
            seen[broker_id] = n
        host = entry.get("host")
        if not isinstance(host, str) or not re.fullmatch(r"[A-Za-z0-9_.:\-\[\]]+", host):
            problems.append(f"host must be a host name or address, got {_short(host)}")
        log_dirs = entry.get("log_dirs")
        if isinstance(log_dirs, str):
            log_dirs = [d for d in log_dirs.split(",") if d]
        if log_dirs is not None and (
            not isinstance(log_dirs, list) or not all(isinstance(d, str) and d.startswith("/") for d in log_dirs)
        ):
            problems.append(f"log_dirs must be a list of absolute paths, got {_short(entry.get('log_dirs'))}")
        properties = entry.get("server_properties")
        if properties is not None and not (isinstance(properties, str) and properties.startswith("/")):
            problems.append(f"server_properties must be an absolute path, got {_short(properties)}")
        if not log_dirs and not properties:
            problems.append("give log_dirs or server_properties (where the broker's data is on its host)")
        for key in ("ssh_conn_id", "node"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                problems.append(f"{key} must be a string, got {_short(entry[key])}")
        if problems:
            errors.append(f"{where}: {'; '.join(problems)}")
            continue
        brokers.append(
            {
                "id": broker_id,
                "host": host,
                "log_dirs": list(log_dirs or []),
                "server_properties": properties,
                "ssh_conn_id": entry.get("ssh_conn_id"),
                "node": entry.get("node") or host,
            }
        )
    if errors:
        raise ValueError("\n".join(errors))
    return brokers


def load_inventory(fleet: dict[str, Any], variable_json: str | None) -> list[dict[str, Any]]:
    """The brokers from ``fleet.inventory`` (a YAML file), else from the Variable's JSON."""
    if fleet["inventory"]:
        path = str(fleet["inventory"])
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ValueError(f"{path}: the fleet inventory cannot be read: {exc.strerror}") from None
        return parse_inventory(text, path)
    if not variable_json:
        raise ValueError(
            f"no fleet inventory: set fleet.inventory (a YAML file) in conf/airflow.yaml or the Variable "
            f"kafka_index_rebuild, or the Airflow Variable {INVENTORY_VARIABLE} (JSON)"
        )
    return parse_inventory(variable_json, f"Airflow Variable {INVENTORY_VARIABLE}")


# ------------------------------------------------------------------------------------ commands
def storage_option_args(fleet: dict[str, Any]) -> list[str]:
    return [
        a
        for k, v in sorted((fleet["audit_storage_options"] or {}).items())
        for a in ("--audit-storage-option", f"{k}={v}")
    ]


def kafka_index_args(
    fleet: dict[str, Any],
    broker: dict[str, Any],
    *,
    mode: str,
    run_id: str,
    audit_table: str | None,
    dry_run: bool = False,
    backup_dir: str | None = None,
    kafka_index: str | None = None,
    sync: str = "auto",
) -> list[str]:
    """``kafka-index MODE`` on a broker's host: its log dirs (or server.properties), ``--broker-id`` (a
    meta.properties that names another broker refuses the run: the runner reached the wrong disk), the shared
    run id and audit table, the engine; findings exit 0 (the summary judges them from the table). ``sync``: how a
    writing mode makes its files durable (``auto``, the job's default, is not passed; verify writes nothing), checked
    where it comes from (the settings, the form's enum) and by the job's own parser."""
    args = [*shlex.split(kafka_index or fleet["kafka_index"]), mode]
    if broker.get("server_properties"):
        args += ["--server-properties", broker["server_properties"]]
    for d in broker.get("log_dirs") or []:
        args += ["--log-dir", d]
    args += ["--broker-id", str(broker["id"]), "--run-id", run_id, "--engine", fleet["engine"], "--no-progress"]
    if audit_table:
        args += ["--audit-table", audit_table, *storage_option_args(fleet)]
    if mode != "verify" and backup_dir:
        args += ["--backup-dir", backup_dir]
    if mode != "verify" and dry_run:
        args.append("--dry-run")
    if mode != "verify" and sync != "auto":
        args += ["--sync", sync]
    if mode == "verify" or dry_run:  # a repair that writes and leaves findings fails
        args.append("--exit-zero-on-findings")
    return args + [str(a) for a in fleet["extra_args"] or []]


def broker_task_kwargs(fleet: dict[str, Any], broker: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """One broker's keyword arguments for the mapped operator of the runner (``expand_kwargs``)."""
    if fleet["runner"] == "ssh":
        return {
            "remote_host": broker["host"],
            "ssh_conn_id": broker.get("ssh_conn_id") or fleet["ssh_conn_id"],
            "command": shlex.join(command),
        }
    if fleet["runner"] == "local":
        return {"bash_command": shlex.join(command)}
    return {"name": f"kafka-index-broker-{broker['id']}", "pod_template_dict": broker_pod(fleet, broker, command)}


def broker_pod(fleet: dict[str, Any], broker: dict[str, Any], command: list[str]) -> dict[str, Any]:
    """The Kubernetes pod (a V1Pod as a dict) that runs ``command`` beside a broker: on the broker's node (a
    required node affinity on ``node_label`` = the broker's node), its data mounted read-only at the path
    the broker uses (a hostPath, or the broker's PVC)."""
    k = fleet["kubernetes"]
    mount = k["mount_path"]
    if k["host_path"]:
        source: dict[str, Any] = {"hostPath": {"path": k["host_path"], "type": "Directory"}}
    else:
        source = {"persistentVolumeClaim": {"claimName": k["pvc"].format(broker_id=broker["id"]), "readOnly": True}}
    kafka_index = shlex.split(k["kafka_index"])
    args = command[command.index("verify") :] if "verify" in command else command
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": k["node_label"], "operator": "In", "values": [broker["node"]]}]}
                    ]
                }
            }
        },
        "containers": [
            {
                "name": "base",
                "image": k["image"],
                "command": kafka_index,
                "args": args,
                "volumeMounts": [{"name": "kafka-data", "mountPath": mount, "readOnly": True}],
            }
        ],
        "volumes": [{"name": "kafka-data", **source}],
    }
    if k["service_account"]:
        spec["serviceAccountName"] = k["service_account"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": k["namespace"],
            "labels": {"app": "kafka-index", "kafka-broker-id": str(broker["id"])},
        },
        "spec": spec,
    }


def fill(command: str, broker: dict[str, Any]) -> str:
    """A rolling-repair command with ``{broker_id}`` and ``{host}`` filled in (quoted for a shell)."""
    return command.replace("{broker_id}", str(broker["id"])).replace("{host}", shlex.quote(broker["host"]))


# ------------------------------------------------------------------------------------- summary
def judge(
    brokers: list[dict[str, Any]], records: list[dict[str, Any]], fail_on_findings: bool
) -> tuple[list[str], list[str]]:
    """The summary of a fleet run from the table's records (``kafka-index audit --run ID --json``): lines to
    print (one per broker of the inventory: segments checked, with findings, findings by kind, exit code; a
    partition's or log dir's finding kind counted once, named without a count) and
    the problems that fail the run: a broker with no rows (unreachable, or its run failed before it wrote
    any), a broker whose run failed (exit code > 1), findings (when ``fail_on_findings``)."""
    by_broker: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("broker_id") is not None:
            by_broker.setdefault(int(r["broker_id"]), []).append(r)
    lines = [f"{'broker':>6}  {'host':<20} {'segments':>8} {'findings':>8}  {'exit':>4}  kinds"]
    problems: list[str] = []
    missing, failed, with_findings = [], [], []
    for b in brokers:
        rows = by_broker.get(b["id"], [])
        if not rows:
            lines.append(
                f"{b['id']:>6}  {b['host']:<20} {'-':>8} {'-':>8}  {'-':>4}  NO ROWS: unreachable, or its run failed"
            )
            missing.append(b)
            continue
        segments = sum(int(r.get("segments") or 0) for r in rows)
        codes = sorted({r.get("exit_code") for r in rows}, key=lambda c: -1 if c is None else c)
        kinds: dict[str, int] = {}  # segment findings: kind -> segments
        for r in rows:
            for kind, n in (r.get("findings") or {}).items():
                kinds[kind] = kinds.get(kind, 0) + int(n)
        # the run row's kinds also hold what no segment row does: a partition's (a snapshot, the leader epochs) and
        # a log dir's (its checkpoints, a dir that is not a partition), counted once each
        beyond = sorted({k for r in rows for k in (r.get("finding_kinds") or [])} - set(kinds))
        found = sum(int(r.get("with_findings") or 0) for r in rows) + len(beyond)
        text = ", ".join([*(f"{k} {n}" for k, n in sorted(kinds.items())), *beyond]) or "-"
        code = ",".join("?" if c is None else str(c) for c in codes)
        lines.append(f"{b['id']:>6}  {b['host']:<20} {segments:>8} {found:>8}  {code:>4}  {text}")
        if any(c is not None and c > 1 for c in codes) or any(r.get("status") == "failed" for r in rows):
            failed.append(f"broker {b['id']} (exit {code})")
        if found:
            with_findings.append(f"broker {b['id']} ({text})")
    extra = sorted(set(by_broker) - {b["id"] for b in brokers})
    if extra:
        lines.append(f"rows of brokers not in the inventory: {', '.join(map(str, extra))}")
    if missing:
        problems.append(
            "no rows from "
            + ", ".join(f"broker {b['id']} ({b['host']})" for b in missing)
            + ": unreachable, or its run failed before writing (see its task's log)"
        )
    if failed:
        problems.append("the run failed on " + ", ".join(failed))
    if with_findings and fail_on_findings:
        problems.append("findings on " + "; ".join(with_findings))
    return lines, problems


def parse_summary(stdout: str) -> list[dict[str, Any]]:
    """The records ``kafka-index audit --run ID --json`` printed (one JSON document)."""
    value = json.loads(stdout)
    if not isinstance(value, list):
        raise ValueError(f"kafka-index audit --run --json: a list is needed, got {type(value).__name__}")
    return value
