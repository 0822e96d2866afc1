"""A scripted stand-in for pi in RPC mode, for the conversation's own tests.

Run as a process (`python tests/conversation/standin_pi.py`) in place of pi. It
speaks just enough of the protocol for a conversation's parts to be driven without
a model: it answers `get_state`, and `get_available_thinking_levels` only with
`STANDIN_PROFILE=earendil` (so the client takes it for 0.87.1, with `clear_queue`;
otherwise for 0.73.1). A prompt starts a run that stays on until an `abort`, or
until a steer of exactly END ends it: everything queued is then taken (shown as the
run's user messages), and the run ends as the profile's does. A steer of exactly
EXIT ends the process (exit code 3), as a crash would; one of exactly COMPACT starts
a compaction that ends on its own a moment later. A prompt that is
`dialog <json>` also opens an extension dialog with those fields (`id` ui-1, ui-2, …).
Steers and follow-ups queue and are listed in `queue_update`s (so does a prompt with
a `streamingBehavior` while a run is on); `clear_queue` gives them back. Every
command it reads is appended, as read, to `standin.log` in its working directory:
what the agent got.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

END = "END"
EXIT = "EXIT"
COMPACT = "COMPACT"
COMPACTING = 0.5  # seconds
_out = threading.Lock()  # a compaction's end is written from a timer's thread
LOG = Path("standin.log")
EARENDIL = os.environ.get("STANDIN_PROFILE") == "earendil"


class Agent:
    def __init__(self) -> None:
        self.busy = False
        self.steering: list[str] = []
        self.follow_up: list[str] = []
        self.dialogs = 0

    def command(self, command: dict[str, object]) -> None:
        kind = str(command.get("type"))
        handler = getattr(self, "on_" + kind, None)
        if handler is None:
            # As pi 0.73.1 answers what it does not know: without the command's id.
            failed(kind, f"Unknown command: {kind}")
            return
        handler(command)

    def on_get_state(self, command: dict[str, object]) -> None:
        state = {"isStreaming": self.busy, "sessionFile": None, "messageCount": 0}
        answer(command, state)

    def on_get_available_thinking_levels(self, command: dict[str, object]) -> None:
        if not EARENDIL:
            failed("get_available_thinking_levels", "Unknown command")
            return
        answer(command, {"levels": ["off"]})

    def on_prompt(self, command: dict[str, object]) -> None:
        text = str(command.get("message", ""))
        behaviour = command.get("streamingBehavior")
        if self.busy and behaviour:  # as pi: queued while a run is on, a run otherwise
            (self.on_follow_up if behaviour == "followUp" else self.on_steer)(command)
            return
        answer(command)
        if not self.busy:
            self.busy = True
            emit({"type": "agent_start"})
        said(text)
        if text.startswith("dialog "):
            self.dialogs += 1
            fields = json.loads(text.removeprefix("dialog "))
            emit({"type": "extension_ui_request", "id": f"ui-{self.dialogs}", **fields})

    def on_steer(self, command: dict[str, object]) -> None:
        answer(command)
        if command.get("message") == EXIT:
            sys.exit(3)
        if command.get("message") == END:
            self.end()
            return
        if command.get("message") == COMPACT:
            emit({"type": "compaction_start", "reason": "threshold"})
            threading.Timer(COMPACTING, emit, [{"type": "compaction_end"}]).start()
            return
        self.steering.append(str(command.get("message", "")))
        self.queue_update()

    def on_follow_up(self, command: dict[str, object]) -> None:
        answer(command)
        self.follow_up.append(str(command.get("message", "")))
        self.queue_update()

    def on_clear_queue(self, command: dict[str, object]) -> None:
        answer(command, {"steering": self.steering, "followUp": self.follow_up})
        self.steering = []
        self.follow_up = []
        self.queue_update()

    def on_abort(self, command: dict[str, object]) -> None:
        answer(command)
        if self.busy:
            self.finish()  # what is queued waits for the next run, as pi's does

    def on_extension_ui_response(self, command: dict[str, object]) -> None:
        pass  # logged: the test reads what the agent was answered

    def end(self) -> None:
        """The run takes what is queued, then ends."""
        for text in [*self.steering, *self.follow_up]:
            said(text)
        self.steering = []
        self.follow_up = []
        self.queue_update()
        self.finish()

    def finish(self) -> None:
        self.busy = False
        emit({"type": "agent_end", "messages": []})
        if EARENDIL:
            emit({"type": "agent_settled"})

    def queue_update(self) -> None:
        emit({"type": "queue_update", "steering": self.steering, "followUp": self.follow_up})


def said(text: str) -> None:
    """A user message of the run: how pi shows what it took."""
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    emit({"type": "message_start", "message": message})
    emit({"type": "message_end", "message": message})


def answer(command: dict[str, object], data: object = None) -> None:
    response = {"id": command.get("id"), "type": "response", "command": command.get("type")}
    emit({**response, "success": True, "data": data})


def failed(kind: str, error: str) -> None:
    emit({"type": "response", "command": kind, "success": False, "error": error})


def emit(record: dict[str, object]) -> None:
    with _out:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def main() -> None:
    agent = Agent()
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        with LOG.open("a") as log:
            log.write(line + "\n")
        try:
            command = json.loads(line)
        except ValueError as exc:  # the client's start-up probe is not JSON
            failed("parse", f"Failed to parse command: {exc}")
            continue
        if isinstance(command, dict):
            agent.command(command)


if __name__ == "__main__":
    main()
