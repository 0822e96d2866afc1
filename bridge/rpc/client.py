"""The async client for one agent: `async with AgentClient(spec) as agent`.

Its parts: the link to the agent (`links.py`: its own pipes, or its host's socket,
`hostlink.py`), requests answered by id (`requests.py` over the pure
`correlation.py`), the run state (`state.py`, pure), the legacy shim (`legacy.py`).
Here: the tasks and their order. The reader updates `RunState` before an event is
delivered, so `agent.state` is never behind what a consumer has seen; events,
problems and the client's own signals (`RunStarted`, `RunEnded`, `DialogExpired`, ...)
go, in order, to one bounded stream (`events`): a slow consumer slows the agent
instead of growing memory. The agent's exit fails every pending request with
`AgentExited` (exit code, stderr tail). Closing cancels pending dialogs and aborts a
run before ending the agent, each step bounded, shielded; `detach` instead leaves a
hosted agent running.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import TYPE_CHECKING, Self

import anyio

from bridge.rpc.agent_event import AgentEvent
from bridge.rpc.commands import (
    Abort,
    Command,
    FollowUp,
    GetCommands,
    GetState,
    Outgoing,
    Prompt,
    Steer,
    StreamingBehavior,
    UIResponse,
    encode_command,
)
from bridge.rpc.decode import Decoded, decode_record
from bridge.rpc.detect import detect
from bridge.rpc.errors import AgentExited, ClientClosed, CommandFailed, RpcError
from bridge.rpc.events import AgentSettled, ErrorEvent, Response, ToolExecutionEnd
from bridge.rpc.framing import DEFAULT_MAX_RECORD
from bridge.rpc.hostlink import HostLink, HostPlan
from bridge.rpc.legacy import LegacyShim
from bridge.rpc.links import Link, open_link
from bridge.rpc.pipes import PIPE_GONE
from bridge.rpc.profile import (
    EARENDIL,
    PI,
    Disposition,
    Profile,
    disposition,
    extension_commands,
    refine,
)
from bridge.rpc.requests import Requests
from bridge.rpc.signals import (
    AgentGone,
    DialogExpired,
    OrphanResponse,
    RunEnded,
    RunStarted,
)
from bridge.rpc.state import Phase, RunChange, RunState

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from bridge.rpc.content import ImageContent
    from bridge.rpc.framing import Frame
    from bridge.rpc.hostlink import TakeBack
    from bridge.rpc.process import AgentSpec

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0  # state commands answer in ms; prompt after preflight (~1 s)
# auto_retry_start follows an error's agent_end within ~2 ms (x_retry).
SETTLE_GRACE = 0.5
ABORT_ON_CLOSE_TIMEOUT = 2.0
EVENT_BUFFER = 4096
STDERR_LOGGED = 500  # characters of an exited agent's stderr tail in its DEBUG line
DIALOG_TICK = 0.2  # how often agent-side dialog deadlines are checked


class AgentClient:
    """One running agent. Use as an async context manager; read `events`."""

    def __init__(
        self,
        spec: AgentSpec,
        *,
        profile: Profile | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
        max_record: int = DEFAULT_MAX_RECORD,
        event_buffer: int = EVENT_BUFFER,
        clock: Callable[[], float] = time.monotonic,
        dialog_timeout: float | None = None,
        host: HostPlan | None = None,
        reattach: TakeBack | None = None,
    ) -> None:
        """`host`: start the agent under a host that outlives the client (`hostlink.py`);
        `reattach`: (host, last seq applied[, the records up to it a snapshot kept])
        of one started before."""
        self.spec = spec
        self._host, self._reattach = host, reattach
        self.profile = profile or PI
        self._detect = profile is None
        self.state = RunState(profile=self.profile, dialog_timeout=dialog_timeout)
        self.initial_state: dict[str, object] = {}
        self._max_record = max_record
        self._clock = clock
        send, receive = anyio.create_memory_object_stream[AgentEvent](event_buffer)
        self._send: MemoryObjectSendStream[AgentEvent] = send
        self.events: MemoryObjectReceiveStream[AgentEvent] = receive
        self.link: Link | None = None  # how it is reached (a host's: `HostLink`)
        self._tg: TaskGroup | None = None
        self._stack: contextlib.AsyncExitStack | None = None  # the task group, while open
        self._requests = Requests(self._write, request_timeout)
        self._exited, self._reader_gone = anyio.Event(), anyio.Event()  # reader done/cancelled
        self._exit: AgentExited | None = None
        self._closing = self._detaching = False  # detaching: leave the agent to its host
        self._legacy = LegacyShim(self.state, self._write, self._emit, self._open)
        self._extension_commands: frozenset[str] | None = None
        self._settle_generation = 0

    # --- lifecycle -----------------------------------------------------------------

    async def __aenter__(self) -> Self:
        stack = self._stack = contextlib.AsyncExitStack()
        stack.callback(self._send.close)  # last, whatever the task group raised
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(self._tg.cancel_scope.cancel)  # first: the tasks end with the client
        try:
            started = time.monotonic()
            self.link = await open_link(self.spec, self._host, self._reattach, self._max_record)
            log.debug("agent %d: started", self.link.pid)
            self.link.start(self._tg)
            self._tg.start_soon(self._read_stdout)
            self._tg.start_soon(self._watch_dialogs)
            if self._detect:
                tail = lambda: self.stderr_tail  # noqa: E731
                self.profile, self.initial_state = await detect(
                    self._requests, self._write_bytes, tail
                )
                self.state.profile = self.profile
            log.debug(
                "agent %d: %s, ready in %.2f s",
                self.link.pid,
                self.profile.name,
                time.monotonic() - started,
            )
        except BaseException:
            await self._finish()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._finish()

    async def aclose(self) -> None:
        await self._finish()

    def detach(self) -> None:
        """When this client closes, leave a hosted agent running instead of ending it
        (a bridge restart); the next client `reattach`es with `link.last_seq`."""
        self._detaching = isinstance(self.link, HostLink)

    async def _finish(self) -> None:
        stack, self._stack, self._tg = self._stack, None, None
        if stack is None:
            return
        with anyio.CancelScope(shield=True):
            await self._shutdown()
        # The task group's own scope must be exited outside the shield it is not in. The
        # stack exits it as if nothing had been raised: the body's own exception
        # propagates by itself, and handed to the task group it would come out wrapped
        # in an ExceptionGroup.
        await stack.aclose()

    async def _shutdown(self) -> None:
        link = self.link
        if link is None:
            return
        if self._detaching and isinstance(link, HostLink):
            self._closing = True
            return await link.detach()
        if not self._exited.is_set() and not self.profile.is_legacy:
            with anyio.move_on_after(ABORT_ON_CLOSE_TIMEOUT):
                try:
                    await self._cancel_dialogs()
                    if self.state.busy:
                        await self.request(Abort(), limit=ABORT_ON_CLOSE_TIMEOUT)
                except RpcError:
                    pass  # the agent is going away anyway
        self._closing = True
        await link.terminate()
        # Let the reader report the exit (AgentGone), unless it was cancelled with
        # its caller (a reap): then nobody would ever set `_exited`.
        with anyio.move_on_after(1):
            await self._reader_gone.wait()

    @property
    def pid(self) -> int:
        assert self.link is not None, "agent not started"
        return self.link.pid

    @property
    def returncode(self) -> int | None:
        return None if self.link is None else self.link.returncode

    @property
    def alive(self) -> bool:
        return self.link is not None and not self._exited.is_set()

    @property
    def stderr_tail(self) -> str:
        return self.link.stderr_tail if self.link is not None else ""

    async def wait(self) -> int | None:
        """Until the agent has exited and every event has been queued."""
        await self._exited.wait()
        return self.returncode

    # --- commands ------------------------------------------------------------------

    async def request(
        self, command: Command, *, limit: float | None = None, check: bool = True
    ) -> Response:
        """Send a command and wait for its response (`math.inf`: no time limit)."""
        if self.profile.is_legacy:
            return await self._legacy.request(command)
        return await self._requests.request(command, limit=limit, check=check)

    async def prompt(
        self,
        text: str,
        images: Sequence[ImageContent] = (),
        *,
        streaming_behavior: StreamingBehavior | None = None,
    ) -> Response:
        """Start a run (or queue into one with `streaming_behavior`)."""
        if self.profile.is_legacy:
            return await self._legacy.send("prompt", text, images)
        # 1.x says in its answer whether a run began; older agents leave it to a guess.
        told = self.profile.dispositions
        runs = True if told else await self._starts_run(text)
        started = streaming_behavior is None and self.state.prompt_sent()
        if started:
            await self._emit_change(RunChange.STARTED)
        command = Prompt(
            message=text, images=list(images) or None, streamingBehavior=streaming_behavior
        )
        # An extension command answers only when its handler is done: no limit (where
        # the agent tells, any `/name` may be one).
        unlimited = not runs or (told and text.startswith("/"))
        try:
            response = await self.request(
                command, limit=math.inf if unlimited else None, check=False
            )
        except RpcError:
            if started:
                await self._emit_change(self.state.prompt_answered(False))
            raise
        said = self._told(response)
        if said is not None:
            runs = said == "started"  # "handled": no run, no agent_settled to wait for
        if started:
            await self._emit_change(self.state.prompt_answered(response.success, runs))
        if not response.success:
            raise CommandFailed("prompt", response.error)
        return response

    async def steer(self, text: str, images: Sequence[ImageContent] = ()) -> Response:
        """Into the running run; `disposition(answer)` says, where the agent tells,
        whether it waits in the queue or was dealt with at once ("handled")."""
        if not self.profile.native_queue:
            return await self._legacy.send("steer", text, images)
        if not self.profile.clear_queue:
            # 0.7x cannot hand a steer back, and one that reaches it just after its run
            # took its last look at the queue (a message right behind a short run's
            # prompt) would wait there for a prompt that may never come: lost. A prompt
            # marked "steer" is queued while a run is on and starts a run otherwise,
            # decided by the agent itself as it reads it (docs/rpc.md).
            return await self.prompt(text, images, streaming_behavior="steer")
        answer = await self.request(Steer(message=text, images=list(images) or None))
        self._told(answer)
        return answer

    async def follow_up(self, text: str, images: Sequence[ImageContent] = ()) -> Response:
        if not self.profile.native_queue:
            return await self._legacy.send("follow_up", text, images)
        answer = await self.request(FollowUp(message=text, images=list(images) or None))
        self._told(answer)
        return answer

    def _told(self, answer: Response) -> Disposition | None:
        """The answer's disposition; one at all shows a 1.x agent (profile.refine)."""
        said = disposition(answer)
        if said is not None:
            self._refine(shows_1x=True)
        return said

    def _refine(self, shows_1x: bool) -> None:
        self.profile = self.state.profile = refine(self.profile, shows_1x)

    async def abort(self) -> None:
        """Stop the run. Pending dialogs are cancelled in the same breath: with one
        open, the agent holds the abort until it is answered (docs/rpc.md, "Abort cancels
        dialogs first")."""
        if self.profile.is_legacy:
            self._legacy.clear()
            await self._write(Abort())
            return
        await self._cancel_dialogs()
        await self.request(Abort())

    async def answer_dialog(
        self,
        request_id: str,
        *,
        value: str | None = None,
        confirmed: bool | None = None,
        cancelled: bool = False,
    ) -> None:
        """Answer an extension dialog; an unknown id is ignored by the agent."""
        self.state.dialog_answered(request_id)
        await self._write(
            UIResponse(id=request_id, value=value, confirmed=confirmed, cancelled=cancelled or None)
        )

    async def get_state(self) -> dict[str, object]:
        response = await self.request(GetState())
        return response.data if isinstance(response.data, dict) else {}

    async def _cancel_dialogs(self) -> None:
        for request_id in list(self.state.dialogs):
            await self.answer_dialog(request_id, cancelled=True)

    async def _starts_run(self, text: str) -> bool:
        """False for `/name` extension commands, which run no agent loop of their own."""
        if not text.startswith("/"):
            return True
        if self._extension_commands is None:
            try:
                self._extension_commands = extension_commands(await self.request(GetCommands()))
            except RpcError:
                self._extension_commands = frozenset()
        name = text[1:].split(maxsplit=1)[0] if len(text) > 1 else ""
        return name not in self._extension_commands

    def _open(self) -> bool:
        return not self._closing and self._exit is None

    async def _write(self, command: Outgoing) -> None:
        line = encode_command(command)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("agent %d: sends %s %s", self.pid, command.type, command.id)
        await self._write_bytes(line)

    async def _write_bytes(self, line: bytes) -> None:
        if self._closing:
            raise ClientClosed("the agent client is closing")
        if self._exit is not None:
            raise self._exit
        assert self.link is not None
        try:
            await self.link.write(line)
        except PIPE_GONE as exc:
            await self._exited.wait()
            raise self._exit or AgentExited(self.returncode, self.stderr_tail) from exc

    # --- reading ---------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        assert self.link is not None
        try:
            await self.link.read(self._dispatch)
            if self._detaching:
                self._send.close()  # the agent lives on under its host: no exit here
            else:
                await self._on_exit()
        finally:
            self._reader_gone.set()

    async def _on_exit(self) -> None:
        assert self.link is not None
        await self.link.wait()
        self._exit = AgentExited(self.link.returncode, self.stderr_tail)
        log.debug(
            "agent %d: exited (%s): %s",
            self.link.pid,
            self.link.returncode,
            self.stderr_tail[-STDERR_LOGGED:],
        )
        self._requests.fail_all(self._exit)
        change = self.state.agent_exited()
        self._legacy.clear()
        if change is not None:
            await self._emit(RunEnded())
        await self._emit(AgentGone(self.link.returncode, self.stderr_tail))
        self._exited.set()
        self._send.close()

    async def _dispatch(self, frame: Frame) -> None:
        decoded: Decoded = decode_record(frame) if isinstance(frame, bytes) else frame
        if log.isEnabledFor(logging.DEBUG):
            _log_record(self.pid, decoded)
        if isinstance(decoded, Response):
            if not self._requests.answer(decoded):
                await self._emit(OrphanResponse(decoded))
            return
        if isinstance(decoded, ErrorEvent) and self._requests.probe_answered_by_error():
            return
        if isinstance(decoded, AgentSettled | ToolExecutionEnd) and self.profile is EARENDIL:
            self._refine(shows_1x=_has_1x_fields(decoded))
        change = self.state.apply(decoded, self._clock())
        if change is RunChange.STARTED:
            await self._emit(RunStarted())  # before the event that started the run
        await self._emit(decoded)
        if change is not RunChange.STARTED:
            await self._emit_change(change)
        if self.state.phase is Phase.SETTLING:
            self._settle_generation += 1
            assert self._tg is not None
            self._tg.start_soon(self._settle_after_grace, self._settle_generation)

    async def _settle_after_grace(self, generation: int) -> None:
        await anyio.sleep(SETTLE_GRACE)
        if generation == self._settle_generation:
            await self._emit_change(self.state.settle())

    async def _watch_dialogs(self) -> None:
        while True:
            await anyio.sleep(DIALOG_TICK)
            for dialog in self.state.expire_dialogs(self._clock()):
                if dialog.cancel_at_deadline and self._open():  # the agent would wait forever
                    with contextlib.suppress(AgentExited, ClientClosed):
                        await self._write(UIResponse(id=dialog.request.id, cancelled=True))
                await self._emit(DialogExpired(dialog))

    async def _emit_change(self, change: RunChange | None) -> None:
        if change is RunChange.STARTED:
            await self._emit(RunStarted())
        elif change is RunChange.ENDED:
            await self._emit(RunEnded())
            if self.profile.is_legacy:
                await self._legacy.run_ended()

    async def _emit(self, item: AgentEvent) -> None:
        # Nobody listening any more is fine: the state is still kept.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._send.send(item)


def _has_1x_fields(event: AgentSettled | ToolExecutionEnd) -> bool:
    if isinstance(event, AgentSettled):
        return event.aborted is not None
    return event.durationMs is not None


# Streamed deltas: one per token; the records around them tell the story.
_QUIET = frozenset({"message_update", "tool_execution_update", "bash_execution_update"})


def _log_record(pid: int, decoded: Decoded) -> None:
    """What the agent wrote, by kind (never its content: message text stays out of logs)."""
    if isinstance(decoded, Response):
        outcome = "ok" if decoded.success else "failed"
        log.debug("agent %d: answers %s %s (%s)", pid, decoded.command, decoded.id, outcome)
        return
    kind = getattr(decoded, "type", None) or type(decoded).__name__
    if kind not in _QUIET:
        log.debug("agent %d: %s", pid, kind)
