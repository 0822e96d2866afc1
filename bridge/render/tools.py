"""Tool calls as chat messages, by verbosity.

"all": one message per `toolCallId` (slot ``tool:<id>``): "🔧 bash  `ls -la`",
then the tail of the cumulative `partialResult` in a code block (paced), then
"✅/❌ bash · 1.2 s" with the tail of the result; a result over `LONG_OUTPUT`
characters is also uploaded as a file. Inside a run (`run`), each op of the message
also carries the call as a `Task` card (title, status, a short output tail), which a
chat that streams the run shows instead of the message. "compact": one message per run listing
its tools (slot ``tools:<scope>``). "off": nothing. The verbosity is fixed
when a tool starts, so a change applies to new tools only. A call another tool
made (`parentToolCallId`, nested.py) gets no message of its own: it is a sub-line
of its root call's message, card and compact line, and a root that ended keeps
taking its children's late news until the run ends. Invariants: an update or end
for an unknown id creates the message then, and so does a nested call whose root is
unknown (a placeholder under the root's id, which its own events then name); an
ended call without children is forgotten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge.model import Op, Task, TaskStatus, Upload
from bridge.render.nested import TASK_LINES as TASK_SUB_LINES
from bridge.render.nested import Child, Children, sub_lines, tally
from bridge.render.textbits import clip, code_block, duration, inline_code, one_line, tail
from bridge.render.views import Pacer, Slot, in_run
from bridge.rpc.content import ToolResult, text_of
from bridge.rpc.events import ToolExecutionEnd

if TYPE_CHECKING:
    from bridge.model import Verbosity
    from bridge.render.views import Context
    from bridge.rpc.events import ToolExecutionStart, ToolExecutionUpdate

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
    children: Children = field(default_factory=Children)
    ended: Ending | None = None  # set when it ended; kept while children may report

    def took(self, now: float) -> str:
        return f" · {duration(now - self.started)}" if self.started is not None else ""


@dataclass(frozen=True)
class Ending:
    """How a call ended, as its message and card show it."""

    icon: str
    after: str  # " · 1.2 s", and why it was cut
    output: str
    status: TaskStatus


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
        self._ended: dict[str, ToolCall] = {}  # ended roots whose children may still report
        self._roots: dict[str, str] = {}  # nested call id → its root call's id
        self._tail_chars = max(80, min(1500, ctx.limits.max_text // 3))
        # Sub-lines of nested calls share a message with the output's tail: a quarter
        # of it, so a root with hundreds of children stays one message (nested.py).
        self._sub_chars = max(120, ctx.limits.max_text // 4)
        self.run = ""  # the run the calls belong to (`Send.run`); the renderer sets it

    # --- events ---------------------------------------------------------------------

    def start(self, event: ToolExecutionStart, now: float, mode: Verbosity, scope: str) -> list[Op]:
        if event.parentToolCallId:
            return self._nested(event, event.parentToolCallId, now, mode, scope)
        call = self._call(event.toolCallId, event.toolName, event.args, now, mode)
        return self._show(call, scope, now, force=True)

    def update(
        self, event: ToolExecutionUpdate, now: float, mode: Verbosity, scope: str
    ) -> list[Op]:
        if event.parentToolCallId:
            return self._nested(event, event.parentToolCallId, now, mode, scope)
        known = event.toolCallId in self._calls
        call = self._call(event.toolCallId, event.toolName, event.args, None, mode)
        if event.partialResult is not None:
            call.output = result_text(event.partialResult)  # cumulative: replace
        return self._show(call, scope, now, force=not known)

    def end(self, event: ToolExecutionEnd, now: float, mode: Verbosity, scope: str) -> list[Op]:
        if event.parentToolCallId:
            return self._nested(event, event.parentToolCallId, now, mode, scope)
        call = self._call(event.toolCallId, event.toolName, None, None, mode)
        del self._calls[call.id]
        output = result_text(event.result)
        status: TaskStatus = "error" if event.isError else "complete"
        icon = "❌" if event.isError else "✅"
        # The agent's own measure where it sends one (1.x): right after a restart too,
        # when the bridge saw the start only in a replay.
        ms = _duration_ms(event)
        took = call.took(now) if ms is None else f" · {duration(ms / 1000)}"
        ops = self._final(call, scope, Ending(icon, took, output, status), now)
        if call.mode == "all" and len(output) > LONG_OUTPUT:
            ops.append(_upload(call, output))
        return ops

    def cut(self, now: float, why: str, scope: str) -> list[Op]:
        """Tools that will never end (the run or the agent stopped)."""
        ops: list[Op] = []
        for call in list(self._calls.values()):
            del self._calls[call.id]
            call.children.cut()
            ending = Ending("⚠️", f"{call.took(now)} · {why}", call.output or why, "error")
            ops += self._final(call, scope, ending, now)
        for call in self._ended.values():
            if call.children.cut():  # an ended root's children that were still running
                assert call.ended is not None
                ops += self._final(call, scope, call.ended, now)
        return ops

    def flush(self, now: float, *, force: bool = False) -> list[Op]:
        ops: list[Op] = []
        for call in [*self._calls.values(), *self._ended.values()]:
            if call.mode == "all" and call.pacer.dirty and (force or call.pacer.due(now)):
                ops += self._message(call, now, True)
        for tools in self._lists.values():
            if tools.pacer.dirty and (force or tools.pacer.due(now)):
                ops += self._paced(tools.slot, tools.pacer, self._list_md(tools), now, True)
        return ops

    def end_scope(self, scope: str) -> None:
        self._lists.pop(scope, None)
        # The run is over: an ended root's children have nothing more to say.
        self._ended.clear()
        self._roots = {k: v for k, v in self._roots.items() if v in self._calls}

    # --- nested calls ---------------------------------------------------------------

    def _nested(
        self,
        event: ToolExecutionStart | ToolExecutionUpdate | ToolExecutionEnd,
        parent: str,
        now: float,
        mode: Verbosity,
        scope: str,
    ) -> list[Op]:
        """A call `parent` made: a sub-line of its root's message, never its own."""
        root, placeholder = self._root_of(parent, now, mode)
        self._roots[event.toolCallId] = root.id
        child = root.children.calls.get(event.toolCallId)
        if child is None:
            args = getattr(event, "args", None)
            name = event.toolName or "tool"
            started = None if isinstance(event, ToolExecutionEnd) else now
            child = Child(name, summarize(event.toolName, args), started)
            root.children.calls[event.toolCallId] = child
        elif not isinstance(event, ToolExecutionEnd):
            return []  # a nested call's output is its root's business: nothing to show
        if isinstance(event, ToolExecutionEnd):
            child.state = "error" if event.isError else "ok"
            took = _duration_ms(event)
            if took is not None:
                child.took = took / 1000
            elif child.started is not None:
                child.took = now - child.started
        if root.ended is not None:
            return self._final(root, scope, root.ended, now, force=False)
        return self._show(root, scope, now, force=placeholder)

    def _root_of(self, parent: str, now: float, mode: Verbosity) -> tuple[ToolCall, bool]:
        """The root call `parent` is or belongs to, and whether it was unknown until now
        (then a placeholder under the root's id: `<root>/<n>/…`, docs/rpc.md)."""
        root_id = self._roots.get(parent, parent)
        call = self._calls.get(root_id) or self._ended.get(root_id)
        if call is not None:
            return call, False
        root_id = parent.split("/", 1)[0] or parent
        call = self._calls.get(root_id) or self._ended.get(root_id)
        if call is not None:
            return call, False
        return self._call(root_id, "", None, now, mode), True

    # --- views ----------------------------------------------------------------------

    def _call(self, id_: str, name: str, args: Any, now: float | None, mode: Verbosity) -> ToolCall:
        call = self._calls.get(id_) or self._ended.pop(id_, None)
        if call is None:
            slot = Slot(f"tool:{id_}", silent=True)
            pacer = Pacer(self._ctx.limits.edit_interval)
            call = ToolCall(id_, name or "tool", summarize(name, args), now, mode, slot, pacer)
        elif call.ended is not None:
            call.ended = None  # a late event of its own: it runs again, as far as we know
        if name and call.name == "tool" and name != "tool":
            # A placeholder for an unknown root learns its name from the root's own events.
            call.name, call.summary = name, summarize(name, args) if args else call.summary
        self._calls[id_] = call
        return call

    def _show(self, call: ToolCall, scope: str, now: float, *, force: bool) -> list[Op]:
        if call.mode == "all":
            return self._message(call, now, force)
        if call.mode == "compact":
            return self._list_line(call, scope, f"{self._label(call)} …", now, force)
        return []

    def _final(
        self, call: ToolCall, scope: str, ending: Ending, now: float, *, force: bool = True
    ) -> list[Op]:
        call.ended = ending
        if call.children:
            self._ended[call.id] = call
        if call.mode == "all":
            return self._message(call, now, force)
        if call.mode == "compact":
            line = f"{self._label(call)} {ending.icon}{ending.after}"
            return self._list_line(call, scope, line, now, force)
        return []

    def _label(self, call: ToolCall) -> str:
        summary = clip(call.summary, 60) if call.mode == "compact" else call.summary
        return f"{call.name}  {inline_code(summary)}" if summary else call.name

    def _message(self, call: ToolCall, now: float, force: bool) -> list[Op]:
        """The call's own message (and card), running or ended."""
        ending = call.ended
        if ending is None:
            md = f"🔧 {self._label(call)}" + self._subs(call) + self._block(call.output)
            task = _task(call, "in_progress", call.output)
        else:
            md = f"{ending.icon} {self._label(call)}{ending.after}"
            md += self._subs(call) + self._block(ending.output)
            task = _task(call, ending.status, ending.output)
        ops = self._paced(call.slot, call.pacer, md, now, force)
        return in_run(ops, self.run, task)

    def _subs(self, call: ToolCall) -> str:
        if not call.children:
            return ""
        return "\n" + "\n".join(sub_lines(call.children, self._sub_chars))

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
        nested = tally(call.children)
        tools.lines[call.id] = f"{line} · {nested}" if nested else line
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
    """The call as a task card: the tool and its arguments, then its nested calls as
    sub-steps (their tally and the newest few) above the output's tail, all within
    the card's one output field."""
    title = clip(f"{call.name} {call.summary}".strip(), TASK_TEXT)
    if not call.children:
        shown = tail(output, TASK_LINES, TASK_TEXT - 30) if output.strip() else ""
        return Task(call.id, title, status, shown)
    out = tail(output, 2, TASK_TEXT // 3) if output.strip() else ""
    newest = list(call.children.calls.values())[-TASK_SUB_LINES:]
    steps = "\n".join([tally(call.children), *(c.line(code=False) for c in newest)])
    steps = clip(steps, TASK_TEXT - len(out) - 1)
    return Task(call.id, title, status, "\n".join(x for x in (steps, out) if x))


def _duration_ms(event: ToolExecutionEnd) -> float | None:
    """The agent's own `durationMs` of a call (1.x); None when absent or negative."""
    value = event.durationMs
    return value if value is not None and value >= 0 else None


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
