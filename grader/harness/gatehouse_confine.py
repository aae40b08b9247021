"""Gatehouse's confining launcher: starts a candidate's command so that it
cannot write the evidence packet code keeps.

    python3 -I /gatehouse/gatehouse_confine.py [--write DIR]... -- ARGV...

It runs from the grader's read-only tool folder (``/gatehouse``), applies a
Landlock ruleset to itself and then execs ARGV with the environment it was
given. The ruleset lets the command read and execute everywhere, write only
beneath ``/workspace``, ``/tmp`` and each ``--write DIR`` (and the character
devices of ``/dev``); with Landlock ABI 6 or later it also cannot signal
processes outside its domain (the packet's fake upstreams, the test runner)
nor reach their abstract unix sockets. Landlock is inherited and cannot be
lifted, so every child of the command is confined too, and a confined
process cannot ptrace or open ``/proc/<pid>/mem`` of an unconfined one.

``$GATEHOUSE_EVIDENCE`` (``/evidence``), where packet code writes the files
a manifest keeps, is never writable: a ``--write`` naming it, a folder
inside it or a folder holding it is refused (exit 125).

When the kernel has no Landlock the command runs unconfined after a line on
stderr; the grader reports that as a sandbox fallback for the whole grading
(``Features::landlock_abi``), so nothing kept from ``/evidence`` is silently
trusted. Standard library only.
"""

import ctypes
import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM
         | REFER | TRUNCATE)
DEFAULT_WRITABLE = ("/workspace", "/tmp")
EVIDENCE = os.environ.get("GATEHOUSE_EVIDENCE") or "/evidence"


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class ConfineError(Exception):
    pass


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi():
    """The kernel's Landlock ABI version, 0 when it has none."""
    try:
        libc = _libc()
    except OSError:
        return 0
    v = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(v))


def handled_fs(version):
    """Every filesystem right the ABI knows: anything not granted is denied."""
    rights = READ | WRITE | MAKE_CHAR | MAKE_BLOCK
    if version < 2:
        rights &= ~REFER
    if version < 3:
        rights &= ~TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def _overlaps(a, b):
    a, b = os.path.realpath(a).rstrip("/") + "/", os.path.realpath(b).rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def writable_dirs(extra):
    dirs = list(DEFAULT_WRITABLE) + list(extra)
    for d in dirs:
        if not os.path.isabs(d):
            raise ConfineError("--write %r: not an absolute path" % d)
        if _overlaps(d, EVIDENCE):
            raise ConfineError("--write %r would make %s writable to the candidate's processes" % (d, EVIDENCE))
    return dirs


def confine(extra_writable=()):
    """Applies the ruleset to this process (and so to everything it execs).
    Returns the ABI version used, 0 when the kernel has no Landlock."""
    dirs = writable_dirs(extra_writable)
    version = abi()
    if version == 0:
        return 0
    libc = _libc()
    fs_rights = handled_fs(version)
    attr = RulesetAttr(fs_rights, 0, (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if version >= 6 else 0)
    size = ctypes.sizeof(RulesetAttr) if version >= 6 else 8
    fd = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise ConfineError("landlock_create_ruleset: %s" % os.strerror(ctypes.get_errno()))
    try:
        rules = [("/", READ)] + [(d, READ | WRITE) for d in dirs]
        rules.append(("/dev", READ | WRITE_FILE | (IOCTL_DEV if version >= 5 else 0)))
        for path, rights in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = PathBeneathAttr(rights & fs_rights, pfd)
                rc = libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH),
                                  ctypes.byref(rule), ctypes.c_uint32(0))
                if rc != 0:
                    raise ConfineError("landlock_add_rule(%s): %s" % (path, os.strerror(ctypes.get_errno())))
            finally:
                os.close(pfd)
        if libc.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:
            raise ConfineError("prctl(PR_SET_NO_NEW_PRIVS): %s" % os.strerror(ctypes.get_errno()))
        if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise ConfineError("landlock_restrict_self: %s" % os.strerror(ctypes.get_errno()))
    finally:
        os.close(fd)
    return version


def main(argv):
    extra = []
    while argv and argv[0] == "--write":
        if len(argv) < 2:
            break
        extra.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: gatehouse_confine.py [--write DIR]... -- ARGV...\n")
        return 125
    command = argv[1:]
    try:
        if confine(extra) == 0:
            sys.stderr.write("gatehouse_confine: the kernel has no Landlock; %s runs unconfined\n" % command[0])
    except ConfineError as e:
        sys.stderr.write("gatehouse_confine: %s\n" % e)
        return 125
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write("gatehouse_confine: cannot run %s: %s\n" % (command[0], e))
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
