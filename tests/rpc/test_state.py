"""`RunState` follows what one agent is doing from its events, with no I/O.

Tables of event sequences (decoded from JSON lines as the agents write them) and
client inputs, with the phase and the `RunChange` every step must give; then whole
recorded transcripts replayed in their recorded order and timing, which must leave
the state idle with no tool in flight wherever the recording's summary says the run
finished.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.events import Response, UnknownEvent
from bridge.rpc.framing import OversizedRecord
from bridge.rpc.profile import ATOMIC, EARENDIL, EARENDIL_1, LEGACY, PI, Profile, disposition
from bridge.rpc.state import Phase, RunChange, RunState
from bridge.rpc.ui import OtherUIRequest
from tests.support.paths import TRANSCRIPTS, transcript_dir

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

STARTED, ENDED = RunChange.STARTED, RunChange.ENDED
IDLE, STARTING, RUNNING = Phase.IDLE, Phase.STARTING, Phase.RUNNING
RETRYING, SETTLING = Phase.RETRYING, Phase.SETTLING


def event(line: str) -> object:
    """One agent record, decoded the way the client decodes it."""
    decoded = decode_record(line.encode())
    assert not isinstance(decoded, MalformedRecord | OversizedRecord | UnknownEvent), decoded
    return decoded


def assistant(stop: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [], "stopReason": stop}


def agent_end(stop: str = "stop", will_retry: bool | None = None) -> str:
    record: dict[str, Any] = {"type": "agent_end", "messages": [assistant(stop)]}
    if will_retry is not None:
        record["willRetry"] = will_retry
    return json.dumps(record)


AGENT_START = '{"type":"agent_start"}'
TURN_START = '{"type":"turn_start"}'
SETTLED = '{"type":"agent_settled"}'
RETRY_START = '{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000}'
RETRY_GAVE_UP = '{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"500"}'
MESSAGE_UPDATE = (
    '{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"hi"}}'
)

# A step is an agent record (a JSON line) or one of the client's own inputs.
PROMPT_SENT = "<prompt_sent>"
ANSWERED_OK = "<prompt_answered ok>"
ANSWERED_FAILED = "<prompt_answered failed>"
EXTENSION_COMMAND_DONE = "<prompt_answered ok, no run>"
SETTLE = "<settle>"
EXITED = "<agent_exited>"

INPUTS: dict[str, Callable[[RunState], RunChange | None]] = {
    PROMPT_SENT: lambda s: s.prompt_sent(),
    ANSWERED_OK: lambda s: s.prompt_answered(True),
    ANSWERED_FAILED: lambda s: s.prompt_answered(False),
    EXTENSION_COMMAND_DONE: lambda s: s.prompt_answered(True, starts_run=False),
    SETTLE: lambda s: s.settle(),
    EXITED: lambda s: s.agent_exited(),
}


def step(state: RunState, what: str, now: float = 0.0) -> RunChange | None:
    if what in INPUTS:
        return INPUTS[what](state)
    return state.apply(event(what), now)


# (id, profile, [(step, RunChange it returns, phase after it), ...])
Sequence = list[tuple[str, RunChange | None, Phase]]
BOUNDARIES: list[tuple[str, Profile, Sequence]] = [
    (
        "pi-plain-run",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (ANSWERED_OK, None, RUNNING),
            (AGENT_START, None, RUNNING),
            (TURN_START, None, RUNNING),
            (MESSAGE_UPDATE, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "pi-retry-is-not-the-end",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (ANSWERED_OK, None, RUNNING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (RETRY_START, None, RETRYING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (RETRY_START, None, RETRYING),
            (AGENT_START, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "pi-retries-given-up-end-after-the-grace",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (RETRY_START, None, RETRYING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (RETRY_GAVE_UP, None, SETTLING),
            (SETTLE, ENDED, IDLE),
            (SETTLE, None, IDLE),
        ],
    ),
    (
        "pi-error-with-no-retry-ends-on-settle",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (SETTLE, ENDED, IDLE),
        ],
    ),
    (
        "pi-retry-without-its-announcement",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, SETTLING),
            (AGENT_START, None, RUNNING),
            (SETTLE, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "pi-will-retry-false-ends-at-once",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error", will_retry=False), ENDED, IDLE),
        ],
    ),
    (
        "pi-will-retry-true-waits",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error", will_retry=True), None, RETRYING),
            (RETRY_START, None, RETRYING),
            (AGENT_START, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "pi-aborted-run-ends-at-once",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("aborted"), ENDED, IDLE),
        ],
    ),
    (
        "earendil-ends-only-on-agent-settled",
        EARENDIL,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (ANSWERED_OK, None, RUNNING),
            (AGENT_START, None, RUNNING),
            (agent_end(will_retry=False), None, RUNNING),
            (SETTLE, None, RUNNING),
            (SETTLED, ENDED, IDLE),
            (SETTLED, None, IDLE),
        ],
    ),
    (
        "earendil-retry",
        EARENDIL,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error", will_retry=True), None, RETRYING),
            (RETRY_START, None, RETRYING),
            (AGENT_START, None, RUNNING),
            (agent_end("error", will_retry=False), None, RUNNING),
            (RETRY_GAVE_UP, None, RUNNING),
            (SETTLED, ENDED, IDLE),
        ],
    ),
    (
        "atomic-error-without-will-retry-waits-for-settled",
        ATOMIC,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end("error"), None, RUNNING),
            (SETTLED, ENDED, IDLE),
        ],
    ),
    (
        "atomic-lost-agent-start",
        ATOMIC,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (ANSWERED_OK, None, RUNNING),
            (TURN_START, None, RUNNING),
            (agent_end(), None, RUNNING),
            (SETTLED, ENDED, IDLE),
        ],
    ),
    (
        "an-in-run-event-while-idle-starts-a-run",
        PI,
        [
            (MESSAGE_UPDATE, STARTED, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "a-stray-end-while-idle-changes-nothing",
        EARENDIL,
        [
            (agent_end(), None, IDLE),
            (SETTLED, None, IDLE),
            (SETTLE, None, IDLE),
        ],
    ),
    (
        "a-rejected-prompt-ends-the-run",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (ANSWERED_FAILED, ENDED, IDLE),
        ],
    ),
    (
        "an-extension-command-ends-with-its-answer",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (EXTENSION_COMMAND_DONE, ENDED, IDLE),
        ],
    ),
    (
        "a-second-prompt-while-busy-starts-nothing",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (PROMPT_SENT, None, STARTING),
            (AGENT_START, None, RUNNING),
            (PROMPT_SENT, None, RUNNING),
            (ANSWERED_FAILED, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "agent-start-before-the-prompt-answer",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (ANSWERED_OK, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
    (
        "exit-mid-run-ends-it",
        PI,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (EXITED, ENDED, IDLE),
            (EXITED, None, IDLE),
        ],
    ),
    (
        "exit-while-retrying-ends-it",
        EARENDIL,
        [
            (AGENT_START, STARTED, RUNNING),
            (agent_end("error", will_retry=True), None, RETRYING),
            (EXITED, ENDED, IDLE),
        ],
    ),
    (
        "legacy-run",
        LEGACY,
        [
            (PROMPT_SENT, STARTED, STARTING),
            (AGENT_START, None, RUNNING),
            (agent_end(), ENDED, IDLE),
        ],
    ),
]


@pytest.mark.parametrize(
    ("profile", "steps"), [(p, s) for _, p, s in BOUNDARIES], ids=[i for i, _, _ in BOUNDARIES]
)
def test_a_run_starts_and_ends_where_the_rules_say(profile: Profile, steps: Sequence) -> None:
    state = RunState(profile=profile)
    for number, (what, change, phase) in enumerate(steps):
        assert step(state, what) is change, (number, what)
        assert state.phase is phase, (number, what)
        assert state.busy is (phase is not IDLE), (number, what)
    ended = sum(change is ENDED for _, change, _ in steps)
    assert state.runs_ended == ended


def test_a_retry_announced_after_the_grace_starts_a_new_run() -> None:
    # pi: the grace after an error's agent_end passed (the client called settle()),
    # then auto_retry_start arrives: the agent is working again, so busy must come
    # with a STARTED, or consumers see an ENDED for a run they never saw start.
    state = RunState(profile=PI)
    steps = [PROMPT_SENT, AGENT_START, agent_end("error"), SETTLE, RETRY_START]
    changes = [step(state, s) for s in steps]
    assert changes == [STARTED, None, None, ENDED, STARTED]
    assert state.busy


# --- tools, dialogs, queue, compaction ---------------------------------------------------


def tool_start(call: str, name: str = "bash") -> str:
    return json.dumps(
        {"type": "tool_execution_start", "toolCallId": call, "toolName": name, "args": {"n": 1}}
    )


def tool_update(call: str, text: str) -> str:
    content = [{"type": "text", "text": text}]
    return json.dumps(
        {"type": "tool_execution_update", "toolCallId": call, "partialResult": {"content": content}}
    )


def tool_end(call: str, error: bool = False) -> str:
    return json.dumps({"type": "tool_execution_end", "toolCallId": call, "isError": error})


# (step, now, {toolCallId: (name, latest output, started_at)} after it)
TOOL_STEPS: list[tuple[str, float, dict[str, tuple[str, str, float]]]] = [
    (AGENT_START, 1.0, {}),
    (tool_start("c1"), 2.0, {"c1": ("bash", "", 2.0)}),
    (tool_update("c1", ""), 2.1, {"c1": ("bash", "", 2.0)}),
    (tool_update("c1", "line 1\n"), 2.2, {"c1": ("bash", "line 1\n", 2.0)}),
    (tool_update("c1", "line 1\nline 2\n"), 2.3, {"c1": ("bash", "line 1\nline 2\n", 2.0)}),
    (
        tool_start("c2", "read"),
        3.0,
        {"c1": ("bash", "line 1\nline 2\n", 2.0), "c2": ("read", "", 3.0)},
    ),
    (
        tool_update("nobody", "x"),
        3.1,
        {"c1": ("bash", "line 1\nline 2\n", 2.0), "c2": ("read", "", 3.0)},
    ),
    (tool_end("c1"), 4.0, {"c2": ("read", "", 3.0)}),
    (tool_end("nobody"), 4.1, {"c2": ("read", "", 3.0)}),
    (tool_start("c3"), 5.0, {"c2": ("read", "", 3.0), "c3": ("bash", "", 5.0)}),
    (tool_end("c2", error=True), 6.0, {"c3": ("bash", "", 5.0)}),
    (agent_end("aborted"), 7.0, {}),  # a tool cut off without its end event
]


def test_tools_are_tracked_by_tool_call_id_from_start_to_end() -> None:
    state = RunState()
    for number, (what, now, tools) in enumerate(TOOL_STEPS):
        state.apply(event(what), now)
        seen = {k: (t.name, t.output, t.started_at) for k, t in state.tools.items()}
        assert seen == tools, number
        assert all(t.tool_call_id == k for k, t in state.tools.items())
    assert state.phase is IDLE


def test_a_tool_keeps_its_arguments() -> None:
    state = RunState()
    state.apply(event(tool_start("c1")), 0.0)
    assert state.tools["c1"].args == {"n": 1}


def ui_request(method: str, request_id: str = "d1", **fields: Any) -> str:
    return json.dumps(
        {"type": "extension_ui_request", "id": request_id, "method": method, **fields}
    )


@pytest.mark.parametrize(
    ("line", "opened_at", "expires_at"),
    [
        (ui_request("select", options=["Yes", "No"], timeout=5000), 10.0, 15.0),
        (ui_request("confirm", message="sure?", timeout=1500), 2.0, 3.5),
        (ui_request("input", placeholder="name", timeout=250), 0.0, 0.25),
        (ui_request("editor", prefill="text"), 1.0, None),
        (ui_request("select", options=["a"], timeout=0), 1.0, None),
    ],
    ids=["select-5s", "confirm-1.5s", "input-250ms", "editor-no-timeout", "zero-timeout"],
)
def test_a_dialog_expires_at_its_own_timeout(
    line: str, opened_at: float, expires_at: float | None
) -> None:
    state = RunState()
    assert state.apply(event(line), opened_at) is None
    dialog = state.dialogs["d1"]
    assert dialog.opened_at == opened_at
    assert dialog.expires_at == expires_at
    if expires_at is None:
        assert state.expire_dialogs(opened_at + 10**9) == []
        assert "d1" in state.dialogs
        return
    assert state.expire_dialogs(expires_at - 0.001) == []
    assert state.expire_dialogs(expires_at) == [dialog]
    assert state.dialogs == {}
    assert state.expire_dialogs(expires_at + 1) == []


@pytest.mark.parametrize(
    "line",
    [
        ui_request("notify", message="hi"),
        ui_request("setStatus", statusKey="mcp"),
        ui_request("setWidget", widgetKey="workflow.run"),
        ui_request("setTitle", title="t"),
        ui_request("set_editor_text", text="t"),
        ui_request("somethingNew", timeout=100),
    ],
    ids=["notify", "setStatus", "setWidget", "setTitle", "set_editor_text", "unknown-method"],
)
def test_a_request_that_is_not_a_dialog_is_not_tracked(line: str) -> None:
    state = RunState()
    decoded = decode_record(line.encode())
    assert not isinstance(decoded, MalformedRecord | OversizedRecord)
    state.apply(decoded, 0.0)
    assert state.dialogs == {}
    assert state.phase is IDLE


def test_an_unknown_ui_method_stays_an_other_ui_request() -> None:
    assert isinstance(decode_record(ui_request("somethingNew").encode()), OtherUIRequest)


def test_an_answered_dialog_is_forgotten_and_others_stay() -> None:
    state = RunState()
    state.apply(event(ui_request("select", "d1", options=["a"])), 0.0)
    state.apply(event(ui_request("confirm", "d2", timeout=1000)), 0.0)
    state.dialog_answered("d1")
    state.dialog_answered("never-asked")
    assert list(state.dialogs) == ["d2"]
    assert [d.request.id for d in state.expire_dialogs(1.0)] == ["d2"]


# (step, steering, follow_up, compacting) after it
QUEUE_AND_COMPACTION: list[tuple[str, tuple[str, ...], tuple[str, ...], bool]] = [
    ('{"type":"queue_update","steering":["S1"],"followUp":[]}', ("S1",), (), False),
    (
        '{"type":"queue_update","steering":["S1"],"followUp":["F1","F2"]}',
        ("S1",),
        ("F1", "F2"),
        False,
    ),
    ('{"type":"queue_update","steering":[],"followUp":["F2"]}', (), ("F2",), False),
    ('{"type":"compaction_start","reason":"manual"}', (), ("F2",), True),
    ('{"type":"compaction_end","reason":"manual","result":{}}', (), ("F2",), False),
    ('{"type":"auto_compaction_start","reason":"threshold"}', (), ("F2",), True),
    ('{"type":"auto_compaction_end","aborted":true}', (), ("F2",), False),
    ('{"type":"compaction_start"}', (), ("F2",), True),
    ('{"type":"compaction","summary":"s","tokensBefore":10}', (), ("F2",), False),
    ('{"type":"queue_update"}', (), (), False),
]


def test_queue_updates_and_compaction_are_followed() -> None:
    state = RunState()
    for number, (what, steering, follow_up, compacting) in enumerate(QUEUE_AND_COMPACTION):
        assert state.apply(event(what), float(number)) is None
        assert (state.steering, state.follow_up, state.compacting) == (
            steering,
            follow_up,
            compacting,
        ), number
    assert state.phase is IDLE  # neither starts a run


def test_agent_exited_clears_everything() -> None:
    state = RunState(profile=EARENDIL)
    for what in [
        AGENT_START,
        tool_start("c1"),
        ui_request("select", options=["Yes"], timeout=60_000),
        '{"type":"queue_update","steering":["S"],"followUp":["F"]}',
        '{"type":"compaction_start"}',
    ]:
        state.apply(event(what), 0.0)
    state.apply(event(RETRY_START), 0.0)
    assert (state.tools, state.dialogs, state.compacting, state.retry_attempt) != ({}, {}, False, 0)
    assert state.agent_exited() is ENDED
    assert state.phase is IDLE
    assert not state.busy
    assert state.tools == {}
    assert state.dialogs == {}
    assert (state.steering, state.follow_up) == ((), ())
    assert state.compacting is False
    assert state.retry_attempt == 0
    assert state.runs_ended == 1


def test_a_retry_attempt_is_counted_and_reset() -> None:
    state = RunState()
    state.prompt_sent()
    state.apply(event(agent_end("error")), 0.0)
    state.apply(event('{"type":"auto_retry_start","attempt":2}'), 0.0)
    assert state.retry_attempt == 2
    state.apply(event('{"type":"auto_retry_end","success":true,"attempt":2}'), 0.0)
    assert state.retry_attempt == 0


# --- whole recordings ---------------------------------------------------------------------

PROFILES = {"v0731": PI, "e0871": EARENDIL, "atomic": ATOMIC, "o0132": LEGACY, "p152": EARENDIL_1}
SETTLE_GRACE = 0.5  # what the client waits after an error's agent_end (client.py)
EXTENSION_COMMANDS = {"probe"}  # what get_commands lists with source "extension"

# Runs the client counts that are no agent loop in the summary: an extension command
# (its prompt answers when the handler is done) and prompts the agent rejected.
EXTRA_RUNS = {
    "c6_probe_dialogs": 1,  # "/probe some args"
    "j_invalid": 1,  # a prompt without message
    "e0871/i_image": 1,  # 0.87.1 rejects the old image `source` shape
    "p152/c6_command": 1,  # "/rpc-prefill": answered "handled"
    "p152/j_bad_input": 1,  # a prompt without message
}

TIMELINE_LINE = re.compile(r"^\s*(\d+\.\d+)\s+([<>])\s?(.*)$")
TIMELINE_CLOSE = re.compile(r"^\s*(\d+\.\d+) ## closed via (\w+)")


@dataclass
class Replay:
    """A recording replayed through `RunState` the way the client drives it."""

    state: RunState
    changes: list[RunChange]
    at_close: float
    closed_by: str


def replay(timeline: Path) -> Replay:
    """Replay `timeline` (both directions, with times): stdout records in order, stdin
    lines as the client's inputs, settle() after the grace, expiry as time passes."""
    folder, name = timeline.parent, timeline.name.removesuffix(".timeline.txt")
    replayer = _Replayer(
        RunState(profile=PROFILES[folder.name]),
        out=[r for r in (folder / f"{name}.stdout.jsonl").read_bytes().split(b"\n") if r],
        sent=(folder / f"{name}.stdin.jsonl").read_bytes().split(b"\n"),
    )
    at_close, closed_by = 0.0, "unknown"
    for line in timeline.read_text(encoding="utf-8").splitlines():
        if closed := TIMELINE_CLOSE.match(line):
            at_close, closed_by = float(closed[1]), closed[2]
        elif match := TIMELINE_LINE.match(line):
            replayer.line(float(match[1]), match[2], match[3])
    assert replayer.out == [], "every stdout record has its line in the timeline"
    replayer.time_passes(at_close)
    return Replay(replayer.state, replayer.changes, at_close, closed_by)


@dataclass
class _Replayer:
    """`RunState` driven by a recording's lines, as the client drives it."""

    state: RunState
    out: list[bytes]  # stdout records not replayed yet
    sent: list[bytes]  # stdin lines not replayed yet
    changes: list[RunChange] = field(default_factory=list)
    # Per prompt sent: whether it starts a run; None: not ours to track.
    prompts: list[bool | None] = field(default_factory=list)
    settling_since: float | None = None

    def record(self, change: RunChange | None) -> None:
        if change is not None:
            self.changes.append(change)

    def time_passes(self, now: float) -> None:
        since = self.settling_since
        if self.state.phase is SETTLING and since is not None and now >= since + SETTLE_GRACE:
            self.record(self.state.settle())
        self.state.expire_dialogs(now)

    def line(self, now: float, direction: str, text: str) -> None:
        self.time_passes(now)
        if direction == "<":
            self.received(now)
        elif self.sent and self.sent[0].decode("utf-8", "replace").startswith(text):
            # A timeline line that is no prefix of the next stdin line is the second
            # half of a command written in two parts.
            self.wrote(_json_object(self.sent.pop(0)))

    def received(self, now: float) -> None:
        decoded = decode_record(self.out.pop(0))
        if isinstance(decoded, Response):
            if decoded.command == "prompt" and self.prompts:
                starts = self.prompts.pop(0)
                said = disposition(decoded)  # 1.x tells; older agents leave it to the guess
                if starts is not None:
                    starts = starts if said is None else said == "started"
                    self.record(self.state.prompt_answered(decoded.success, starts))
            return
        self.record(self.state.apply(decoded, now))
        if self.state.phase is SETTLING:
            self.settling_since = now

    def wrote(self, command: dict[str, Any]) -> None:
        if command.get("type") == "prompt":
            if command.get("streamingBehavior") is None and self.state.prompt_sent():
                self.record(STARTED)
                text = str(command.get("message", ""))
                self.prompts.append(text[1:].split(" ")[0] not in EXTENSION_COMMANDS)
            else:
                self.prompts.append(None)
        elif command.get("type") == "extension_ui_response":
            self.state.dialog_answered(str(command["id"]))


def _json_object(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def summary_sections(folder: Path, name: str) -> list[str] | None:
    """The event lines the summary lists for process `name`, or None without a summary."""
    path = folder / f"{name.split('-p')[0]}.summary.txt"
    if not path.is_file():
        return None
    events: list[str] = []
    section = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("== process "):
            section = line.removeprefix("== process ").split(":")[0]
        elif line.startswith("=="):
            section = None
        elif section == name:
            events.append(line.strip().split(" x")[0])
    return events


def loops_finished(events: list[str], profile: Profile) -> tuple[int, bool]:
    """Agent loops the summary shows as over, and whether the last one started is."""
    if profile.settled_event:
        # 1.x's summaries say `agent_settled(aborted=…)`
        ends = [i for i, e in enumerate(events) if e.startswith("agent_settled")]
    else:
        ends = [
            i
            for i, e in enumerate(events)
            if e == "agent_end" and events[i + 1 : i + 2] != ["auto_retry_start"]
        ]
    starts = [i for i, e in enumerate(events) if e == "agent_start"]
    return len(ends), not starts or bool(ends and ends[-1] > starts[-1])


def timelines() -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(
        t
        for folder in PROFILES
        for t in transcript_dir(folder).glob("*.timeline.txt")
        if (t.parent / t.name.replace(".timeline.txt", ".stdout.jsonl")).is_file()
    )


@pytest.mark.parametrize("timeline", timelines(), ids=lambda t: f"{t.parent.name}/{t.name}")
def test_a_recorded_session_replays_to_idle_where_its_summary_says_the_run_finished(
    timeline: Path,
) -> None:
    folder, name = timeline.parent, timeline.name.removesuffix(".timeline.txt")
    result = replay(timeline)
    events = summary_sections(folder, name)
    finished = True
    if events is not None:
        loops, finished = loops_finished(events, PROFILES[folder.name])
        extra = EXTRA_RUNS.get(name, 0) + EXTRA_RUNS.get(f"{folder.name}/{name}", 0)
        assert result.changes.count(ENDED) == loops + extra
    assert result.changes == [STARTED, ENDED] * result.changes.count(ENDED) + (
        [] if finished else [STARTED]
    )
    if finished:
        assert result.state.phase is IDLE
        assert result.state.tools == {}
        assert result.state.agent_exited() is None
    else:
        # Killed mid-run (k_resume-p3: the exit ends the run and its tool), or ended
        # mid-answer by stdin closed with SIGTERM (p152/k_term_run: the rest unsent).
        assert result.closed_by in ("kill", "term")
        assert result.state.phase is RUNNING
        assert result.state.tools != {} or result.closed_by == "term"
        assert result.state.agent_exited() is ENDED
        assert result.state.tools == {}


def test_the_replays_cover_every_agent_folder() -> None:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"the recorded transcripts are not next to this checkout ({TRANSCRIPTS})")
    assert {t.parent.name for t in timelines()} == set(PROFILES)
