"""The front ends: ``python -m indexlib`` (``main``), its reports (``report``), the options both command lines
declare (``options``), and the tools that read one file (``dump``, ``segment_lookup``).

Imports anything of indexlib."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dump import DumpUsageError, run_dump_command, write_dump
    from .main import main
    from .options import (
        add_broker_id,
        add_dump_command,
        add_index_settings,
        add_jobs,
        add_json_report,
        add_lookup_command,
        add_not_yet_tiered,
        add_rebuild_remote_command,
        add_remote_index_cache_command,
        add_remote_inventory_command,
        add_run_id,
        add_selection,
        add_settings_files,
        add_storage_options,
        add_verbosity,
        add_verify_remote_command,
        add_write_options,
        report_level,
    )
    from .remote_index_cache import run_remote_index_cache_command
    from .remote_inventory import run_remote_inventory_command
    from .report import (
        JsonTargetError,
        check_json_target,
        format_table,
        keep_output_in_order,
        print_report,
        write_json,
    )
    from .run_planning import check_planned_run, key_values, run_options, select_not_yet_tiered, store_spec
    from .segment_lookup import LookupTargetError, check_target, lookup, print_lookup
    from .settings_files import (
        ClusterSettings,
        SettingsFileError,
        TopicSettings,
        load_cluster_settings,
        metadata_log_dir,
        read_mapping,
        read_server_properties,
        read_topic_config,
        settings_to_dict,
    )
    from .verify_remote import (
        plan_remote_tasks,
        report_rebuild_remote,
        report_verify_remote,
        run_rebuild_remote_command,
        run_verify_remote_command,
    )

#: the public names and their modules, imported on first use (``python -m indexlib rebuild`` never loads ``dump``)
_PUBLIC = {
    "main": "main",
    "run_options": "run_planning",
    "check_planned_run": "run_planning",
    "store_spec": "run_planning",
    "key_values": "run_planning",
    "add_storage_options": "options",
    "SettingsFileError": "settings_files",
    "ClusterSettings": "settings_files",
    "load_cluster_settings": "settings_files",
    "metadata_log_dir": "settings_files",
    "settings_to_dict": "settings_files",
    "TopicSettings": "settings_files",
    "read_mapping": "settings_files",
    "read_server_properties": "settings_files",
    "read_topic_config": "settings_files",
    "add_broker_id": "options",
    "add_settings_files": "options",
    "report_level": "options",
    "add_verbosity": "options",
    "add_selection": "options",
    "add_dump_command": "options",
    "add_index_settings": "options",
    "add_jobs": "options",
    "add_json_report": "options",
    "add_lookup_command": "options",
    "add_remote_inventory_command": "options",
    "run_remote_inventory_command": "remote_inventory",
    "add_verify_remote_command": "options",
    "run_verify_remote_command": "verify_remote",
    "add_rebuild_remote_command": "options",
    "run_rebuild_remote_command": "verify_remote",
    "plan_remote_tasks": "verify_remote",
    "report_verify_remote": "verify_remote",
    "report_rebuild_remote": "verify_remote",
    "add_remote_index_cache_command": "options",
    "add_not_yet_tiered": "options",
    "select_not_yet_tiered": "run_planning",
    "run_remote_index_cache_command": "remote_index_cache",
    "add_run_id": "options",
    "add_write_options": "options",
    "write_dump": "dump",
    "run_dump_command": "dump",
    "DumpUsageError": "dump",
    "LookupTargetError": "segment_lookup",
    "check_target": "segment_lookup",
    "lookup": "segment_lookup",
    "print_lookup": "segment_lookup",
    "JsonTargetError": "report",
    "check_json_target": "report",
    "format_table": "report",
    "keep_output_in_order": "report",
    "print_report": "report",
    "write_json": "report",
}
__all__ = [
    "add_storage_options",
    "add_remote_inventory_command",
    "run_remote_inventory_command",
    "add_verify_remote_command",
    "run_verify_remote_command",
    "add_rebuild_remote_command",
    "run_rebuild_remote_command",
    "plan_remote_tasks",
    "report_verify_remote",
    "report_rebuild_remote",
    "add_remote_index_cache_command",
    "run_remote_index_cache_command",
    "add_not_yet_tiered",
    "select_not_yet_tiered",
    "key_values",
    "store_spec",
    "check_planned_run",
    "run_options",
    "add_settings_files",
    "ClusterSettings",
    "load_cluster_settings",
    "metadata_log_dir",
    "settings_to_dict",
    "SettingsFileError",
    "TopicSettings",
    "read_mapping",
    "read_server_properties",
    "read_topic_config",
    "report_level",
    "add_verbosity",
    "add_selection",
    "JsonTargetError",
    "LookupTargetError",
    "add_broker_id",
    "add_dump_command",
    "add_index_settings",
    "add_jobs",
    "add_json_report",
    "add_lookup_command",
    "add_run_id",
    "add_write_options",
    "check_json_target",
    "check_target",
    "format_table",
    "keep_output_in_order",
    "lookup",
    "main",
    "print_lookup",
    "print_report",
    "write_dump",
    "write_json",
    "run_dump_command",
    "DumpUsageError",
]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
