"""The bubblewrap command line that contains one agent (docs/security.md, "The agent's sandbox").

Pure: a `Sandbox` (what the agent may write, read, and must not see) in, a `bwrap`
argv out; nothing here touches the file system. The mounts it asks for, in order:

- the whole system read-only (`--ro-bind / /`): the operator's agent command may name
  files anywhere (the agent, an extension given with `-e`, a CA bundle) and must keep
  working unchanged;
- a fresh `/dev`, a `/proc` of the agent's own PID namespace (the bridge, its keeper and
  other conversations' agents are not in it, so their `/proc/<pid>/environ` cannot even
  be named), and a private `/tmp`;
- then, shallowest path first so that a deeper mount lands on top of a shallower one:
  the hidden paths covered (an empty tmpfs over a directory, `/dev/null` over a file),
  the writable ones bound read-write, the readable ones bound read-only; at the end
  each covering tmpfs is made read-only, so nothing can be left there. A workspace
  that contains the data dir therefore still has the data dir hidden, and the
  conversation's own session dir inside the hidden data dir is bound back on top.

Every namespace is new (`--unshare-all`). The network (docs/security.md, "The agent's
network"): "isolated" keeps the new network namespace and has the keeper connect it to
the outside through pasta (a user-mode network stack: outbound connections are made by
pasta on the host's behalf, and the host's loopback is reached only on the ports
listed) once bwrap has made it (`--info-fd` tells the keeper where, `--block-fd` holds
the agent back until it is ready); "host" shares the host's (`--share-net`); "off"
leaves the agent with a loopback of its own and nothing else. Capabilities are dropped
(a root agent keeps uid 0 but gets no capability back on exec: bwrap also sets
no_new_privs), and the sandbox dies with its parent, the keeper. No `--new-session`:
the agent must stay in the process group the bridge signals as a whole. pi's project
code in the workspace is covered last (`masks`, bridge/containment/project_code.py), so that no
writable bind can lift a cover.

No tool reaches pi's pipes (docs/security.md, "No tool reaches pi"): the agent is
preloaded with the library that makes it non-dumpable (`--setenv LD_PRELOAD`, for the
agent only: bwrap itself must stay dumpable to write its uid map), and bwrap's init,
which keeps the stdin, stdout and stderr it was started with for as long as the
sandbox lives, is started with /dev/null on stdin and stdout: the keeper hands the
agent's pipes over on fds 3 and 4, which init closes and a shell at the top of the
sandbox moves back to 0 and 1 (`STDIO_SHIM`) before it becomes the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Literal

# The mount kinds, in the order they are applied at equal depth: a path both hidden and
# writable (a workspace configured *as* the data dir) ends up writable.
_HIDE, _HIDE_FILE, _WRITE, _READ = 0, 1, 2, 3
TMP = PurePath("/tmp")  # the sandbox's own private /tmp
# The agent's stdin and stdout arrive on fds 3 and 4 (reaper.py, `--stdio-fds`).
STDIO_SHIM = ("/bin/sh", "-c", 'exec "$@" <&3 >&4 3<&- 4<&-', "sh")
# With an isolated network: where bwrap says which process holds the new namespace,
# and where it waits until the keeper has connected it (reaper.py, `--pasta`).
NET_INFO_FD, NET_BLOCK_FD = 5, 6
Network = Literal["isolated", "host", "off"]


@dataclass(frozen=True)
class Bind:
    """A read-only bind of `source` at `target` inside the sandbox."""

    source: Path
    target: Path


@dataclass(frozen=True)
class Sandbox:
    """What one agent may see. All paths absolute and resolved."""

    bwrap: str  # the bwrap executable
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()  # inside hidden trees or /tmp: bound back read-only
    hidden: tuple[Path, ...] = ()  # directories, covered by an empty tmpfs
    hidden_files: tuple[Path, ...] = ()  # files, covered by /dev/null
    binds: tuple[Bind, ...] = ()  # read-only binds elsewhere (the operator's extensions)
    masks: tuple[
        Bind, ...
    ] = ()  # read-only covers mounted last (bridge/containment/project_code.py)
    network: Network = "host"
    pasta: str | None = None  # the pasta executable, for network "isolated"
    host_ports: tuple[int, ...] = ()  # host loopback TCP ports an isolated agent reaches
    preload: Path | None = None  # the non-dumpable library (bridge/rpc/nodump.py)
    user: tuple[int, int] | None = None  # uid and gid the keeper drops to (a root bridge)


Kind = int  # _HIDE, _HIDE_FILE, _WRITE or _READ


def bwrap_argv(sandbox: Sandbox, cwd: Path, command: list[str]) -> list[str]:
    """The whole argv: bwrap, its options, `--`, then the agent's command."""
    argv = [sandbox.bwrap, "--unshare-all"]
    if sandbox.network == "host":
        argv.append("--share-net")
    elif sandbox.network == "isolated":
        argv += ["--info-fd", str(NET_INFO_FD), "--block-fd", str(NET_BLOCK_FD)]
        # uid 0 of its own user namespace (no capability: --cap-drop ALL): to show any
        # other uid, an unprivileged bwrap nests a second user namespace, which does not
        # own the network namespace, and pasta could then join neither (a root bridge's
        # agent is uid 0 there anyway).
        argv += ["--uid", "0", "--gid", "0"]
    argv += ["--die-with-parent", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", str(TMP)]
    for kind, source, target in _mounts(sandbox, command):
        argv += _mount(kind, source, target)
    for hidden in sandbox.hidden:  # last: the mount points inside had to be made first
        argv += ["--remount-ro", str(hidden)]
    for mask in sandbox.masks:  # after everything: no writable bind may lift one
        argv += ["--ro-bind", str(mask.source), str(mask.target)]
    if sandbox.preload is not None:
        argv += ["--setenv", "LD_PRELOAD", str(sandbox.preload)]
    return [*argv, "--chdir", str(cwd), "--", *STDIO_SHIM, *command]


def _mounts(sandbox: Sandbox, command: list[str]) -> list[tuple[Kind, Path, Path]]:
    mounts: list[tuple[Kind, Path, Path]] = [(_HIDE, p, p) for p in sandbox.hidden]
    mounts += [(_HIDE_FILE, p, p) for p in sandbox.hidden_files]
    mounts += [(_WRITE, p, p) for p in sandbox.writable]
    mounts += [(_READ, p, p) for p in (*sandbox.readable, *_under_tmp(command))]
    mounts += [(_READ, b.source, b.target) for b in sandbox.binds]
    if sandbox.preload is not None:  # under /tmp or a hidden path it must be bound back
        mounts.append((_READ, sandbox.preload, sandbox.preload))
    unique = dict.fromkeys(mounts)  # a path named twice is mounted once
    return sorted(unique, key=lambda m: (len(m[2].parts), m[0], str(m[2])))


def _under_tmp(command: list[str]) -> list[Path]:
    """What the command names under /tmp, which the private /tmp would hide: the whole
    top-level folder it lies in, read-only (an agent installed in /tmp/x runs files
    beside the one named)."""
    found = []
    for arg in command:
        path = PurePath(arg.partition("=")[2] if arg.startswith("-") else arg)
        if path.is_absolute() and path.is_relative_to(TMP) and len(path.parts) > 2:
            found.append(Path(*path.parts[:3]))
    return found


def _mount(kind: Kind, source: Path, target: Path) -> list[str]:
    if kind == _WRITE:
        return ["--bind", str(source), str(target)]
    if kind == _READ:
        return ["--ro-bind-try", str(source), str(target)]
    if kind == _HIDE_FILE:
        return ["--ro-bind", "/dev/null", str(target)]
    return ["--tmpfs", str(target)]
