"""A seccomp filter for bubblewrap sandboxes: the dangerous system calls fail.

bubblewrap loads a classic-BPF program given as ``--seccomp FD`` just before it runs the command.
The program is small and fixed, so it is assembled here (no libseccomp binding needed): check the
architecture (a call made through another ABI, such as i386 ``int 0x80`` or x32 on x86-64, is
refused outright, since its numbers differ), then compare the call number with each listed one.

Refused with EPERM: mounting and the new mount API, ``pivot_root``, swap, reboot, ``acct``, kernel
modules, ``kexec``, keyrings, ``ptrace`` and cross-process memory access, ``bpf``,
``perf_event_open``, ``userfaultfd``, ``setns``, ``open_by_handle_at``, ``syslog``,
``lookup_dcookie``, ``quotactl``, io_uring (its calls bypass per-call filtering, and it has been a
steady source of kernel bugs) and (x86-64) ``iopl``/``ioperm``. Most of these already fail without
capabilities; the filter removes the kernel code paths behind them as a target, and stops the ones
a user namespace would allow.

Refused with EPERM *by argument* (seccomp sees a call's arguments as plain integers):

- a mode carrying S_ISUID or S_ISGID, in ``chmod``/``fchmod``/``fchmodat``/``fchmodat2``,
  ``open``/``openat``/``creat`` (a file created with those bits keeps them: the umask does not
  strip them) and ``mknod``/``mknodat`` (which make regular files too). No file a command leaves
  behind can be setuid or setgid, whoever owns it on the host: ``chmod 4755``, ``install -m 4755``,
  ``cp -p`` or ``tar -p`` of a setuid file all fail on that bit (``mkdir`` drops both bits itself);
- ``clone``/``unshare`` asking for a new user namespace (bubblewrap's ``--disable-userns`` needs a
  user namespace of its own, which a root server's sandbox does not have; see confine.py).

Refused with ENOSYS, so that callers fall back to the calls checked above: ``clone3`` and
``openat2``, whose flags and mode sit in a struct in memory that seccomp cannot read (glibc falls
back to ``clone``; ``openat2`` users to ``openat``).

Call numbers are from the kernel's ``asm/unistd_64.h`` (x86-64) and ``asm-generic/unistd.h``
(aarch64); on other architectures no filter is built and ``program()`` returns None.
"""

from __future__ import annotations

import errno
import platform
import struct

# Calls refused outright, per architecture.
_X86_64 = {
    "mount": 165, "umount2": 166, "pivot_root": 155, "swapon": 167, "swapoff": 168, "reboot": 169,
    "acct": 163, "init_module": 175, "finit_module": 313, "delete_module": 176, "iopl": 172, "ioperm": 173,
    "quotactl": 179, "kexec_load": 246, "kexec_file_load": 320, "add_key": 248, "request_key": 249,
    "keyctl": 250, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "setns": 308, "open_by_handle_at": 304, "syslog": 103,
    "lookup_dcookie": 212, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
}  # fmt: skip
_AARCH64 = {
    "mount": 40, "umount2": 39, "pivot_root": 41, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "quotactl": 60, "kexec_load": 104,
    "kexec_file_load": 294, "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280, "perf_event_open": 241,
    "userfaultfd": 282, "setns": 268, "open_by_handle_at": 265, "syslog": 116, "lookup_dcookie": 18,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
}  # fmt: skip

SETID_BITS = 0o6000  # S_ISUID | S_ISGID
CLONE_NEWUSER = 0x10000000

# Calls refused when one argument (by index) has any of the given bits: name -> (arg, bits).
_X86_64_ARGS = {
    "chmod": (90, 1, SETID_BITS), "fchmod": (91, 1, SETID_BITS), "fchmodat": (268, 2, SETID_BITS),
    "fchmodat2": (452, 2, SETID_BITS), "open": (2, 2, SETID_BITS), "openat": (257, 3, SETID_BITS),
    "creat": (85, 1, SETID_BITS), "mknod": (133, 1, SETID_BITS), "mknodat": (259, 2, SETID_BITS),
    "clone": (56, 0, CLONE_NEWUSER), "unshare": (272, 0, CLONE_NEWUSER),
}  # fmt: skip
_AARCH64_ARGS = {
    "fchmod": (52, 1, SETID_BITS), "fchmodat": (53, 2, SETID_BITS), "fchmodat2": (452, 2, SETID_BITS),
    "openat": (56, 3, SETID_BITS), "mknodat": (33, 2, SETID_BITS),
    "clone": (220, 0, CLONE_NEWUSER), "unshare": (97, 0, CLONE_NEWUSER),
}  # fmt: skip
_NOT_THERE = {"clone3": 435, "openat2": 437}  # the same numbers on both: refused with ENOSYS

# machine -> (AUDIT_ARCH_* value, refused calls, calls checked by argument, first number of a
# foreign ABI sharing the arch value)
_ARCHES = {
    "x86_64": (0xC000003E, _X86_64, _X86_64_ARGS, 0x40000000),
    "aarch64": (0xC00000B7, _AARCH64, _AARCH64_ARGS, None),
}

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]. Both
# architectures are little-endian: an argument's low 32 bits (all a mode or a clone flag needs) come first.
_NR_OFFSET, _ARCH_OFFSET, _ARGS_OFFSET = 0, 4, 16


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter as bytes for ``bwrap --seccomp``, or None on an architecture without a table.

    Layout (classic BPF jumps only forward, by at most 255): the arch check, one comparison per
    listed call, ``allow``, ``EPERM``, ``ENOSYS``, then one four-instruction block per call checked
    by argument (load the argument, test the bits, allow, EPERM)."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, numbers, by_arg, foreign_from = arch
    calls = sorted(set(numbers.values()))
    checked = sorted(by_arg.values())
    absent = sorted(_NOT_THERE.values())
    compares = len(calls) + len(absent) + len(checked)
    allow = 4 + compares  # index of the "return allow" after the comparisons
    deny, enosys, blocks = allow + 1, allow + 2, allow + 3
    body = [
        _insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        _insn(_JEQ_K, 0, deny - 2, audit_arch),
        _insn(_LD_W_ABS, 0, 0, _NR_OFFSET),
        # x32 calls on x86-64 carry the arch value of x86-64 with bit 30 set; aarch64 has none.
        _insn(_JGE_K, deny - 4, 0, foreign_from) if foreign_from else _insn(_JEQ_K, 0, 0, 0xFFFFFFFF),
    ]
    targets = [(nr, deny) for nr in calls] + [(nr, enosys) for nr in absent]
    targets += [(nr, blocks + 4 * i) for i, (nr, _arg, _bits) in enumerate(checked)]
    for nr, target in targets:
        here = len(body)
        body.append(_insn(_JEQ_K, target - here - 1, 0, nr))
    body.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    body.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    body.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))
    for _nr, arg, bits in checked:
        body.append(_insn(_LD_W_ABS, 0, 0, _ARGS_OFFSET + 8 * arg))
        body.append(_insn(_JSET_K, 1, 0, bits))
        body.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
        body.append(_insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    return b"".join(body)
