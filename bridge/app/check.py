"""`pi-bridge check`: the configuration is valid, and everything answers once.

One line per check, ✓ or ✗: the sandbox starts, the agent answers get_state (in a
throwaway data dir, sandboxed as it will serve), the store opens, and each
configured platform accepts its credentials (Slack's scopes are compared with what
the bridge needs). With projects configured, git is on PATH and each project's path
is the top of a git work tree (loading the file does no I/O; this is where it is asked).
"""

from __future__ import annotations

import dataclasses
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
from bridge.projects.worktrees import is_repository

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from bridge.app.config import Loaded
    from bridge.logs import TextOut
    from bridge.options import BridgeOptions, Transcription

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
    if loaded.telegram is not None:
        checks.append(("telegram", lambda: _check_telegram(loaded)))
    if loaded.slack is not None:
        checks.append(("slack", lambda: _check_slack(loaded)))
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
        except Exception as exc:
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
        except Exception as exc:  # git itself failed (WorktreeError: a broken installation)
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


async def _platform_call(
    url: str, secret: str, **kwargs: object
) -> tuple[dict[str, object], Mapping[str, str]]:
    """The JSON body of a POST to `url`, and the answer's headers."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=CHECK_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, **kwargs) as response,  # type: ignore[arg-type]
        ):
            body = await response.json(content_type=None)
            headers = response.headers  # aiohttp's: names stay case-insensitive
    except (aiohttp.ClientError, ValueError) as exc:
        # Telegram puts the token in the URL, and client errors quote URLs.
        raise RuntimeError(str(exc).replace(secret, "***")) from None
    if not isinstance(body, dict):
        raise RuntimeError(f"unexpected answer (HTTP {response.status})")
    return body, headers


async def _check_telegram(loaded: Loaded) -> str:
    settings = loaded.telegram
    assert settings is not None
    body, _ = await _platform_call(f"{settings.base_url}{settings.token}/getMe", settings.token)
    result = body.get("result")
    if not body.get("ok") or not isinstance(result, dict):
        raise RuntimeError(f"getMe refused: {body.get('description', 'no reason given')}")
    streaming = (
        "answers stream as drafts in private chats (sendMessageDraft; by editing in groups "
        "and topics, and in any chat that refuses a draft)"
        if settings.streaming == "draft"
        else 'answers stream by editing a sent message (streaming = "edit")'
    )
    return f"getMe accepted the token (@{result.get('username')}); {streaming}"


async def _check_slack(loaded: Loaded) -> str:
    settings = loaded.slack
    assert settings is not None
    url = settings.api_base_url.rstrip("/") + "/auth.test"
    headers = {"Authorization": f"Bearer {settings.bot_token}"}
    body, answer = await _platform_call(url, settings.bot_token, headers=headers)
    if not body.get("ok"):
        raise RuntimeError(f"auth.test refused the bot token: {body.get('error', 'unknown')}")
    mode = "Socket Mode" if settings.socket_mode else "HTTP mode"
    who = body.get("user") or body.get("user_id")
    found = f"auth.test accepted the bot token (team {body.get('team')}, bot {who}; {mode})"
    return found + _scope_note(answer) + "; " + _answers_note(settings.streaming)


def _answers_note(streaming: str) -> str:
    if streaming == "stream":
        return "answers stream natively (chat.startStream) in threads and DMs"
    return 'answers appear by editing (streaming = "edit")'


def _scope_note(headers: Mapping[str, str]) -> str:
    """What the token's scopes (Slack's `x-oauth-scopes` answer header) lack."""
    from adapters.slack.scopes import OPTIONAL, lacking

    granted = headers.get("x-oauth-scopes")
    if granted is None:
        return ""  # not reported: nothing to compare
    required, optional = lacking({s.strip() for s in granted.split(",")})
    reinstall = "add them to the app (deploy/slack-app-manifest.yaml) and reinstall it"
    if required:
        raise RuntimeError(f"the bot token lacks the scopes {', '.join(required)}: {reinstall}")
    if not optional:
        return ""
    features = ", ".join(f"{s} ({OPTIONAL[s]})" for s in optional)
    return f"; without {features}: {reinstall}"
