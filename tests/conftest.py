"""Shared test helpers: where the real-Kafka fixtures are, and a skip when they are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
KAFKA_REAL = PROJECT_ROOT.parent / "shared" / "fixtures" / "kafka-real"

requires_kafka_real = pytest.mark.skipif(
    not KAFKA_REAL.is_dir(),
    reason=f"real Kafka fixtures not found at {KAFKA_REAL} (../shared is absent beside the checkout)",
)
