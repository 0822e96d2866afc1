"""Each agent's sandbox, from the bridge's options, and the bridge's own hardening.

An agent runs shell commands for everyone on the allowlist, so with `mode = "bwrap"`
(the default on Linux) it sees (`bridge/rpc/sandbox.py` builds the command line):

- writable: its conversation's workspace (in a project: its worktree, plus the
  repository's shared objects, refs and logs and the worktree's own admin dir, but
  not the repository's config or hooks), its session dir, its private home, and the
  operator's `read_write` paths;
- read-only: the rest of the system, the operator's `read_only` paths, and the
  operator's agent config: top-level files (`models.json`, `settings.json`, …) are
  copied into the private agent dir at every start, its folders (`extensions/`, …)
  are bound read-only, so no conversation can plant an extension that runs in another;
- nothing of: the data dir (the store, other conversations' workspaces, sessions and
  homes), the configuration file, a store file outside the data dir, and other
  conversations' configured workspaces;
- no process but its own: the bridge and other agents live outside its PID namespace.

`make_undumpable()` is the part that holds in every mode: a non-dumpable bridge's
`/proc/<pid>/environ` (its tokens) cannot be read by a process of the same user, and
the keeper starts an unsandboxed agent with no capabilities, so not by a root one
either (`bridge/rpc/reaper.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.containment.agent_user import agent_user, closed_on_the_way, hand_over
from bridge.containment.hidden import bound_back, hidden_paths
from bridge.containment.project_code import masks
from bridge.options import SandboxMode, safe_name
from bridge.rpc import nodump
from bridge.rpc.errors import AgentStartError
from bridge.rpc.sandbox import Bind, Sandbox

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from bridge.options import BridgeOptions, SandboxOptions
    from bridge.rpc.process import AgentSpec

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PROBE_TIMEOUT = 10.0  # bwrap starts in ~10 ms; a hung probe means a broken setup
# pi's config dir variables (the atomic fork has its own) and where each lives in HOME.
AGENT_DIRS = {"PI_CODING_AGENT_DIR": ".pi/agent", "ATOMIC_CODING_AGENT_DIR": ".atomic/agent"}
PRIVATE_ONLY = frozenset({"sessions"})  # the operator's own sessions stay out of sight
TUN = Path("/dev/net/tun")  # pasta's device, opened as the agents' user


def default_mode() -> SandboxMode:
    """bwrap where bubblewrap exists (Linux); elsewhere there is nothing to run it with."""
    return "bwrap" if sys.platform == "linux" else "off"


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0 for this process: same-user processes can no longer read its
    /proc/<pid>/environ, mem or fds. Linux only; False where it could not be set."""
    if sys.platform != "linux":
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def find_bwrap() -> str | None:
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else None


def probe() -> str | None:
    """None when bwrap can start a sandbox here; otherwise why not, for the operator."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bwrap not found (install the bubblewrap package)"
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--", "true"]
    # Only what bwrap needs to find `true`: none of the bridge's secrets.
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        why = " ".join(done.stderr.split())[:300] or f"exit {done.returncode}"
        return f"bwrap cannot create a sandbox here: {why}"
    return None


def parts_missing(policy: SandboxOptions) -> list[str]:
    """What this machine lacks for `policy`'s sandbox beyond bwrap (`probe`): the
    non-dumpable agent's library, and pasta for an isolated network."""
    missing = []
    if policy.mode == "bwrap" and nodump.library() is None:
        missing.append(nodump.missing_reason())
    try:
        user = agent_user(policy.user) if policy.mode == "bwrap" else None
    except AgentStartError as exc:
        missing.append(str(exc))
        user = None
    isolated = policy.mode == "bwrap" and policy.network == "isolated"
    if isolated and not shutil.which("pasta"):
        missing.append(
            "pasta not found: the agents' isolated network needs it (install the Debian "
            'package passt), or set [sandbox] network = "host" (PI_BRIDGE_NETWORK=host)'
        )
    if isolated and user is not None and not _tun_for_everyone():
        missing.append(
            f"{TUN} is closed to the agents' user, as whom pasta runs: give it the "
            "distribution's mode 0666, or run the bridge as an unprivileged user"
        )
    return missing


def _tun_for_everyone() -> bool:
    try:
        return TUN.stat().st_mode & 0o006 == 0o006
    except OSError:
        return False


def described(policy: SandboxOptions) -> str:
    """One line for `pi-bridge check`: what each agent's sandbox is made of."""
    user = agent_user(policy.user)  # parts_missing said it is a user, before this
    who = f"agents run as {user.name}" if user else "agents run as the bridge's user"
    ports = ", ".join(map(str, policy.host_ports)) or "none"
    network = {
        "isolated": f"own network through pasta, host loopback ports: {ports}",
        "host": "the host's network, loopback included",
        "off": "no network",
    }[policy.network]
    preload = f"non-dumpable ({nodump.LIBRARY.name})"
    return f"bwrap starts a sandbox; {who}, {preload}; {network}"


def home_of(options: BridgeOptions, key: str) -> Path:
    """The agent's private HOME: kept across starts (its dotfiles, caches)."""
    return options.data_dir / "homes" / safe_name(key)


def config_of(options: BridgeOptions, key: str) -> Path:
    """The agent's private config dirs: made anew from the operator's at every start."""
    return options.data_dir / "agent-config" / safe_name(key)


def contain(
    spec: AgentSpec,
    options: BridgeOptions,
    key: str,
    session_dir: Path,
    git_dirs: tuple[Path, ...] = (),
) -> AgentSpec:
    """`spec` as it runs in this conversation's sandbox (with mode "off" only made
    non-dumpable); `git_dirs` are what git in a project's worktree writes
    (`Worktree.git_dirs`)."""
    policy = options.agent.sandbox
    preload = nodump.library()
    if policy.mode == "off":
        if preload is None:
            log.warning("agents run dumpable: %s", nodump.missing_reason())
            return spec
        return replace(spec, env=dict(spec.env, LD_PRELOAD=str(preload)))
    if preload is None:
        raise AgentStartError(
            f"the sandbox needs its non-dumpable agent: {nodump.missing_reason()}"
        )
    bwrap = find_bwrap()
    if bwrap is None:
        raise AgentStartError("the sandbox needs bwrap (bubblewrap), which is not installed")
    home, config = home_of(options, key).resolve(), config_of(options, key).resolve()
    home.mkdir(parents=True, exist_ok=True)
    env = dict(spec.env, HOME=str(home), TMPDIR="/tmp")
    binds = _agent_config(spec.env, config, env)
    owned = _resolved((spec.cwd, session_dir, home, config, *git_dirs))
    writable = _resolved((*owned, *policy.read_write))
    hidden = hidden_paths(options, key, spec.cwd)  # what the bridge's own reads refuse too
    clash = sorted(str(p) for p in set(writable) & set(hidden))
    if clash:
        raise AgentStartError(f"refusing to give the agent write access to {', '.join(clash)}")
    sandbox = Sandbox(
        bwrap=bwrap,
        writable=writable,
        readable=_resolved((*policy.read_only, *bound_back())),
        hidden=tuple(p for p in hidden if p.is_dir()),
        hidden_files=tuple(p for p in hidden if p.exists() and not p.is_dir()),
        binds=binds,
        masks=masks(spec.cwd, options.data_dir),
        network=policy.network,
        pasta=shutil.which("pasta") if policy.network == "isolated" else None,
        host_ports=policy.host_ports,
        preload=preload,
        user=_agent_user(policy, owned, (*writable, *(b.source for b in binds), preload)),
    )
    return replace(spec, cwd=spec.cwd.resolve(), env=env, sandbox=sandbox)


def _agent_user(
    policy: SandboxOptions, owned: Iterable[Path], reached: Iterable[Path]
) -> tuple[int, int] | None:
    """As root: the agents' user, made owner of what the agent writes, after checking
    that it can reach everything the sandbox binds (bridge/containment/agent_user.py)."""
    user = agent_user(policy.user)
    if user is None:
        return None
    for path in reached:
        closed = closed_on_the_way(user, path)
        if closed is not None:
            raise AgentStartError(
                f"the agents' user {user.name!r} cannot reach {path}: {closed} is closed to "
                "it; open it (chmod o+x), keep the bridge's data and the agent elsewhere, or "
                "choose another [sandbox] user"
            )
    hand_over(user, owned)
    return (user.uid, user.gid)


def _resolved(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(p.resolve() for p in paths))


def _agent_config(
    source_env: Mapping[str, str], config: Path, env: dict[str, str]
) -> tuple[Bind, ...]:
    """Point the agent's config dir variables at fresh private copies of the operator's.

    Made anew at every start, in a folder the agent can write but the bridge never
    follows links in: whatever the last run left there (a link to the store, say) is
    removed, not written through. Files are copied (pi may rewrite settings.json),
    folders bound read-only (extensions run code: no conversation may change them).
    """
    shutil.rmtree(config, ignore_errors=True)  # never follows links (fd-based on Linux)
    binds: list[Bind] = []
    operator_home = Path(source_env.get("HOME") or Path.home())
    for name, inside in AGENT_DIRS.items():
        configured = source_env.get(name)
        if configured is None and name != "PI_CODING_AGENT_DIR":
            continue  # only pi's own dir has a default place to copy from
        source = Path(configured) if configured else operator_home / inside
        private = config / name.lower()
        private.mkdir(parents=True)
        env[name] = str(private)
        binds += _fill(source, private)
    return tuple(binds)


def _fill(source: Path, private: Path) -> list[Bind]:
    binds = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in sorted(source.iterdir()):
            if entry.name in PRIVATE_ONLY:
                continue
            if entry.is_dir():
                binds.append(Bind(entry.resolve(), private / entry.name))
            elif entry.is_file():
                shutil.copyfile(entry, private / entry.name)
    return binds
