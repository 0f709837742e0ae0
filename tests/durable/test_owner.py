"""Telling an ended holder process from a live one (``runtime.durable.owner``), on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from runtime.durable.owner import Holder, host_identity, is_gone, this_process


def _started(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def test_this_process_is_alive_and_names_its_host() -> None:
    me = this_process()
    assert me is not None and me.pid == os.getpid() and me.host == host_identity()
    assert not is_gone(me.pid, me.started)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert me.host.startswith(f"{boot}/pid:[") and f"/uid{os.getuid()}@" in me.host


def test_an_exited_process_is_gone_and_a_reused_pid_is_not_mistaken_for_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _started(child.pid)
        assert not is_gone(child.pid, started)
        assert is_gone(child.pid, started + 1)  # same pid, another start time: another process
    finally:
        child.kill()
        child.wait()
    assert is_gone(child.pid, started)


def test_a_killed_process_not_yet_reaped_by_its_parent_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = _started(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    try:
        while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "Z":  # until it is a zombie
            os.sched_yield()
        assert is_gone(child.pid, started)  # a zombie runs no code: its runs may be taken over
    finally:
        child.wait()


def test_a_stat_line_is_read_after_the_command_name_whatever_it_holds(tmp_path: Path) -> None:
    fields = ["S", *["0"] * 18, "4242", "0"]  # state, ..., field 22: the start time
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "stat").write_text(f"77 (evil) 1 2 (x) {' '.join(fields)}\n")
    assert not is_gone(77, 4242, proc=tmp_path) and is_gone(77, 4243, proc=tmp_path)
    (tmp_path / "77" / "stat").write_text("77 (truncated")
    assert not is_gone(77, 4242, proc=tmp_path)  # unreadable: uncertain, so alive (the lease decides)
    assert is_gone(78, 1, proc=tmp_path)


def test_without_proc_a_process_has_no_holder(tmp_path: Path) -> None:
    assert host_identity(tmp_path) is None and this_process(tmp_path) is None
    assert Holder("h", 1, 2) == Holder("h", 1, 2)
