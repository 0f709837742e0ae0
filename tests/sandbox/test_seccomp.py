"""The seccomp program, run by a small classic-BPF interpreter on both architectures it supports.

The bubblewrap tests (test_privilege.py) load the filter for the machine they run on; this checks
the program of every architecture, jump by jump, including the one CI does not run on.
"""

from __future__ import annotations

import errno
import struct

import pytest

from runtime.sandbox import seccomp

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name -> number per architecture (None: the call does not exist there)
CALLS = {
    "getpid": (39, 172),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "open": (2, None),
    "openat": (257, 56),
    "mknodat": (259, 33),
    "clone": (56, 220),
    "unshare": (272, 97),
    "clone3": (435, 435),
    "openat2": (437, 437),
}


def run(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the filter returns for one call (struct seccomp_data: nr, arch, ip, args[6])."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld word at absolute offset
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_of_each_architecture(machine: str) -> None:
    program = seccomp.program(machine)
    assert program is not None
    arch, column = ARCH[machine], 0 if machine == "x86_64" else 1

    def call(name: str, *args: int) -> int:
        nr = CALLS[name][column]
        assert nr is not None
        return run(program, nr, arch, args)

    assert call("getpid") == ALLOW
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl"):
        assert call(name) == EPERM, name
    for name, mode_at in [("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2), ("openat", 3), ("mknodat", 2)]:
        args = [3, 0, 0, 0]
        for mode, expected in [(0o755, ALLOW), (0o4755, EPERM), (0o2755, EPERM), (0o100000 | 0o6644, EPERM)]:
            args[mode_at] = mode
            assert call(name, *args) == expected, (name, oct(mode))
    if machine == "x86_64":
        assert call("chmod", 0, 0o4755) == EPERM and call("chmod", 0, 0o1777) == ALLOW
        assert call("open", 0, 0o101, 0o4755) == EPERM and call("open", 0, 0o101, 0o644) == ALLOW
        assert run(program, 0x40000000 | 39, arch) == EPERM  # x32 getpid
    assert call("unshare", 0x10000000) == EPERM and call("unshare", 0x00020000) == ALLOW  # NEWUSER; NEWNS
    assert call("clone", 0x10000000 | 17) == EPERM and call("clone", 0x003D0F00) == ALLOW  # pthread flags
    assert call("clone3") == ENOSYS and call("openat2") == ENOSYS
    assert run(program, 39, 0x40000003) == EPERM  # i386 on x86-64, or any other ABI


def test_no_filter_without_a_table() -> None:
    assert seccomp.program("riscv64") is None
