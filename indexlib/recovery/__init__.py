"""What Kafka's recovery computes, as algorithms over what ``format`` decodes: the reduction of a ``.log`` to
what a rebuild needs (``log_scan``), the entries a rebuild writes (``entry_plan``), producer-state replay
(``producer_state``), verify's checks (``checks``; an index file's entry by entry in ``entry_checks``), the
findings they report (``findings``), and the settings both take (``settings``).

Imports ``format`` only."""

from .settings import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    INDEX_SETTINGS,
    IndexSettings,
    SettingError,
    check_index_setting,
)

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_SEGMENT_INDEX_BYTES",
    "INDEX_SETTINGS",
    "IndexSettings",
    "SettingError",
    "check_index_setting",
]
