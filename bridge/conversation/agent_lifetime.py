"""The agent's lifetime in one conversation: spawn, back-off, pump, run-time limit,
session adoption and reap.

An agent is spawned on demand (`ensure`) within the supervisor's live-agent cap,
started with `--session <file>` when the conversation has one, so a respawn
after a crash, a reap or a bridge restart resumes where it was (the legacy agent's
file the bridge names itself: `name_session`). Crash loops back off
exponentially. Its events are pumped to the conversation
(`LifetimeConversation.on_event`); a ticker flushes throttled output and enforces
the run-time limit (abort, then kill). When the process ends, whatever the reason,
the slot is released and the conversation hears `AgentGone` through the same event
stream.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.backoff import Backoff
from bridge.containment.sandbox import contain
from bridge.controls.session_files import new_session_name
from bridge.conversation.context_use import context_in_use
from bridge.conversation.hosts import Hosting
from bridge.conversation.shared import Holder
from bridge.files.send_file import SentFiles
from bridge.paths import GATE_EXTENSION
from bridge.rpc.client import AgentClient
from bridge.rpc.errors import AgentExited, AgentStartError, RpcError
from bridge.rpc.process import AgentSpec
from bridge.rpc.signals import AgentGone, RunEnded

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anyio.abc import TaskGroup, TaskStatus

    from bridge.conversation.hosts import Reattach
    from bridge.conversation.shared import Services
    from bridge.model import ChatRef, Op
    from bridge.projects.project import Projects
    from bridge.render import Renderer
    from bridge.rpc.agent_event import AgentEvent
    from bridge.store.records import ConversationRecord

log = logging.getLogger(__name__)

LEAVING_LIMIT = 2.0  # s for the last snapshot of a run as the bridge detaches
TICK = 0.25  # renderer flushes throttled text; well under any platform's edit interval
KILL_AFTER_ABORT = 15.0  # a run past max_run_time that ignores abort is killed
# Restart back-off: an agent that dies this soon after starting counts as a crash loop.
CRASH_WINDOW = 60.0
# Before the second start within CRASH_WINDOW 2 s, then doubling, at most 60 s.
RESTART_BACKOFF = Backoff(first=1.0, cap=60.0)


class LifetimeConversation(Holder, Protocol):
    """The conversation an agent lives in, as its lifetime sees it (and as the
    live-agent caps count it)."""

    chat: ChatRef
    projects: Projects  # where the agent works

    @property
    def renderer(self) -> Renderer: ...

    @property
    def record(self) -> ConversationRecord | None: ...

    def submit(self, ops: Sequence[Op]) -> None: ...

    async def on_event(self, agent: AgentClient, event: AgentEvent, now: float) -> None: ...

    async def save(self, **changes: object) -> None: ...


class AgentLife:
    def __init__(self, conversation: LifetimeConversation, services: Services) -> None:
        self._conversation = conversation
        # The agent's send_file calls; a lambda, as the conversation makes `projects`
        # after this.
        self._sent = SentFiles(lambda cwd: conversation.projects.sight(cwd))
        self.services = services
        self.agent: AgentClient | None = None
        self.spawning = False
        self.closing = False  # reaped on purpose: its exit is no crash to report
        self._scope: anyio.CancelScope | None = None
        self._done = anyio.Event()
        self._spawns: list[float] = []
        self._run_started: float | None = None
        self._aborted_for_time = False
        self._paused: float | None = None  # since when a person holds the run up
        self.hosting = Hosting(conversation, services)  # its host, when it outlives the bridge
        self._reattach: Reattach | None = None  # set while taking a host back
        self.detaching = False  # left running under its host: its end is no crash

    @property
    def busy(self) -> bool:
        return self.spawning or (self.agent is not None and self.agent.state.busy)

    async def ensure(self, tg: TaskGroup) -> AgentClient:
        """The live agent, spawned first if there is none (in `tg`, so it outlives the
        intent that needed it); waits for a slot under the live-agent cap."""
        if self.agent is not None and self.agent.alive:
            return self.agent
        await self._backoff()
        self.spawning = True
        try:
            await self.services.gate.acquire(self._conversation)
            try:
                agent: AgentClient = await tg.start(self._run)
            except BaseException as exc:
                self.services.gate.release(self._conversation)
                if isinstance(exc, AgentExited):
                    # Its event pump, which reports a crash, never ran: said here, or
                    # the message that needed the agent would go without a word.
                    raise AgentStartError(f"The agent stopped as it started ({exc})") from exc
                raise
        finally:
            self.spawning = False
        return agent

    async def reattach(self, tg: TaskGroup) -> bool:
        """Take back the agent an earlier bridge left under its host; False when there
        is none to take (it is gone, and its record with it)."""
        plan = await self.hosting.prepare()
        if plan is None:
            await self.hosting.gone()
            return False
        self._reattach = plan
        # Running already: it cannot wait for a slot.
        self.services.gate.admit(self._conversation)
        try:
            await self.ensure(tg)
        except RpcError as exc:
            log.warning(
                "conversation %s: its agent's host is gone: %s", self._conversation.key, exc
            )
            await self.hosting.gone()
            return False
        finally:
            self._reattach = None
        return True

    async def detach(self) -> None:
        """Leave the agent running under its host (the bridge stops); without a host,
        as `reap`."""
        agent = self.agent
        if agent is not None and self.hosting.plan is not None:
            with anyio.move_on_after(LEAVING_LIMIT):  # a store that hangs delays no stop
                await self.hosting.leaving(agent)
            agent.detach()
            self.detaching = True
        await self.reap()

    async def reap(self) -> None:
        """Stop the agent (its session file stays; the next message resumes it)."""
        scope = self._scope
        if scope is None:
            return
        self.closing = True
        scope.cancel()
        await self._done.wait()

    def run_started(self, now: float) -> None:
        self._run_started = now
        self._aborted_for_time = False
        self._paused = None
        self.services.stats.runs_started += 1

    def run_ended(self) -> None:
        """The run-time limit stops counting; an agent under the cap may now be idle."""
        self._run_started = None
        self.services.stats.runs_ended += 1
        self.services.gate.changed()

    def waiting(self, asked: int, now: float) -> None:
        """`asked` approvals wait for a person: the run-time limit does not count that
        wait (the run is not running away; it is held up on purpose)."""
        if asked and self._paused is None:
            self._paused = now
        elif not asked and self._paused is not None:
            if self._run_started is not None:
                self._run_started += now - self._paused
            self._paused = None

    async def adopt_session(self, agent: AgentClient) -> None:
        """Remember the agent's session file, so a respawn resumes it."""
        record = self._conversation.record
        if agent.profile.is_legacy or record is None:
            return
        try:
            state = await agent.get_state()
        except RpcError as exc:
            log.warning("conversation %s: get_state failed: %s", self._conversation.key, exc)
            return
        session_file = state.get("sessionFile")
        if isinstance(session_file, str) and session_file != record.session_file:
            await self._conversation.save(session_file=session_file)

    async def name_session(self) -> None:
        """Name the session file of an agent without `--session-dir` (the legacy 0.13):
        it would write under its config dir, which the sandbox makes anew at every
        start, and answers no `get_state` to say where. Named in the session dir, it
        is resumed at the next start and listed by /sessions."""
        record = self._conversation.record
        if self.services.options.agent.session_flags or record is None or record.session_file:
            return
        name = new_session_name(self.services.wall())
        await self._conversation.save(session_file=str(Path(record.session_dir) / name))

    def spec(
        self, workspace: Path, git_dirs: tuple[Path, ...] = (), contained: bool = True
    ) -> AgentSpec:
        """The agent's command line, environment and sandbox, working in `workspace`
        (`Projects.workspace`); `git_dirs` are the repository's dirs its worktree needs."""
        options = self.services.options
        key = self._conversation.key
        argv = list(options.argv(key))
        record = self._conversation.record
        assert record is not None
        if options.agent.session_flags:
            argv += ["--session-dir", record.session_dir]
            # A recorded file that is gone was told by `_tell_lost_session`: this runs
            # in a worker thread, where nothing may be submitted to the outbox.
            if record.session_file and os.path.isfile(record.session_file):
                argv += ["--session", record.session_file]
        elif record.session_file:
            # The legacy 0.13 writes the `--session` file it is given, but reads its
            # history back only with `--continue` (its main.js); see `name_session`.
            argv += ["--session", record.session_file, "--continue"]
        workspace.mkdir(parents=True, exist_ok=True)
        session_dir = Path(record.session_dir)
        session_dir.mkdir(parents=True, exist_ok=True)
        env = dict(options.agent.env)
        # Not for the legacy agent (no session flags): it has no extensions, and would
        # take the extension's path for a first message.
        if options.agent.session_flags:
            # Asking is the gate's; deciding what needs a person is the bridge's (it
            # knows the grants), except that in "all" the gate must ask about every tool.
            # Loaded with approvals "off" too: a plan (/plan) is kept read-only by it.
            argv += ["-e", str(GATE_EXTENSION)]
            env["PI_APPROVAL_GATE"] = "all" if options.approvals.mode == "all" else "changes"
        spec = AgentSpec(argv=argv, cwd=workspace, env=env)
        if not contained:
            return AgentSpec(argv=argv, cwd=workspace.resolve(), env=env)
        return contain(spec, options, key, session_dir, git_dirs)

    async def _backoff(self) -> None:
        now = self.services.clock()
        recent = [t for t in self._spawns if now - t < CRASH_WINDOW]
        self._spawns = recent
        if len(recent) >= 2:
            delay = RESTART_BACKOFF.delay(len(recent))
            notice = f"⏳ The agent keeps stopping; trying again in {delay:g} s."
            self._conversation.submit(self._conversation.renderer.notice(notice))
            await anyio.sleep(delay)
        self._spawns.append(self.services.clock())

    async def _tell_lost_session(self) -> None:
        """The session file the record names is gone, or (a worker of a scale-out
        without shared storage) was never on this machine: say so rather than start a
        new session silently."""
        record = self._conversation.record
        if record is None or not record.session_file:
            return
        if not self.services.options.agent.session_flags:
            return  # the legacy agent writes the file it is given
        if not await anyio.Path(record.session_file).is_file():
            self._conversation.notify(
                "⚠️ The earlier session's history could not be resumed here (its file "
                "is not in this bridge's data dir); this starts a new session."
            )

    async def _run(self, *, task_status: TaskStatus[AgentClient]) -> None:
        self.closing = False
        self._done = anyio.Event()
        self.detaching = False
        await self.name_session()
        workspace = await self._conversation.projects.workspace()
        reattach = self._reattach
        # The sandbox's config copy and the folders are file work: off the event loop.
        # A running agent's sandbox is not made again: its config copy is in use.
        git_dirs = self._conversation.projects.git_dirs()
        await self._tell_lost_session()
        spec = await anyio.to_thread.run_sync(self.spec, workspace, git_dirs, reattach is None)
        log.debug("conversation %s: starting its agent", self._conversation.key)
        client = AgentClient(
            spec,
            clock=self.services.clock,
            dialog_timeout=self.services.options.dialog_timeout,
            host=self.hosting.plan if reattach is None else None,
            reattach=(reattach[0], reattach[1], reattach[3]) if reattach is not None else None,
            profile=reattach[2] if reattach is not None else None,
        )
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with client as agent:
                    self.agent = agent
                    await self.hosting.started(agent)
                    self.hosting.caught_up(agent)  # nothing to replay: nothing held
                    await self.adopt_session(agent)
                    log.debug("conversation %s: agent %d ready", self._conversation.key, agent.pid)
                    task_status.started(agent)
                    await self._pump(agent)
        finally:
            client.events.close()  # the reading end is ours (the client closes its own)
            self.agent = None
            self._scope = None
            self._run_started = None
            self.services.gate.release(self._conversation)
            self._done.set()

    async def _pump(self, agent: AgentClient) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._ticker, agent, tg)
            async for event in agent.events:
                self.services.stats.event(event)
                try:
                    if isinstance(event, RunEnded):  # its final line names its changed files
                        changed = await self._conversation.projects.run_ended()
                        self._conversation.renderer.changed(changed)
                        self._conversation.renderer.context_used(await context_in_use(agent))
                        self.hosting.run_ended(agent, tg)
                    elif isinstance(event, AgentGone) and not self.detaching:
                        await self.hosting.gone()
                    await self._conversation.on_event(agent, event, self.services.clock())
                    await self._send_files(agent, event)
                    self.hosting.caught_up(agent)
                    self.hosting.progress(agent, event, tg)
                except Exception:
                    log.exception("conversation %s: event handling failed", self._conversation.key)
            tg.cancel_scope.cancel()

    async def _send_files(self, agent: AgentClient, event: AgentEvent) -> None:
        sent = await self._sent.seen(event, agent.spec.cwd)
        if isinstance(sent, str):
            self._conversation.notify(sent)
        else:  # a file posted before a restart is not posted again by its replay
            self._conversation.submit([op for op in sent if not self.hosting.posted(op)])

    async def _ticker(self, agent: AgentClient, tg: TaskGroup) -> None:
        while True:
            await anyio.sleep(TICK)
            now = self.services.clock()
            self._conversation.submit(self._conversation.renderer.tick(now))
            self.hosting.progress(agent, None, tg)  # a snapshot due while the agent is quiet
            await self._enforce_run_time(agent, now)

    async def _enforce_run_time(self, agent: AgentClient, now: float) -> None:
        started = self._run_started
        limit = self.services.options.max_run_time
        if started is None or self._paused is not None or now - started < limit:
            return
        if not self._aborted_for_time:
            self._aborted_for_time = True
            self._conversation.renderer.overtime()
            self._conversation.notify(f"⏱ The run passed the {limit:g} s limit; stopping it.")
            with anyio.move_on_after(5):
                await agent.abort()
        elif now - started > limit + KILL_AFTER_ABORT and self._scope is not None:
            self._scope.cancel()


def crashed(event: AgentGone) -> str:
    """What the chat is told when its agent stopped on its own."""
    tail = event.stderr_tail.strip().splitlines()[-1:] if event.stderr_tail else []
    detail = f": {tail[0][:300]}" if tail else ""
    return (
        f"⚠️ The agent stopped (exit {event.returncode}){detail}. "
        "Your session is kept; your next message resumes it."
    )
