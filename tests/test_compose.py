"""docker-compose.yml: every service that runs transqueue can read the bundle it is told to use.

The stack itself runs in deploy/compose-check.sh (opt-in: it needs Docker); this reads the file."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")  # PyYAML: with the [export] extra (transformers needs it)

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.yml"


def test_every_service_told_of_a_bundle_mounts_the_bundles():
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    told = {name: s for name, s in services.items() if "TRANSQUEUE_BUNDLE" in s.get("environment", {})}
    assert {"worker", "scheduler", "flower", "metrics"} <= set(told)
    for name, service in told.items():
        targets = [volume.removesuffix(":ro").rsplit(":", 1)[1] for volume in service.get("volumes", [])]
        assert "/bundles" in targets, name
