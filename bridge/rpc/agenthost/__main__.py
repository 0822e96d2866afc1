"""The host's command line: `python -I -S <this folder> --socket PATH ... -- COMMAND...`."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

if __package__:  # imported as bridge.rpc.agenthost.__main__ (tests, type checks)
    from bridge.rpc.agenthost.loop import Host
    from bridge.rpc.agenthost.settings import Args
else:  # run as the folder, isolated: its modules are top-level there
    from loop import Host  # type: ignore[import-not-found,no-redef]
    from settings import Args  # type: ignore[import-not-found,no-redef]


PR_SET_DUMPABLE = 4


def parse(argv: list[str]) -> Args:
    if "--" not in argv:
        raise SystemExit("usage: agenthost --socket PATH [--spill PATH] [...] -- COMMAND...")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    values = dict(zip(options[::2], options[1::2], strict=False))
    socket_path = values.get("--socket", "")
    if not socket_path or not command:
        raise SystemExit("agenthost: --socket and a command are required")
    return Args(
        socket=socket_path,
        spill=values.get("--spill", socket_path + ".spill"),
        command=command,
        detach_timeout=float(values.get("--detach-timeout", 600)),
        run_limit=float(values.get("--run-limit", 7200)),
        memory_cap=int(values.get("--memory-cap", Args.memory_cap)),
        total_cap=int(values.get("--total-cap", Args.total_cap)),
    )


def make_undumpable() -> None:
    """Without the sandbox the agent's tools share our user: non-dumpable, they cannot
    reopen the agent's pipes we hold through /proc, nor read our memory."""
    with contextlib.suppress(ImportError, OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def main(argv: list[str]) -> int:
    make_undumpable()
    args = parse(argv)
    host = Host(args)
    # A SIGTERM (`pi-bridge stop-agents`, a shutdown) ends the agent the orderly way.
    signal.signal(signal.SIGTERM, lambda _s, _f: host.stop())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Daemonized: the bridge reaps the parent at once, and the host lives on as an
    # orphan that no bridge has to wait for (an exited host leaves no zombie behind).
    if os.fork():
        os._exit(0)
    host.start()
    # Ready: the bridge reads this line, then our stdout and stderr are let go, so that
    # nothing of the bridge that started us is held open.
    os.write(1, f"ready {os.getpid()} {host.keeper}\n".encode())
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return host.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
