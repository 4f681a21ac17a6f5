"""The unshare box's pid 1: lay out the mounts, then run the command as the box's user.

Run by `unshare` inside fresh namespaces as `python -I -S box_init.py SPEC -- COMMAND...`
(SPEC: the plan, a marshalled dict, in hex; see plan.py). Standard library only: nothing of
mulligan is imported here. In order:
  1. the host's mounts, made private, are all made read-only (one recursive
     `mount_setattr`; on kernels before 5.12, a read-only remount of each mount);
  2. a /dev of its own (null, zero, full, random, urandom, tty; a fresh /dev/shm);
  3. fresh tmpfs mounts on /tmp, /var/tmp and the user's home; into the home, the
     toolchain bound read-only; the scratch directory bound writable, the working
     directory writable or not; the hidden paths covered;
  4. the loopback brought up (the network namespace has nothing else);
  5. a child that drops to the box's user (as root: its own uid; as a user: a nested user
     namespace, so it holds no capability over these mounts), starts a session of its own
     and runs the command, while this process reaps orphans and, when the child ends,
     exits with its status (128 + signal when killed), which kills every descendant.
Any failure is one line on stderr and exit status 125.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import marshal
import os
import signal
import struct
import sys
from typing import NoReturn

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
KEPT_FLAGS = {1024: 1024, 2048: 2048, 4096: 1 << 21, 2: 2, 4: 4, 8: 8}
"""statvfs flag -> mount flag a read-only remount must keep (noatime, nodiratime, relatime,
nosuid, nodev, noexec): dropping one is refused in a user namespace."""
SYS_MOUNT_SETATTR, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, 0x8000, 1
AT_FDCWD = -100
CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
NOBODY = 65534
WATCH_SECONDS = 0.02
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)
REMOUNT = False
"""Remount mount by mount, as on kernels before 5.12 (the spec's `remount`, for tests)."""


def fail(what: str) -> NoReturn:
    sys.stderr.write(f"mulligan box: {what}\n")
    sys.stderr.flush()
    os._exit(125)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    args = [s.encode() if s is not None else None for s in (source, target, fstype)]
    if libc.mount(*args, flags, data.encode() if data else None) != 0:
        fail(f"mount {target}: {os.strerror(ctypes.get_errno())}")


def set_readonly(path: str, readonly: bool, recursive: bool) -> None:
    setting, clearing = (MOUNT_ATTR_RDONLY, 0) if readonly else (0, MOUNT_ATTR_RDONLY)
    attr = struct.pack("QQQQ", setting, clearing, 0, 0)  # struct mount_attr
    flags = AT_RECURSIVE if recursive else 0
    if not REMOUNT:
        done = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), flags, attr, len(attr))
        if done == 0:
            return
        if ctypes.get_errno() != errno.ENOSYS:
            fail(f"read-only {path}: {os.strerror(ctypes.get_errno())}")
    for target in mount_points(path) if recursive else [path]:
        remount(target, readonly)


def mount_points(top: str) -> list[str]:
    with open("/proc/self/mountinfo") as info:
        points = [line.split()[4].encode().decode("unicode_escape") for line in info]
    return [point for point in points if point == top or point.startswith(top.rstrip("/") + "/")]


def remount(target: str, readonly: bool) -> None:
    try:
        kept = os.statvfs(target).f_flag
    except OSError:
        return  # covered by a later mount: not reachable, nothing to protect
    flags = MS_REMOUNT | MS_BIND | (MS_RDONLY if readonly else 0)
    flags |= sum(mount_flag for flag, mount_flag in KEPT_FLAGS.items() if kept & flag)
    mount(None, target, None, flags)


def bind(fd: int, target: str, writable: bool) -> None:
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    set_readonly(target, not writable, recursive=not writable)


def own_dev(devices: dict[str, int], size: int) -> None:
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name, fd in devices.items():
        os.close(os.open(f"/dev/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        bind(fd, f"/dev/{name}", writable=True)
    os.symlink("/proc/self/fd", "/dev/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"/dev/{name}")
    os.mkdir("/dev/shm")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={size}")
    set_readonly("/dev", True, recursive=False)


def loopback_up() -> None:
    af_inet, sock_dgram, siocgifflags, siocsifflags, iff_up = 2, 2, 0x8913, 0x8914, 0x1
    sock = libc.socket(af_inet, sock_dgram, 0)  # not the socket module: it costs a startup
    if sock < 0:
        fail(f"loopback: {os.strerror(ctypes.get_errno())}")
    try:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))
    except OSError as exc:
        fail(f"loopback: {exc.strerror}")
    finally:
        os.close(sock)


def open_path(path: str) -> int:
    try:
        return os.open(path, os.O_PATH)
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")


def lay_out(spec: dict) -> None:  # type: ignore[type-arg]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    sources = [*spec["toolchain"], spec["scratch"], spec["workdir"]]
    fds = {path: open_path(path) for path in dict.fromkeys(sources)}
    null = open_path("/dev/null")
    present = [name for name in DEVICES if os.path.exists(f"/dev/{name}")]
    devices = {name: open_path(f"/dev/{name}") for name in present}
    set_readonly("/", True, recursive=True)
    set_readonly("/proc", False, recursive=False)  # the box's own; its user namespace maps there
    own_dev(devices, spec["memory_bytes"])
    for kind, path in spec["fresh"]:
        if kind == "dir":  # a way through to a bind: passable whatever the umask
            os.makedirs(path, mode=0o755, exist_ok=True)
            os.chmod(path, 0o755)
            continue
        try:
            os.makedirs(path, mode=0o755, exist_ok=True)
        except OSError:
            continue  # not on this host (say, no /var/tmp): nothing to cover
        mount(
            "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={spec['memory_bytes']}"
        )
    for path in spec["toolchain"]:
        os.makedirs(path, exist_ok=True)
        bind(fds[path], path, writable=False)
    os.makedirs(spec["scratch"], exist_ok=True)
    bind(fds[spec["scratch"]], spec["scratch"], writable=True)
    if spec["workdir"] != spec["scratch"]:
        os.makedirs(spec["workdir"], exist_ok=True)
        bind(fds[spec["workdir"]], spec["workdir"], writable=spec["writable"])
    for path in spec["hide_dirs"]:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755,size=4k")
    for path in spec["hide_files"]:
        if os.path.lexists(path):
            bind(null, path, writable=False)
    for fd in [*fds.values(), null, *devices.values()]:
        os.close(fd)
    if not spec["network"]:
        loopback_up()


def become_the_user(spec: dict) -> None:  # type: ignore[type-arg]
    if spec["uid"] is not None:  # as root: a user id of the run's own; no capability left
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(spec["uid"])
        return
    uid, gid = spec["outer"]  # as a user: a nested namespace, where it is itself again
    if libc.unshare(CLONE_NEWUSER) != 0:
        fail(f"user namespace: {os.strerror(ctypes.get_errno())}")
    for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{gid} 0 1")):
        try:
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(line)
        except OSError as exc:
            fail(f"/proc/self/{name}: {exc.strerror}")


def main() -> None:
    global REMOUNT
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))  # marshal: json would double the startup
    REMOUNT = spec["remount"]
    command = sys.argv[3:]
    tree_bytes = spec["memory_bytes"] if spec["watch_tree"] else None
    lay_out(spec)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # the box cannot trace its init
    if tree_bytes is not None:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # waited for with a timeout
    child = os.fork()
    if child == 0:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            for number in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec keeps that
                signal.signal(number, signal.SIG_DFL)
            os.chdir(spec["workdir"])  # before the drop, as bubblewrap's --chdir: the run
            become_the_user(spec)  # starts there even where its user could not pass on the way
            os.setsid()
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
            sys.stderr.flush()
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # so the box cannot interrupt its init
    os._exit(wait_for(child, tree_bytes))


def wait_for(child: int, tree_bytes: int | None) -> int:
    """Reap every orphan until `child` ends: its status. With `tree_bytes` (where no cgroup
    caps the tree), the memory of every process in the box is watched, and past the limit
    the box ends: the exit of this process kills them all."""
    while True:
        if tree_bytes is not None:
            signal.sigtimedwait([signal.SIGCHLD], WATCH_SECONDS)
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if tree_bytes is None else os.WNOHANG)
            except ChildProcessError:
                return 125
            if pid == 0:
                break
            if pid == child:
                return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if tree_bytes is not None and tree_memory() > tree_bytes:
            sys.stderr.write(
                f"mulligan box: its processes together passed the memory limit "
                f"({tree_bytes >> 20} MB); every one killed\n"
            )
            sys.stderr.flush()
            return 128 + signal.SIGKILL


def tree_memory() -> int:
    """Bytes of memory every other process here holds (proportional share, and swap)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == "1":
            continue
        try:
            with open(f"/proc/{entry}/smaps_rollup", "rb") as rollup:
                for line in rollup.read().splitlines():
                    if line.startswith((b"Pss:", b"Swap:")):
                        total += int(line.split()[1]) << 10
        except (OSError, ValueError, IndexError):
            continue
    return total


if __name__ == "__main__":
    main()
