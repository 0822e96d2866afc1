"""`pi-bridge check`: the configuration is valid, and everything answers once.

One line per check, ✓ or ✗: the sandbox starts, the agent answers get_state (in a
throwaway data dir, sandboxed as it will serve), the store opens, and each
configured platform accepts its credentials (its runner's `check`: Slack's compares
the token's scopes with what the bridge needs). With projects configured, git is on
PATH and each project's path is the top of a git work tree (loading the file does no
I/O; this is where it is asked).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.app.platforms import open_platforms
from bridge.app.run import SandboxUnavailable, one_line
from bridge.containment.sandbox import contain, described, parts_missing, probe
from bridge.projects.git import WorktreeError
from bridge.projects.worktrees import is_repository

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.app.config import Loaded
    from bridge.logs import TextOut
    from bridge.options import BridgeOptions, Transcription

log = logging.getLogger("bridge.cli")

CHECK_TIMEOUT = 30.0  # one check (an agent's first start can take a few seconds)


async def check(loaded: Loaded, out: TextOut) -> int:
    """One line per check, ✓ or ✗; the number of failed checks."""
    source = str(loaded.source) if loaded.source else "defaults and environment"
    say(out, True, f"config: valid ({source}); serving {', '.join(loaded.platforms) or 'console'}")
    for name in open_platforms(loaded.config):
        out.write(f"⚠ allowlist: {name} lets everyone in (PI_BRIDGE_ALLOW_EVERYONE=true)\n")
    checks: list[tuple[str, Callable[[], Awaitable[str]]]] = [
        ("sandbox", lambda: _check_sandbox(loaded.options)),
        ("agent", lambda: _check_agent(loaded.options)),
        ("store", lambda: _check_store(loaded)),
    ]
    checks += [(platform.name, platform.check) for platform in loaded.served]
    service = loaded.options.transcribe
    if service is not None:
        checks.append(("transcription", lambda: _check_transcription(service)))
    failed = 0
    for name, run in checks:
        try:
            with anyio.fail_after(CHECK_TIMEOUT):
                detail = await run()
        except TimeoutError:
            failed += 1
            say(out, False, f"{name}: no answer within {CHECK_TIMEOUT:g} s")
        except Exception as exc:  # whatever failed, it is this check's ✗ line
            log.debug("check %s failed", name, exc_info=True)
            failed += 1
            say(out, False, f"{name}: {one_line(exc)}")
        else:
            say(out, True, f"{name}: {detail}")
    return failed + await _check_projects(loaded.options, out)


def say(out: TextOut, ok: bool, text: str) -> None:
    out.write(f"{'✓' if ok else '✗'} {text}\n")
    out.flush()


async def _check_sandbox(options: BridgeOptions) -> str:
    mode = options.agent.sandbox.mode
    if mode == "off":
        return "off: agents run unsandboxed (PI_BRIDGE_SANDBOX=off)"
    why = await anyio.to_thread.run_sync(probe)
    if why is not None:
        raise SandboxUnavailable(f"{why}; agents cannot start (or set PI_BRIDGE_SANDBOX=off)")
    missing = parts_missing(options.agent.sandbox)
    if missing:
        raise SandboxUnavailable(f"{'; '.join(missing)}; agents cannot start")
    return described(options.agent.sandbox)


async def _check_projects(options: BridgeOptions, out: TextOut) -> int:
    """A ✗ line for each project whose path is not the top of a git work tree, else one
    ✓ line naming them all; nothing without projects. The number of failed lines."""
    if not options.projects:
        return 0
    git = shutil.which("git")
    if git is None:
        say(out, False, "projects: no git on PATH; projects need it (worktrees, /diff)")
        return 1
    failed = 0
    for name, project in options.projects.items():
        problem = None
        try:
            with anyio.fail_after(CHECK_TIMEOUT):
                if not await is_repository(project.path):
                    problem = "is not a git repository (its top directory)"
        except TimeoutError:
            problem = f"git gave no answer within {CHECK_TIMEOUT:g} s"
        except (WorktreeError, OSError) as exc:  # git itself failed: a broken installation
            problem = f"cannot be checked: {one_line(exc)}"
        if problem is not None:
            failed += 1
            say(out, False, f"project {name}: {project.path} {problem}")
    if not failed:
        names = ", ".join(options.projects)
        are = "is a git repository" if len(options.projects) == 1 else "are git repositories"
        say(out, True, f"projects: {names} {are} (git at {git})")
    return failed


async def _check_agent(options: BridgeOptions) -> str:
    from bridge.rpc.client import AgentClient
    from bridge.rpc.process import AgentSpec

    # A throwaway data dir: the agent may write there, and must not touch the real one.
    # It starts as it will serve: in its sandbox, where the mode says so.
    with tempfile.TemporaryDirectory(prefix="pi-bridge-check-") as scratch:
        root = Path(scratch)
        os.chmod(scratch, 0o711)  # a root bridge's agents' user passes, as to the data dir
        trial = dataclasses.replace(options, data_dir=root, chats={})
        (root / "workspace").mkdir()
        (root / "session").mkdir()
        spec = AgentSpec(argv=options.agent.argv, cwd=root / "workspace", env=options.agent.env)
        spec = contain(spec, trial, "check", root / "session")
        async with AgentClient(spec) as agent:
            state = await agent.get_state()
    model = state.get("model")
    name = model.get("id") if isinstance(model, dict) else None
    return f"{options.agent.argv[0]} answered get_state" + (f" (model {name})" if name else "")


async def _check_store(loaded: Loaded) -> str:
    from bridge.store import open_store
    from bridge.store.base import redact_url

    store = await open_store(loaded.config.store, loaded.options.data_dir)
    try:
        await store.seen(f"check:{secrets.token_hex(8)}", 60)
    finally:
        await store.aclose()
    where = loaded.options.data_dir if loaded.config.store.lower() == "sqlite" else None
    return f"{redact_url(loaded.config.store)} reachable" + (f" ({where})" if where else "")


async def _check_transcription(service: Transcription) -> str:
    """Reachable, and the key taken: a request without a clip, which the API refuses
    with 400 when it got that far (401 / 403: the key was refused)."""
    import httpx

    from bridge.files.transcription import endpoint, headers

    url = endpoint(service.url)
    async with httpx.AsyncClient(timeout=CHECK_TIMEOUT) as client:
        response = await client.post(url, headers=headers(service), data={"model": service.model})
    if response.status_code in (401, 403):
        raise RuntimeError(f"{url} refused the key (HTTP {response.status_code})")
    return f"{url} answers (HTTP {response.status_code} to a request without a clip)"
