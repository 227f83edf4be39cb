import os

from models.threads import cpu_budget


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


def test_cgroup_v2_quota_rounds_up_and_caps_affinity(tmp_path):
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert cpu_budget(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_budget(tmp_path) == min(2, _affinity())
    (tmp_path / "cpu.max").write_text("6400000 100000\n")
    assert cpu_budget(tmp_path) == _affinity()


def test_unlimited_or_missing_cgroup_means_affinity(tmp_path):
    assert cpu_budget(tmp_path) == _affinity()
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_budget(tmp_path) == _affinity()


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_budget(tmp_path) == 1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_budget(tmp_path) == _affinity()
