"""Slack end to end: fake Slack (Web API, and Socket Mode or signed HTTP deliveries) →
bolt → SlackAdapter → Bridge → real pi agent (against the scripted fake LLM) → back
into the thread.

Assertions are on what the Slack thread shows, as a user would see it. The journeys
the issue names run over both transports (`transport`)."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from adapters.slack.runner import PREFIXES, slack_intake
from adapters.slack.settings import SlackSettings
from bridge.model import PlatformLimits
from bridge.paths import SEND_FILE_EXTENSION
from bridge.service import Bridge
from tests.support.agents import DEFAULT_VERSION, extension_path
from tests.support.bridge_harness import options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_slack import ALICE, DM_CHANNEL, FakeSlack
from tests.support.flaky_store import open_flaky
from tests.support.journeys import (
    ASK_ANSWER,
    NOT_REACHED,
    STEERED,
    UNSTEERED,
    agent_got,
    requests_with,
    script_dialog,
    script_long_run,
    script_steerable_run,
)
from tests.support.loopback import free_port, until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM
    from tests.support.fake_slack import Posted

pytestmark = [pytest.mark.anyio, pytest.mark.agent]


# Fast platform: these tests watch behaviour, not Slack's pacing.
LIMITS = PlatformLimits(
    max_text=12_000, max_button_data=2_000, edit_interval=0.2, chat_rate=100.0, global_rate=1000.0
)
WAIT = 60.0  # generous: real agents start slowly on a busy two-core CI machine
BOB = "U0BOB"  # allowed in, but neither the thread's starter nor an approver
CAROL = "U0CAROL"  # in the user group LEADS, which approves
LEADS = "S0LEADS"


@pytest.fixture(params=["socket", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.asynccontextmanager
async def slack_bridge(
    home: AgentHome,
    version: str,
    tmp_path: Path,
    *extra: str,
    transport: str = "socket",
    store_failures: int = 0,
    stream: bool = True,
    on: FakeSlack | None = None,
    **overrides: object,
) -> AsyncIterator[FakeSlack]:
    """The fake Slack with the whole bridge on it; the store's first `store_failures`
    checks of a delivery id fail (tests/support/flaky_store.py); `stream=False`:
    answers are posted and edited (`[slack] streaming = "edit"`); `on`: a fake
    already running (a bridge restart keeps Slack's messages); `overrides`: more of
    the bridge's options."""
    fields: dict[str, object] = {
        "allowed_users": frozenset({ALICE, BOB, LEADS}),
        "approvers": frozenset({LEADS}),
        **overrides,
    }
    opts = options(tmp_path / "data", home.argv(version, *extra), home.env(), **fields)
    store = await open_flaky(opts.data_dir, store_failures)
    port = free_port()
    events_url = f"http://127.0.0.1:{port}/slack/events" if transport == "http" else ""
    try:
        async with contextlib.AsyncExitStack() as stack:
            slack = on
            if slack is None:
                fresh = FakeSlack(events_url=events_url, usergroups={LEADS: [CAROL]})
                slack = await stack.enter_async_context(fresh)
            settings = SlackSettings(
                bot_token=slack.bot_token,
                api_base_url=slack.base_url,
                **(
                    {"signing_secret": slack.signing_secret, "http_port": port}
                    if transport == "http"
                    else {"app_token": slack.app_token}
                ),
                http_host="127.0.0.1",
            )
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)
            adapter = SlackAdapter(client, limits=LIMITS, stream=stream)

            async def owns(key: str) -> bool:
                return await store.get_conversation(key) is not None

            async with (
                Bridge(adapter, store, opts, prefixes=PREFIXES) as bridge,
                slack_intake(settings, bridge, adapter, owns, user_groups=[LEADS]),
            ):
                yield slack
    finally:
        await store.aclose()


def find(slack: FakeSlack, thread: str | None, text: str) -> Posted | None:
    for message in reversed(list(slack.messages.values())):
        if not message.deleted and message.thread_ts == thread and text in message.visible:
            return message
    return None


async def until_shown(slack: FakeSlack, thread: str | None, text: str) -> Posted:
    await slack.wait_until(lambda: find(slack, thread, text) is not None, WAIT)
    found = find(slack, thread, text)
    assert found is not None
    return found


async def test_a_mention_starts_a_thread_and_streams_the_answer_into_it(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    answer = "Hello from the agent, streamed into the thread one word after another."
    fake_llm.add("hello", Reply(text=answer, delay=0.05))
    async with slack_bridge(agent_home, version, tmp_path, stream=False) as slack:
        root = (await slack.mention("hello there"))["payload"]["event"]["ts"]
        reply = await until_shown(slack, root, answer)
        await until_shown(slack, root, "done")
        assert any(c.args.get("ts") == reply.ts for c in slack.called("chat.update"))
        assert all(m.thread_ts == root for m in slack.messages.values())
        follow = "FOLLOW-KIWI"
        fake_llm.add(follow, Reply(text="Kiwi noted."))
        await slack.thread_message(f"{follow} please", root)
        await until_shown(slack, root, "Kiwi noted.")
    assert sum(1 for r in fake_llm.requests if "hello there" in r.last_user_text) == 1


async def test_a_thread_shows_its_tool_calls_takes_a_steer_and_ignores_slacks_retry(
    version: str, transport: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_steerable_run(fake_llm)
    # The edit path, where a tool call is a message of its own (streamed, it is a task
    # card in the answer's stream: test_streams_e2e.py).
    async with slack_bridge(
        agent_home, version, tmp_path, transport=transport, stream=False
    ) as slack:
        mention = await slack.mention("do it slowly")
        root = mention["payload"]["event"]["ts"]
        retry = await slack.redeliver(mention)  # Slack's retry of the same event
        tool = await until_shown(slack, root, "bash")
        steer = await slack.thread_message("STEER-PURPLE instead", root)
        steer_ts = steer["payload"]["event"]["ts"]
        answer = await until_shown(slack, root, STEERED)
        await until_shown(slack, root, "done")
        # The steer shows it reached the run, then how the run ended, like the mention.
        await until(lambda: slack.reactions.get(steer_ts) == ["white_check_mark"], WAIT)
        added = [c.args["name"] for c in slack.called("reactions.add")]
        assert added.count("eyes") == 2  # the mention's and the steer's
        assert slack.reactions.get(root) == ["white_check_mark"]
        assert tool.ts != answer.ts, "the tool call is its own thread reply"
        assert all(m.thread_ts == root for m in slack.messages.values())
        assert find(slack, root, UNSTEERED) is None
        await slack.acked(retry)
    assert requests_with(fake_llm, "do it slowly") == 1, "the retried mention ran twice"
    assert requests_with(fake_llm, "STEER-PURPLE") == 1
    if transport == "http":
        assert set(slack.answers.values()) == {200}, slack.answers


@pytest.mark.parametrize("presser", [ALICE, CAROL], ids=["starter", "approver by group"])
async def test_a_dangerous_commands_yes_is_refused_to_others_and_runs_for_approvers(
    version: str,
    transport: str,
    presser: str,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    gate = str(extension_path(version, "permission-gate.ts"))
    # The sum is printed only if the command runs: its text never shows in the call.
    fake_llm.add(
        "clean",
        Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build; echo CLEANED-$((40+2))"})]),
        Reply(text="Finished cleaning."),
    )
    async with slack_bridge(
        agent_home, version, tmp_path, "-e", gate, transport=transport
    ) as slack:
        root = (await slack.mention("clean the build"))["payload"]["event"]["ts"]
        dialog = await until_shown(slack, root, "[Yes]")
        assert "rm -rf build" in dialog.visible
        yes = action_id(dialog, "Yes")
        await slack.acked(await slack.press(dialog.ts, yes, user=BOB))
        refusal = await slack.wait_for(
            "chat.postEphemeral", lambda c: c.args.get("user") == BOB, WAIT
        )
        assert "Only" in str(refusal.args.get("text")) + str(refusal.args.get("blocks"))
        assert "[Yes]" in slack.messages[dialog.ts].visible, "a refused press took the buttons"
        await slack.acked(await slack.press(dialog.ts, yes, user=presser))
        await until_shown(slack, root, "Finished cleaning.")
        await until_shown(slack, root, "chose: Yes")
        # The dialog was an ordinary message beside the run's stream, which holds the
        # answer and the approved command's task card.
        assert dialog.stream is None
        await until_shown(slack, root, "✅ done")
        [streamed] = [m for m in slack.messages.values() if m.stream is not None]
        assert streamed.stream is not None
        assert streamed.stream.text == "Finished cleaning."
        [card] = streamed.stream.tasks.values()
        assert card.title.startswith("bash rm -rf build")
        assert card.status == "complete"
    assert any("CLEANED-42" in str(m) for r in fake_llm.requests for m in r.messages)


async def test_bang_stop_in_the_thread_ends_a_run(
    version: str, transport: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_long_run(fake_llm, "slowly")
    async with slack_bridge(agent_home, version, tmp_path, transport=transport) as slack:
        root = (await slack.mention("do it slowly"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "bash")
        await slack.thread_message("!stop", root)
        await until_shown(slack, root, "stopped")
        assert find(slack, root, NOT_REACHED) is None


async def test_http_mode_answers_the_url_check_and_rejects_unsigned_or_stale_requests(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("hello", Reply(text="Signed and answered."))
    async with slack_bridge(agent_home, version, tmp_path, transport="http") as slack:
        status, body = await slack.verify_url()
        assert status == 200
        assert "challenge-" in body
        forged = await slack.send_envelope(
            "events_api",
            slack.event_callback(slack.mention_event("hello forged")),
            secret="not-the-secret",
        )
        stale_payload = slack.event_callback(slack.mention_event("hello stale"))
        stale, _ = await slack.post("events_api", stale_payload, stamp=time.time() - 600)
        assert (slack.answers[forged["envelope_id"]], stale) == (401, 401)
        root = (await slack.mention("hello signed"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "Signed and answered.")
    assert requests_with(fake_llm, "hello") == 1
    assert requests_with(fake_llm, "forged") == requests_with(fake_llm, "stale") == 0


async def test_the_stop_button_ends_a_run(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_long_run(fake_llm, "slowly")
    async with slack_bridge(agent_home, version, tmp_path) as slack:
        root = (await slack.mention("do it slowly"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "bash")
        status = await until_shown(slack, root, "Stop")
        button = next(
            e["action_id"]
            for b in status.blocks
            for e in b.get("elements", [])
            if "Stop" in e["text"]["text"]
        )
        await slack.acked(await slack.press(status.ts, button))
        await until_shown(slack, root, "stopped")


async def test_a_direct_message_is_its_own_conversation_outside_threads(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("privately", Reply(text="Answered in the DM."))
    async with slack_bridge(agent_home, version, tmp_path) as slack:
        await slack.dm("answer me privately")
        answer = await until_shown(slack, None, "Answered in the DM.")
        assert answer.channel == DM_CHANNEL


def action_id(message: Posted, label: str) -> str:
    return next(
        str(e["action_id"])
        for b in message.blocks
        for e in b.get("elements", [])
        if label in e.get("text", {}).get("text", "")
    )


@pytest.mark.parametrize(
    ("method", "field", "shown"),
    [
        ("input", "placeholder", {"type": "plain_text", "text": "feature/…", "emoji": True}),
        ("editor", "initial_value", "draft text"),
    ],
)
async def test_an_input_dialog_is_answered_in_a_modal_opened_by_its_answer_button(
    version: str,
    method: str,
    field: str,
    shown: object,
    fake_llm: FakeLLM,
    agent_home: AgentHome,
    tmp_path: Path,
) -> None:
    script_dialog(fake_llm, "branch", "Branch noted.", method)
    async with slack_bridge(agent_home, version, tmp_path, "-e", str(ASK_ANSWER)) as slack:
        root = (await slack.mention("pick a branch"))["payload"]["event"]["ts"]
        dialog = await until_shown(slack, root, "Answer")
        await slack.acked(await slack.press(dialog.ts, action_id(dialog, "Answer")))
        await slack.wait_until(lambda: bool(slack.views), WAIT)
        [view] = slack.views.values()
        [field_block] = [b for b in view["blocks"] if b["type"] == "input"]
        assert field_block["element"][field] == shown
        assert field_block["element"]["multiline"] is (method == "editor")
        await slack.acked(await slack.submit_view(values={"answer": "feature/kiwi"}))
        await until_shown(slack, root, "Branch noted.")
        await until_shown(slack, root, "chose: feature/kiwi")
    assert agent_got(fake_llm, "feature/kiwi")
    assert not slack.messages[dialog.ts].blocks[-1].get("elements"), "buttons left behind"


async def test_when_slack_refuses_the_modal_the_next_thread_message_answers(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_dialog(fake_llm, "branch", "Branch noted.")
    async with slack_bridge(agent_home, version, tmp_path, "-e", str(ASK_ANSWER)) as slack:
        root = (await slack.mention("pick a branch"))["payload"]["event"]["ts"]
        dialog = await until_shown(slack, root, "Answer")
        slack.fail("views.open", "expired_trigger_id")
        await slack.press(dialog.ts, action_id(dialog, "Answer"))
        await until_shown(slack, root, "Reply to this message with your answer")
        await slack.thread_message("main-line", root)
        await until_shown(slack, root, "Branch noted.")
    assert agent_got(fake_llm, "main-line")
    assert not slack.views


async def test_cancel_still_cancels_an_input_dialog(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    script_dialog(fake_llm, "branch", "Branch noted.")
    async with slack_bridge(agent_home, version, tmp_path, "-e", str(ASK_ANSWER)) as slack:
        root = (await slack.mention("pick a branch"))["payload"]["event"]["ts"]
        dialog = await until_shown(slack, root, "Answer")
        await slack.press(dialog.ts, action_id(dialog, "Cancel"))
        await until_shown(slack, root, "Branch noted.")
    assert agent_got(fake_llm, "<cancelled>")
    assert not slack.views


async def test_a_mention_shows_eyes_while_the_run_works_and_a_check_mark_after(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "slowly",
        Reply(tool_calls=[ToolCall("bash", {"command": "sleep 1.5; echo ok"})]),
        Reply(text="Finished slowly."),
    )
    async with slack_bridge(agent_home, version, tmp_path) as slack:
        root = (await slack.mention("do it slowly"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "bash")
        assert slack.reactions.get(root) == ["eyes"]
        await until_shown(slack, root, "Finished slowly.")
        await slack.wait_until(lambda: slack.reactions.get(root) == ["white_check_mark"], WAIT)
        fake_llm.add("BROKEN", Reply(status=400, error_message="bad request"))
        reply = (await slack.thread_message("BROKEN now", root))["payload"]["event"]["ts"]
        await slack.wait_until(lambda: slack.reactions.get(reply) == ["x"], WAIT)
    assert slack.reactions[root] == ["white_check_mark"]


async def test_slash_pi_starts_a_thread_on_its_task_and_answers_there(
    version: str, transport: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("SLASH-TASK", Reply(text="Slash task answered in its thread."))
    async with slack_bridge(agent_home, version, tmp_path, transport=transport) as slack:
        await slack.acked(await slack.slash("SLASH-TASK please"))
        await slack.wait_until(lambda: any(m.thread_ts is None for m in slack.messages.values()))
        [root] = [m for m in slack.messages.values() if m.thread_ts is None]
        assert "SLASH-TASK please" in root.text
        await until_shown(slack, root.ts, "Slash task answered in its thread.")
        fake_llm.add("SECOND-ASK", Reply(text="And the follow-up too."))
        await slack.thread_message("SECOND-ASK now", root.ts)
        await until_shown(slack, root.ts, "And the follow-up too.")
    assert requests_with(fake_llm, "SLASH-TASK") == 1


# --- files: fetched after admission, within their size, the token only to Slack ----------

EVE, EVE_DM = "U0EVE", "D0EVE"  # not allowed in
PNG = b"\x89PNG\r\n\x1a\n a small picture"


@pytest.fixture
def one_version() -> str:
    """These journeys are about the bridge, not the agent: one version is enough."""
    from tests.conftest import require_agent

    require_agent(DEFAULT_VERSION)
    return DEFAULT_VERSION


def file_entry(url: str, size: int) -> dict[str, Any]:
    return {"id": "F1", "mimetype": "image/png", "url_private": url, "size": size}


@contextlib.asynccontextmanager
async def other_host() -> AsyncIterator[tuple[str, list[str | None]]]:
    """A second server on 127.0.0.1, not Slack's: its base URL, and the Authorization
    header of every request it got."""
    seen: list[str | None] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_files_from_strangers_and_bots_are_never_fetched(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("QUICK", Reply(text="Quick answer."))
    async with slack_bridge(agent_home, one_version, tmp_path) as slack:
        evil, bots = slack.add_file(PNG, "image/png"), slack.add_file(PNG, "image/png")
        for _ in range(4):
            await slack.dm("look at this", user=EVE, channel=EVE_DM, files=[file_entry(evil, 20)])
        # Another app's bot (not this bridge's own) posts a picture in Alice's DM.
        await slack.dm("a picture", user="U0OTHER", bot_id="B0OTHER", files=[file_entry(bots, 20)])
        refused = await until_shown(slack, None, "not allowed to use this bot")
        assert refused.channel == EVE_DM
        await slack.dm("a QUICK one")
        await until_shown(slack, None, "Quick answer.")
    assert slack.downloads == []


async def test_a_file_over_the_limit_is_not_fetched_and_the_text_still_goes_in(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("my caption", Reply(text="Got your caption."))
    async with slack_bridge(agent_home, one_version, tmp_path) as slack:
        url = slack.add_file(PNG, "image/png")
        await slack.dm("my caption here", files=[file_entry(url, 25 * 2**20)])
        await until_shown(slack, None, "Got your caption.")
        assert slack.downloads == []
        told = await until_shown(slack, None, "Couldn't fetch your image")
    assert "25.0 MB, the limit is 20.0 MB" in told.visible
    assert "your text went on without it" in told.visible
    [request] = [r for r in fake_llm.requests if "my caption" in r.last_user_text]
    assert request.n_images == 0


async def test_a_file_off_slacks_hosts_gets_no_request_and_no_token(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # A remote file's url_private names whatever host its creator chose.
    fake_llm.add("elsewhere", Reply(text="Read your text."))
    async with (
        other_host() as (elsewhere, seen),
        slack_bridge(agent_home, one_version, tmp_path) as slack,
    ):
        await slack.dm("a picture from elsewhere", files=[file_entry(f"{elsewhere}/a.png", 20)])
        await until_shown(slack, None, "Read your text.")
        assert seen == []
        told = await until_shown(slack, None, "Couldn't fetch your image")
    assert "not on Slack's file servers" in told.visible


async def test_a_file_shared_alone_lands_in_the_inbox_and_the_agent_reads_it(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    log = b"step 3 failed\nSLACK-FILE-OK\n"
    fake_llm.add(
        "A file arrived",
        Reply(tool_calls=[ToolCall("read", {"path": "inbox/notes.txt"})]),
        Reply(text="Step 3 failed."),
    )
    async with slack_bridge(agent_home, one_version, tmp_path) as slack:
        url = slack.add_file(log, "text/plain")
        entry = {"id": "F9", "mimetype": "text/plain", "url_private": url, "size": len(log)}
        await slack.dm("", files=[{**entry, "name": "notes.txt"}])
        await until_shown(slack, None, "Step 3 failed.")
    saved = list((tmp_path / "data" / "workspaces").glob("*/inbox/notes.txt"))
    assert [p.read_bytes() for p in saved] == [log]
    assert any("SLACK-FILE-OK" in str(m) for r in fake_llm.requests for m in r.messages)


async def test_the_agents_send_file_is_uploaded_into_the_thread_unchanged(
    version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+PATCHED\n"
    fake_llm.add(
        "the patch",
        Reply(tool_calls=[ToolCall("write", {"path": "fix.patch", "content": patch})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "fix.patch", "caption": "The fix."})]),
        Reply(text="Patch sent."),
    )
    extension = ("-e", str(SEND_FILE_EXTENSION))
    async with slack_bridge(agent_home, version, tmp_path, *extension) as slack:
        root = (await slack.mention("send me the patch"))["payload"]["event"]["ts"]
        await until_shown(slack, root, "Patch sent.")
        await until_shown(slack, root, "✅ done")
        completed = [c.args for c in slack.called("files.completeUploadExternal")]
    assert list(slack.uploads.values()) == [patch.encode()]  # the bytes, unchanged, once
    [done] = completed
    assert done.get("thread_ts") == root
    assert "fix.patch" in str(done.get("files"))


# --- the store failing at admission: handed in again, or the person is told --------------


async def test_a_slack_message_the_store_failed_to_take_in_is_handed_in_again(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add("LOCKED", Reply(text="Got it after all."))
    async with slack_bridge(agent_home, one_version, tmp_path, store_failures=2) as slack:
        await slack.dm("a LOCKED moment")
        await until_shown(slack, None, "Got it after all.")
        assert find(slack, None, "could not take your message") is None
    assert requests_with(fake_llm, "a LOCKED moment") == 1


async def test_a_slack_message_the_store_never_takes_in_is_named_not_lost_in_silence(
    one_version: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    async with slack_bridge(agent_home, one_version, tmp_path, store_failures=1000) as slack:
        await slack.dm("into the void")
        told = await until_shown(slack, None, "could not take your message")
    assert "Please send it again" in told.visible
    assert requests_with(fake_llm, "into the void") == 0
