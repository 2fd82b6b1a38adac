"""What the Spark driver adds to the engine: how tasks are cut and balanced (the job itself runs in
every Spark test)."""

from __future__ import annotations

import pytest

from jobs.config import ConfigError, load_config_file
from jobs.pipeline import balance_by_bytes, task_count


def test_byte_balancing():
    bins = balance_by_bytes(list("abcdef"), [100, 90, 10, 10, 10, 80], 3)
    totals = sorted(sum({"a": 100, "b": 90, "c": 10, "d": 10, "e": 10, "f": 80}[x] for x in b) for b in bins)
    assert max(totals) - min(totals) <= 20
    assert len(bins) == 3 and sorted(x for b in bins for x in b) == list("abcdef")


def test_task_count_is_one_per_bytes_per_task_and_at_least_one_per_slot(tmp_path):
    gib = 1 << 30
    assert task_count(2 * gib, 2, gib) == 2  # the benchmark's 2 GiB on two cores: one wave
    assert task_count(2 * gib, 8, gib) == 8  # every slot busy even when the data is small
    assert task_count(10 * gib + 1, 2, gib) == 11
    assert task_count(0, 0, gib) == 1
    assert load_config_file()["bytes_per_task"] == gib
    config = tmp_path / "c.yaml"
    config.write_text("bytes_per_task: 0\n")
    with pytest.raises(ConfigError, match="bytes_per_task must be >= 1"):
        load_config_file(str(config))
