"""Tool calls as chat messages, by verbosity.

"all": one message per `toolCallId` (slot ``tool:<id>``): "🔧 bash  `ls -la`",
then the tail of the cumulative `partialResult` in a code block (paced), then
"✅/❌ bash · 1.2 s" with the tail of the result; a result over `LONG_OUTPUT`
characters is also uploaded as a file. Inside a run (`run`), each op of the message
also carries the call as a `Task` card (title, status, a short output tail), which a
chat that streams the run shows instead of the message. "compact": one message per run listing
its tools (slot ``tools:<scope>``). "off": nothing. The verbosity is fixed
when a tool starts, so a change applies to new tools only. Invariants: an
update or end for an unknown id creates the message then; an ended call is
forgotten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge.model import Op, Task, TaskStatus, Upload
from bridge.render.textbits import clip, code_block, duration, inline_code, one_line, tail
from bridge.render.views import Pacer, Slot, in_run
from bridge.rpc.content import ToolResult, text_of

if TYPE_CHECKING:
    from bridge.model import Verbosity
    from bridge.render.views import Context
    from bridge.rpc.events import ToolExecutionEnd, ToolExecutionStart, ToolExecutionUpdate

LONG_OUTPUT = 3000  # characters of a result worth a file attachment
SUMMARY_CHARS = 200
# A task card's title and output: Slack's task_update fields take 256 characters.
TASK_TEXT = 250
TASK_LINES = 3
_PATH_TOOLS = frozenset({"read", "write", "edit"})


def summarize(name: str, args: Any) -> str:
    """A one-line view of a tool's arguments: the command, the path, or clipped JSON."""
    if isinstance(args, dict):
        key = "command" if name == "bash" else "path" if name in _PATH_TOOLS else None
        value = args.get(key) or args.get("file_path") if key else None
        if isinstance(value, str):
            return one_line(value, SUMMARY_CHARS)
    if not args:
        return ""
    raw = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    return clip(raw, SUMMARY_CHARS)


def result_text(result: ToolResult | str | None) -> str:
    if isinstance(result, ToolResult):
        return text_of(result.content)
    return result or ""


@dataclass
class ToolCall:
    id: str
    name: str
    summary: str
    started: float | None
    mode: Verbosity
    slot: Slot
    pacer: Pacer
    output: str = ""

    def took(self, now: float) -> str:
        return f" · {duration(now - self.started)}" if self.started is not None else ""


@dataclass
class ToolList:
    """The compact view: one line per tool of a run, in one message."""

    slot: Slot
    pacer: Pacer
    lines: dict[str, str] = field(default_factory=dict)


class Tools:
    def __init__(self, ctx: Context, output_lines: int) -> None:
        self._ctx = ctx
        self._output_lines = output_lines
        self._calls: dict[str, ToolCall] = {}
        self._lists: dict[str, ToolList] = {}
        self._tail_chars = max(80, min(1500, ctx.limits.max_text // 3))
        self.run = ""  # the run the calls belong to (`Send.run`); the renderer sets it

    # --- events ---------------------------------------------------------------------

    def start(self, event: ToolExecutionStart, now: float, mode: Verbosity, scope: str) -> list[Op]:
        call = self._call(event.toolCallId, event.toolName, event.args, now, mode)
        return self._show(call, scope, now, force=True)

    def update(
        self, event: ToolExecutionUpdate, now: float, mode: Verbosity, scope: str
    ) -> list[Op]:
        known = event.toolCallId in self._calls
        call = self._call(event.toolCallId, event.toolName, event.args, None, mode)
        if event.partialResult is not None:
            call.output = result_text(event.partialResult)  # cumulative: replace
        return self._show(call, scope, now, force=not known)

    def end(self, event: ToolExecutionEnd, now: float, mode: Verbosity, scope: str) -> list[Op]:
        call = self._call(event.toolCallId, event.toolName, None, None, mode)
        del self._calls[call.id]
        output = result_text(event.result)
        status: TaskStatus = "error" if event.isError else "complete"
        icon = "❌" if event.isError else "✅"
        # The agent's own measure where it sends one (1.x): right after a restart too,
        # when the bridge saw the start only in a replay.
        took = (
            call.took(now)
            if event.durationMs is None
            else f" · {duration(event.durationMs / 1000)}"
        )
        ops = self._final(call, scope, icon, took, output, now, status)
        if call.mode == "all" and len(output) > LONG_OUTPUT:
            ops.append(_upload(call, output))
        return ops

    def cut(self, now: float, why: str, scope: str) -> list[Op]:
        """Tools that will never end (the run or the agent stopped)."""
        ops: list[Op] = []
        for call in list(self._calls.values()):
            del self._calls[call.id]
            after = f"{call.took(now)} · {why}"
            ops += self._final(call, scope, "⚠️", after, call.output or why, now, "error")
        return ops

    def flush(self, now: float) -> list[Op]:
        ops: list[Op] = []
        for call in self._calls.values():
            if call.mode == "all" and call.pacer.dirty and call.pacer.due(now):
                ops += self._running(call, now, True)
        for tools in self._lists.values():
            if tools.pacer.dirty and tools.pacer.due(now):
                ops += self._paced(tools.slot, tools.pacer, self._list_md(tools), now, True)
        return ops

    def end_scope(self, scope: str) -> None:
        self._lists.pop(scope, None)

    # --- views ----------------------------------------------------------------------

    def _call(self, id_: str, name: str, args: Any, now: float | None, mode: Verbosity) -> ToolCall:
        call = self._calls.get(id_)
        if call is None:
            slot = Slot(f"tool:{id_}", silent=True)
            pacer = Pacer(self._ctx.limits.edit_interval)
            call = ToolCall(id_, name or "tool", summarize(name, args), now, mode, slot, pacer)
            self._calls[id_] = call
        return call

    def _show(self, call: ToolCall, scope: str, now: float, *, force: bool) -> list[Op]:
        if call.mode == "all":
            return self._running(call, now, force)
        if call.mode == "compact":
            return self._list_line(call, scope, f"{self._label(call)} …", now, force)
        return []

    def _final(
        self,
        call: ToolCall,
        scope: str,
        icon: str,
        after: str,
        output: str,
        now: float,
        status: TaskStatus,
    ) -> list[Op]:
        if call.mode == "all":
            md = f"{icon} {self._label(call)}{after}" + self._block(output)
            ops = self._paced(call.slot, call.pacer, md, now, True)
            return in_run(ops, self.run, _task(call, status, output))
        if call.mode == "compact":
            return self._list_line(call, scope, f"{self._label(call)} {icon}{after}", now, True)
        return []

    def _label(self, call: ToolCall) -> str:
        summary = clip(call.summary, 60) if call.mode == "compact" else call.summary
        return f"{call.name}  {inline_code(summary)}" if summary else call.name

    def _running(self, call: ToolCall, now: float, force: bool) -> list[Op]:
        ops = self._paced(call.slot, call.pacer, self._running_md(call), now, force)
        return in_run(ops, self.run, _task(call, "in_progress", call.output))

    def _running_md(self, call: ToolCall) -> str:
        return f"🔧 {self._label(call)}" + self._block(call.output)

    def _block(self, output: str) -> str:
        if not output.strip():
            return ""
        return "\n" + code_block(tail(output, self._output_lines, self._tail_chars))

    def _list_line(
        self, call: ToolCall, scope: str, line: str, now: float, force: bool
    ) -> list[Op]:
        tools = self._lists.get(scope)
        if tools is None:
            pacer = Pacer(self._ctx.limits.edit_interval)
            tools = self._lists[scope] = ToolList(Slot(f"tools:{scope}", silent=True), pacer)
        tools.lines[call.id] = line
        return self._paced(tools.slot, tools.pacer, self._list_md(tools), now, force)

    def _list_md(self, tools: ToolList) -> str:
        lines = [f"🔧 {line}" for line in tools.lines.values()]
        budget = self._ctx.limits.max_text * 3 // 4
        dropped = 0
        while len(lines) > 1 and sum(len(x) + 1 for x in lines) > budget:
            lines.pop(0)  # the newest tools matter most
            dropped += 1
        return (f"… {dropped} earlier\n" if dropped else "") + "\n".join(lines)

    def _paced(self, slot: Slot, pacer: Pacer, md: str, now: float, force: bool) -> list[Op]:
        if not (force or pacer.due(now)):
            pacer.dirty = True
            return []
        ops = slot.show(self._ctx.view(md))
        pacer.sent(now)
        return ops


def _task(call: ToolCall, status: TaskStatus, output: str) -> Task:
    """The call as a task card: the tool and its arguments, and the output's tail."""
    title = clip(f"{call.name} {call.summary}".strip(), TASK_TEXT)
    shown = tail(output, TASK_LINES, TASK_TEXT - 30) if output.strip() else ""
    return Task(call.id, title, status, shown)


def _upload(call: ToolCall, output: str) -> Upload:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", call.name) or "tool"
    short = re.sub(r"[^A-Za-z0-9]+", "", call.id.removeprefix("call_"))[:8] or "output"
    lines = output.count("\n") + 1
    return Upload(
        f"toolfile:{call.id}",
        f"{name}-{short}.txt",
        output.encode("utf-8"),
        caption=f"{call.name} output, {lines} lines",
    )
