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
- this process is non-dumpable: without the sandbox the agent's tools share our user,
  and we hold the agent's stderr.

Standard library only, and nothing imported from the bridge: it runs isolated (`-I -S`).
"""

from __future__ import annotations

import contextlib
import os
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
# Below the bridge's own SIGTERM wait (3 s) so the sweep ends before its group SIGKILL.
KILL_AFTER = 2.0
SWEEP_TIME = 2.0
FLAGS = frozenset({"--no-caps", "--stdio-fds"})  # each at most once, before the executable


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


def hand_over_stdio() -> None:
    """The agent's pipes to fds 3 and 4 (inherited), /dev/null on 0 and 1."""
    os.dup2(0, 3)
    os.dup2(1, 4)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    if null > 4:
        os.close(null)


def _start(executable: str, argv: list[str], flags: frozenset[str]) -> int:
    keeper = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, BRIDGE_DIED, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)  # an ignored signal would stay so after exec
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != keeper:  # we died before the signal was set
            os._exit(143)
        if "--no-caps" in flags:
            drop_privileges()
        if "--stdio-fds" in flags:
            hand_over_stdio()
        os.execv(executable, argv)
    except BaseException as exc:  # the child must never return into our loop
        print(f"cannot start {executable}: {exc}", file=sys.stderr)
    os._exit(127)


def main(args: list[str]) -> int:
    bridge, rest = int(args[0]), args[1:]
    leading = next(i for i, arg in enumerate([*rest, ""]) if arg not in FLAGS)
    flags, rest = frozenset(rest[:leading]), rest[leading:]
    executable, argv = rest[0], rest[1:]
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    agent = 0  # its pid while it runs; 0 before and after (never signal pid 0: our group)
    ending = False

    def signal_agent(sig: signal.Signals) -> None:
        if agent > 0:
            with contextlib.suppress(OSError):
                os.kill(agent, sig)

    def arm(_sig: int, _frame: object) -> None:
        nonlocal ending
        if not ending:
            ending = True
            signal.setitimer(signal.ITIMER_REAL, KILL_AFTER)

    def bridge_died(sig: int, frame: object) -> None:
        signal_agent(signal.SIGTERM)
        arm(sig, frame)

    signal.signal(signal.SIGALRM, lambda _sig, _frame: signal_agent(signal.SIGKILL))
    signal.signal(signal.SIGTERM, arm)
    signal.signal(signal.SIGHUP, arm)
    signal.signal(signal.SIGINT, arm)
    signal.signal(BRIDGE_DIED, bridge_died)
    _prctl(PR_SET_PDEATHSIG, BRIDGE_DIED)
    if os.getppid() != bridge:  # the bridge died before the signal was set
        return 143
    agent = _start(executable, argv, flags)
    # The agent alone talks to the bridge: our copies would hide its EOF on stdout.
    for fd in (0, 1):
        os.close(fd)
    status = _wait_for(agent)
    agent = 0  # reaped: its pid may be anyone's now
    signal.setitimer(signal.ITIMER_REAL, 0)
    sweep(time.monotonic() + SWEEP_TIME)
    return _exit_code(status)


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
