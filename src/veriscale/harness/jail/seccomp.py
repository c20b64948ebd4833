"""The jail's seccomp filter: system calls a verification session never needs fail with EPERM.

Built with libseccomp (through ``pyseccomp``) and handed to bubblewrap as a compiled BPF
program (``--seccomp FD``)::

    fd = filter_fd()            # a memfd holding the program; pass it to bwrap and close it after

Denied: mounting and namespaces (``mount``, ``umount2``, ``pivot_root``, ``unshare``,
``setns``, the new mount API, ``clone`` with any ``CLONE_NEW*`` flag; ``clone3`` answers ENOSYS
so C libraries fall back to ``clone``), tracing and reading other processes (``ptrace``,
``process_vm_readv/writev``, ``kcmp``), the kernel keyring, kernel modules and kexec,
``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``, clock and host settings, swap,
quotas, ``reboot``, ``syslog``, ``acct``, handle-based opens, and setting a set-user-ID or
set-group-ID bit with ``chmod``/``fchmod``/``fchmodat``.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

from veriscale.errors import UserError, setting

DENIED = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "keyctl", "add_key", "request_key",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "swapon", "swapoff", "quotactl", "reboot", "syslog", "acct", "lookup_dcookie",
    "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "vhangup", "nfsservctl",
    "uselib", "personality",
)
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NEW_BITS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)
SET_ID_BITS = (0o4000, 0o2000)
#: (syscall, index of its mode argument)
CHMOD_CALLS = (("chmod", 1), ("fchmod", 1), ("fchmodat", 2))


def _library():
    try:
        import pyseccomp
    except ImportError:  # pragma: no cover - a core dependency
        raise UserError("the jail's syscall filter needs the Python package pyseccomp: pip install pyseccomp") from None
    try:
        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    except (OSError, AttributeError, RuntimeError) as exc:
        raise UserError(f"the jail's syscall filter needs libseccomp ({exc}): install it "
                        f"(Debian/Ubuntu: apt-get install libseccomp2) or run with the jail off ({setting('no_jail')})") from None
    return pyseccomp


@functools.cache
def compiled_filter() -> bytes:
    """The BPF program (``struct sock_filter`` array) bubblewrap loads."""
    sc = _library()
    filt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            filt.add_rule(eperm, name)
        except (ValueError, OSError, RuntimeError):
            continue  # not a system call on this architecture
    for bit in CLONE_NEW_BITS:
        filt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, bit, bit))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for name, index in CHMOD_CALLS:
        for bit in SET_ID_BITS:
            filt.add_rule(eperm, name, sc.Arg(index, sc.MASKED_EQ, bit, bit))
    with tempfile.TemporaryFile() as handle:
        filt.export_bpf(handle)
        handle.seek(0)
        return handle.read()


def filter_fd() -> int:
    """A fresh memfd holding :func:`compiled_filter`, positioned at its start (caller closes it)."""
    fd = os.memfd_create("veriscale-seccomp", 0)
    os.write(fd, compiled_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
