"""How many CPU cores this process may really use.

os.cpu_count() reports the host's cores; a container limited to 2 CPUs still sees them
all, and ONNX Runtime ignores cgroup quotas. The budget here is the smaller of the
CPU-affinity mask and the cgroup CPU quota (v2 `cpu.max` or v1 `cfs_quota_us`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_quota(root: Path) -> float | None:
    v2 = root / "cpu.max"
    if v2.is_file():
        quota, _, period = v2.read_text().strip().partition(" ")
        if quota != "max":
            return int(quota) / int(period or 100000)
        return None
    v1_quota, v1_period = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
    if v1_quota.is_file() and v1_period.is_file():
        quota = int(v1_quota.read_text())
        if quota > 0:
            return quota / int(v1_period.read_text())
    return None


def cpu_budget(cgroup_root: Path = CGROUP_ROOT) -> int:
    """Cores available to this process: min(affinity, ceil(cgroup quota)), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        quota = _cgroup_quota(cgroup_root)
    except (OSError, ValueError):
        quota = None
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)
