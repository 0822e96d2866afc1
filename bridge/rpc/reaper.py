"""The agent's keeper on Linux: starts the agent and, when it ends, ends what it left.

Run as a script (`python -I -S reaper.py BRIDGE_PID [FLAGS] EXECUTABLE ARGV0 ARGS...`), standing
between the bridge and one agent. pi runs each bash tool in a session of its own and
ends those only from its SIGTERM handler; on stdin EOF it exits and leaves them running
(docs/rpc.md, "Nothing the agent starts outlives it"). When the bridge is SIGKILLed
both happen at once, EOF first, so a tool's `sleep` could outlive the bridge. Here:

- this process is the *child subreaper* of everything the agent starts, so whatever the
  agent leaves behind becomes our child and is killed when the agent has exited;
- it asks the kernel for SIGUSR1 when the bridge dies, and then sends the agent SIGTERM
  (SIGKILL 2 s later if it is still there);
- a SIGTERM to the process group (the bridge's stepwise close) reaches the agent
  directly; here it only arms the same SIGKILL deadline;
- the agent gets SIGTERM if this process dies first;
- the exit status is the agent's (a signal death is repeated on ourselves);
- with `--no-caps` (an agent started without the sandbox, which drops them itself) the
  agent starts with no_new_privs and an empty capability bounding set, so an agent of
  a root bridge gets no capability on exec: without CAP_SYS_PTRACE it cannot read the
  non-dumpable bridge's `/proc/<pid>/environ` (docs/security.md);
- with `--stdio-fds` (an agent in bwrap, whose init keeps the stdio it was started with
  for the sandbox's whole life, where the agent's tools could reopen it) the agent's
  stdin and stdout are handed over on fds 3 and 4 and bwrap gets /dev/null on 0 and 1
  (`bridge/rpc/sandbox.py` moves them back inside);
- with `--pasta=PATH --host-ports=SPEC` (an isolated network, `bridge/rpc/sandbox.py`)
  bwrap says on fd 5 which process holds the sandbox's new network namespace and waits
  on fd 6; once that process has set the namespace's loopback up (see `_loopback_set`)
  we start pasta on that namespace (outbound only: no port forwarded in, the
  host's loopback reached only on SPEC's ports, the gateway not mapped to the host),
  wait until its route is there and it listens on SPEC's ports inside (it binds them
  after the route: an agent connecting in between was refused), then let bwrap go on.
  pasta is our child and is ended with the rest when the agent has exited;
- with `--user=UID:GID` (a root bridge's agent, `bridge/containment/agent_user.py`) bwrap, and so
  the agent, is started as that unprivileged user, with no supplementary groups, and so
  is pasta (it opens the namespaces bwrap made as that user); we stay root, to end what
  the agent leaves;
- this process is non-dumpable: without the sandbox the agent's tools share our user,
  and we hold the agent's stderr.

Standard library only, and nothing imported from the bridge: it runs isolated (`-I -S`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
LAST_CAP = 63  # the kernel answers EINVAL past its own last capability
BRIDGE_DIED = signal.SIGUSR1
HANDLED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, BRIDGE_DIED, signal.SIGALRM)
# Below the bridge's own SIGTERM wait (3 s) so the sweep ends before its group SIGKILL.
KILL_AFTER = 2.0
SWEEP_TIME = 2.0
# Each at most once, before the executable; the last two carry a value (`--pasta=PATH`).
FLAGS = frozenset({"--no-caps", "--stdio-fds", "--pasta", "--host-ports", "--user"})
NET_INFO_FD, NET_BLOCK_FD = 5, 6  # as bridge/rpc/sandbox.py passes them to bwrap
# bwrap makes its namespaces in milliseconds and pasta configures one in ~60 ms; this
# long means a broken setup, which fails the agent's start with pasta's own words.
NET_READY_TIMEOUT = 10.0


def _prctl(option: int, value: int) -> int:
    # Best effort, even without ctypes (a minimal Python): the agent must start anyway,
    # and stdin EOF still ends pi; only its tools might then stay.
    with contextlib.suppress(ImportError, OSError, AttributeError):
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0))
    return -1


def drop_privileges() -> None:
    """no_new_privs, and every capability out of the bounding set: for uid 0 an exec
    grants the bounding set, so emptying it is what leaves a root agent without any.
    Dropping needs CAP_SETPCAP; a non-root bridge has nothing to drop anyway."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    for cap in range(LAST_CAP + 1):
        _prctl(PR_CAPBSET_DROP, cap)


def parent_of(stat: str) -> int:
    """The parent pid in a /proc/<pid>/stat line (the name may hold spaces or parens)."""
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def children(me: int) -> list[int]:
    """Our live children: the agent, or what it left behind and the kernel gave us."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                if parent_of(stat.read()) == me:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def _reap_ready() -> bool:
    """Collect exited children without blocking; False once there are none at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def sweep(deadline: float) -> None:
    """Kill every descendant left, group by group, until none is left or time is up.

    A leftover in a session of its own (pi's bash tool) goes with its whole group (its
    `sleep`); one still in our group goes alone, and its own children come to us next.
    """
    me, ours = os.getpid(), os.getpgrp()
    while _reap_ready() and time.monotonic() < deadline:
        for pid in children(me):
            with contextlib.suppress(OSError):
                group = os.getpgid(pid)
                if group != ours:
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def parse_flags(rest: list[str]) -> tuple[dict[str, str], list[str]]:
    """The leading flags (name → value, "" for none) and what follows them."""
    flags: dict[str, str] = {}
    while rest and rest[0].partition("=")[0] in FLAGS:
        name, _, value = rest[0].partition("=")
        flags[name] = value
        rest = rest[1:]
    return flags, rest


def place(targets: dict[int, int]) -> None:
    """dup2 each source fd onto its target fd, whatever numbers they have now (a
    source may sit on another's target): all are lifted above the targets first."""
    floor = max(targets, default=0) + 1
    lifted = {
        target: fcntl.fcntl(source, fcntl.F_DUPFD, floor) for target, source in targets.items()
    }
    for target, fd in lifted.items():
        os.dup2(fd, target)  # inheritable, unlike the dups
        os.close(fd)


def _end_with(parent: int) -> None:
    """In a forked child: be sent SIGTERM when `parent` dies, and exit at once if it
    died before that was set. (The kernel clears the signal when the process changes
    user, and keeps it across exec otherwise.)"""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(143)


def _start(executable: str, argv: list[str], flags: dict[str, str], fds: dict[int, int]) -> int:
    keeper = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_DFL)  # an ignored signal would stay so after exec
        _end_with(keeper)
        if "--no-caps" in flags:
            drop_privileges()
        if "--stdio-fds" in flags:
            # The agent's pipes on 3 and 4, /dev/null on 0 and 1 for bwrap's init.
            place({3: 0, 4: 1, **fds})
            null = os.open(os.devnull, os.O_RDWR)  # now above every fd placed
            place({0: null, 1: null})
            os.close(null)
        else:
            place(fds)
        if "--user" in flags:
            uid, gid = (int(part) for part in flags["--user"].split(":"))
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            _end_with(keeper)  # a change of user cleared it
        os.execv(executable, argv)
    except BaseException as exc:  # noqa: BLE001 - a forked child must not return
        print(f"cannot start {executable}: {exc}", file=sys.stderr)
    os._exit(127)


class _Agent:
    """The agent as the signal handlers see it: its pid while it runs (0 before and
    after: never signal pid 0, our group) and whether its end is under way."""

    def __init__(self) -> None:
        self.pid = 0
        self.ending = False

    def send(self, sig: signal.Signals) -> None:
        if self.pid > 0:
            with contextlib.suppress(OSError):
                os.kill(self.pid, sig)

    def arm(self, _sig: int, _frame: object) -> None:
        if not self.ending:
            self.ending = True
            signal.setitimer(signal.ITIMER_REAL, KILL_AFTER)

    def bridge_died(self, sig: int, frame: object) -> None:
        self.send(signal.SIGTERM)
        self.arm(sig, frame)

    def handle_signals(self) -> None:
        signal.signal(signal.SIGALRM, lambda _sig, _frame: self.send(signal.SIGKILL))
        signal.signal(signal.SIGTERM, self.arm)
        signal.signal(signal.SIGHUP, self.arm)
        signal.signal(signal.SIGINT, self.arm)
        signal.signal(BRIDGE_DIED, self.bridge_died)


def main(args: list[str]) -> int:
    bridge, (flags, rest) = int(args[0]), parse_flags(args[1:])
    executable, argv = rest[0], rest[1:]
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    agent = _Agent()
    agent.handle_signals()
    _prctl(PR_SET_PDEATHSIG, BRIDGE_DIED)
    if os.getppid() != bridge:  # the bridge died before the signal was set
        return 143
    if "--pasta" in flags:
        _start_connected(agent, executable, argv, flags)
    else:
        agent.pid = _start(executable, argv, flags, {})
    # The agent alone talks to the bridge: our copies would hide its EOF on stdout.
    for fd in (0, 1):
        os.close(fd)
    status = _wait_for(agent.pid)
    agent.pid = 0  # reaped: its pid may be anyone's now
    signal.setitimer(signal.ITIMER_REAL, 0)
    sweep(time.monotonic() + SWEEP_TIME)
    return _exit_code(status)


def _start_connected(
    agent: _Agent, executable: str, argv: list[str], flags: dict[str, str]
) -> None:
    """Start the agent in bwrap and connect its network; an agent left unconnected is
    killed. Its pid is the handlers' from the start: a signal meanwhile reaches it."""
    info, info_in = os.pipe()
    go_out, go = os.pipe()
    agent.pid = _start(executable, argv, flags, {NET_INFO_FD: info_in, NET_BLOCK_FD: go_out})
    for fd in (info_in, go_out):
        os.close(fd)
    if not _connect(flags, info, go):
        agent.send(signal.SIGKILL)


def _connect(flags: dict[str, str], info: int, go: int) -> bool:
    """Connect the sandbox's network namespace through pasta, then let bwrap go on."""
    deadline = time.monotonic() + NET_READY_TIMEOUT
    holder = _namespace_holder(info, deadline)
    os.close(info)
    if holder is None:
        return False  # bwrap failed before making its namespaces: it says why itself
    while not _loopback_set(holder):
        if not os.path.exists(f"/proc/{holder}"):
            return False  # bwrap failed setting the sandbox up: it says why itself
        if time.monotonic() > deadline:
            print("bwrap did not set the sandbox's loopback up", file=sys.stderr)
            return False
        time.sleep(0.002)
    pasta = [flags["--pasta"], "--config-net", "--quiet", "--foreground", "--no-map-gw"]
    pasta += ["-t", "none", "-u", "none", "-U", "none", "-T", flags.get("--host-ports") or "none"]
    # As the sandbox's own user: it must open the namespaces bwrap made as that user.
    runas = flags.get("--user") or f"{os.geteuid()}:{os.getegid()}"
    pasta += ["--runas", runas, str(holder)]
    helper = _spawn(pasta)
    ports = [int(p) for p in (flags.get("--host-ports") or "").split(",") if p.isdigit()]
    while not _ready(holder, ports):
        done, _ = os.waitpid(helper, os.WNOHANG)
        if done or time.monotonic() > deadline:
            print(f"pasta did not connect the agent's network ({pasta[0]})", file=sys.stderr)
            return False
        time.sleep(0.002)
    os.write(go, b"1")
    os.close(go)
    return True


def _spawn(pasta: list[str]) -> int:
    """Start pasta under a watcher of ours, their stdio on /dev/null; the watcher's pid.

    pasta holds the namespace itself and never quits on its own, so a keeper killed
    outright (no code of ours runs) must still take it along: the watcher gets the
    kernel's parent-death signal and ends pasta with it. The watcher stays our user:
    the kernel clears that signal in a process that changes user, as pasta does where
    it runs as the sandbox's (`--runas`)."""
    keeper = os.getpid()
    watcher = os.fork()
    if watcher == 0:
        try:
            # As Python starts every child: pasta refuses to run with these ignored.
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, *HANDLED):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_RDWR)
            place({0: null, 1: null})
            _watch(pasta, keeper)
        except BaseException as exc:  # noqa: BLE001 - a forked child must not return
            print(f"cannot start {pasta[0]}: {exc}", file=sys.stderr)
        os._exit(127)
    return watcher


def _watch(pasta: list[str], keeper: int) -> None:
    """In the watcher: run pasta as our child until it exits, or until the keeper dies
    (then end it); exit as pasta did."""
    child = 0

    def end(_signum: int, _frame: object) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        os._exit(143)

    signal.signal(signal.SIGTERM, end)  # before pasta exists: none is left behind
    _end_with(keeper)
    watcher = os.getpid()
    child = os.fork()
    if child == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            # And pasta ends with the watcher where it keeps our user (the kernel keeps
            # the signal then): a watcher killed along with the keeper ends it too.
            _end_with(watcher)
            os.execv(pasta[0], pasta)
        except BaseException as exc:  # noqa: BLE001 - a forked child must not return
            print(f"cannot start {pasta[0]}: {exc}", file=sys.stderr)
        os._exit(127)
    _, status = os.waitpid(child, 0)
    os._exit(_exit_code(status))


def _namespace_holder(info: int, deadline: float) -> int | None:
    """The pid bwrap reports on its info fd (`{"child-pid": N}`), None at its EOF."""
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([info], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(info, 4096) if ready else b""
        if not chunk:
            return None
        data += chunk
        with contextlib.suppress(ValueError):
            return int(json.loads(data)["child-pid"])
    return None


def _loopback_set(pid: int) -> bool:
    """Whether `pid` (bwrap's child) has given its network namespace's loopback
    127.0.0.1. bwrap names that child on fd 5 before the child adds the address, with
    NLM_F_EXCL, and then sets lo up. pasta sets lo up too, and the kernel gives an up lo
    127.0.0.1 itself: a pasta started first made bwrap fail ("loopback: Failed
    RTM_NEWADDR", exit 1), an agent dead at its start, now and then under load. Once the
    address is there, bwrap's last step (lo up) cannot clash with pasta's."""
    # The address's host route, in the namespace's local table (an IPv4 kernel always
    # has this file; a down lo already has the route).
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/fib_trie") as trie:
        return any(row.split() == ["|--", "127.0.0.1"] for row in trie)
    return False


def _ready(pid: int, ports: list[int]) -> bool:
    """Whether pasta has connected `pid`'s namespace: a default route in some family,
    and in each family that has one, each forwarded port listened on."""
    families = [f for f in ("tcp", "tcp6") if _routed(pid, f)]
    # Per family: pasta binds a port's IPv4 and IPv6 sockets one after the other, and an
    # agent let go when only the IPv6 one was there had its 127.0.0.1 dial refused.
    return bool(families) and all(set(ports) <= _listening(pid, f) for f in families)


def _routed(pid: int, family: str) -> bool:
    """Whether `pid`'s network namespace has a default route in `family` yet (pasta
    sets its routes up before it listens)."""
    # A default route off the loopback (a new namespace has an unreachable one on lo).
    # IPv4 rows: interface, destination, …; IPv6 rows: destination, prefix, …, interface.
    if family == "tcp":
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/route") as routes:
            return any(row.split()[1:2] == ["0" * 8] and row.split()[0] != "lo" for row in routes)
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/ipv6_route") as routes:
        return any(
            row.split()[:2] == ["0" * 32, "00"] and row.split()[-1] != "lo" for row in routes
        )
    return False


def _listening(pid: int, family: str) -> set[int]:
    """The ports listened on in `pid`'s namespace, in `family` ("tcp" or "tcp6")."""
    found = set()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{family}") as sockets:
        for row in sockets:
            cols = row.split()  # sl, local address:port (hex), remote, state (0A: LISTEN)
            if len(cols) > 3 and cols[3] == "0A":
                found.add(int(cols[1].rpartition(":")[2], 16))
    return found


def _wait_for(agent: int) -> int:
    """Wait for the agent, reaping its leftovers' exits meanwhile (they are ours now)."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == agent:
            return status


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
