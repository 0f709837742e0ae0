"""A seccomp filter for bubblewrap sandboxes: the dangerous system calls fail with EPERM.

bubblewrap loads a classic-BPF program given as ``--seccomp FD`` just before it runs the command.
The program is small and fixed, so it is assembled here (no libseccomp binding needed): check the
architecture (a call made through another ABI, such as i386 ``int 0x80`` or x32 on x86-64, is
refused outright, since its numbers differ), then compare the call number with each blocked one.

Blocked: mounting and the new mount API, ``pivot_root``, swap, reboot, ``acct``, kernel modules,
``kexec``, keyrings, ``ptrace`` and cross-process memory access, ``bpf``, ``perf_event_open``,
``userfaultfd``, ``setns``, ``open_by_handle_at``, ``syslog``, ``lookup_dcookie``, ``quotactl`` and
(x86-64) ``iopl``/``ioperm``. Most of these already fail without capabilities; the filter removes
the kernel code paths behind them as a target, and stops the ones a user namespace would allow.
Call numbers are from the kernel's ``asm/unistd_64.h`` (x86-64) and ``asm-generic/unistd.h``
(aarch64); on other architectures no filter is built and ``program()`` returns None.
"""

from __future__ import annotations

import errno
import platform
import struct

# The blocked calls and their numbers, per architecture.
_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "swapon": 167, "swapoff": 168, "reboot": 169,
    "acct": 163, "init_module": 175, "finit_module": 313, "delete_module": 176, "iopl": 172, "ioperm": 173,
    "quotactl": 179, "kexec_load": 246, "kexec_file_load": 320, "add_key": 248, "request_key": 249,
    "keyctl": 250, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "setns": 308, "open_by_handle_at": 304, "syslog": 103,
    "lookup_dcookie": 212, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}  # fmt: skip
_AARCH64 = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "quotactl": 60, "kexec_load": 104,
    "kexec_file_load": 294, "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280, "perf_event_open": 241,
    "userfaultfd": 282, "setns": 268, "open_by_handle_at": 265, "syslog": 116, "lookup_dcookie": 18,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
}  # fmt: skip
# machine -> (AUDIT_ARCH_* value, call numbers, first number of a foreign ABI sharing the arch value)
_ARCHES = {"x86_64": (0xC000003E, _X86_64, 0x40000000), "aarch64": (0xC00000B7, _AARCH64, None)}

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data: int nr; __u32 arch; ...


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter as bytes for ``bwrap --seccomp``, or None on an architecture without a table."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, numbers, foreign_from = arch
    calls = sorted(set(numbers.values()))
    deny = 4 + len(calls) + 1  # index of the final "return EPERM"
    body = [
        _insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        _insn(_JEQ_K, 0, deny - 2, audit_arch),
        _insn(_LD_W_ABS, 0, 0, _NR_OFFSET),
        # x32 calls on x86-64 carry the arch value of x86-64 with bit 30 set; aarch64 has none.
        _insn(_JGE_K, deny - 4, 0, foreign_from) if foreign_from else _insn(_JEQ_K, 0, 0, 0xFFFFFFFF),
    ]
    for index, nr in enumerate(calls):
        body.append(_insn(_JEQ_K, deny - (4 + index + 1), 0, nr))
    body.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    body.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    return b"".join(body)
