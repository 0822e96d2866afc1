"""Files end to end on Discord: an attachment lands in the conversation's inbox/ (fetched
from its signed URL only once the message is admitted), `/get`, `/export`, `/diff` and
the agent's `send_file` come back as attachments, and a voice message is transcribed
like a Telegram voice note."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from adapters.discord.convert import dm_key, thread_key
from bridge.options import ChatOptions, ProjectOptions, Transcription
from bridge.paths import SEND_FILE_EXTENSION
from bridge.projects.worktrees import branch_name
from tests.adapters.discord.harness import discord_bridge, shown, thread_of
from tests.support.agents import DEFAULT_VERSION
from tests.support.bridge_harness import options
from tests.support.fake_discord import ALICE, BOB, GENERAL, GUILD_ID
from tests.support.fake_llm import Reply, ToolCall
from tests.support.fake_transcribe import FakeTranscriber
from tests.support.gitrepo import git, isolated_git, make_repo  # noqa: F401 (autouse fixture)
from tests.support.voice import spoken_ogg

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.fake_discord import Channel, FakeDiscord, Message
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

LOG = b"error: the build failed at step 3\nFILE-CONTENT-OK\n"


def inbox(opts: BridgeOptions, thread: Channel) -> Path:
    return opts.workspace(thread_key(str(GUILD_ID), str(GENERAL), str(thread.id))) / "inbox"


async def started(fake: FakeDiscord, text: str) -> Channel:
    mention = await fake.user_says(GENERAL, text, mentions_bot=True)
    return await thread_of(fake, mention)


async def attached(fake: FakeDiscord, thread: Channel) -> Message:
    """The bot's first message in `thread` that carries a file, once there is one."""
    return await fake.wait_for(
        lambda: next((m for m in fake.bot_messages(thread.id) if m.attachments), None)
    )


async def test_a_file_lands_in_the_inbox_and_get_sends_it_back_unchanged(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("hello", Reply(text="Hello."))
    fake_llm.add(
        "A file arrived",
        Reply(tool_calls=[ToolCall("read", {"path": "inbox/build.log"})]),
        Reply(text="The build failed at step 3."),
    )
    async with discord_bridge(opts) as fake:
        thread = await started(fake, "hello")
        await shown(fake, "done", thread.id)
        await fake.user_says(thread.id, "", attachments=[("build.log", LOG, "text/plain")])
        await shown(fake, "The build failed at step 3.", thread.id)
        await fake.user_says(thread.id, "/get inbox/build.log")
        sent = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread.id) if m.attachments), None)
        )
    assert (inbox(opts, thread) / "build.log").read_bytes() == LOG
    [file] = sent.attachments
    assert (file.filename, file.data) == ("build.log", LOG)
    assert any("FILE-CONTENT-OK" in str(m) for r in fake_llm.requests for m in r.messages)


async def test_a_strangers_file_is_never_fetched(fake_llm: FakeLLM, opts: BridgeOptions) -> None:
    async with discord_bridge(opts) as fake:
        dm = fake.dm_channel(BOB)
        await fake.user_says(dm, "look", attachments=[("x.log", LOG, "text/plain")], user=BOB)
        await shown(fake, "not allowed", dm)
    assert fake.downloads == []
    assert fake_llm.requests == []


async def test_the_agents_send_file_arrives_as_an_attachment(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    report = "REPORT-42 \u00e9\u00e8 line one\nline two\n"
    fake_llm.add(
        "make the report",
        Reply(tool_calls=[ToolCall("write", {"path": "out/report.txt", "content": report})]),
        Reply(tool_calls=[ToolCall("send_file", {"path": "out/report.txt", "caption": "Here."})]),
        Reply(text="All sent."),
    )
    argv = agent_home.argv(DEFAULT_VERSION, "-e", str(SEND_FILE_EXTENSION))
    opts = options(tmp_path / "data", argv, agent_home.env())
    async with discord_bridge(opts) as fake:
        thread = await started(fake, "make the report please")
        await shown(fake, "All sent.", thread.id)
        sent = [m for m in fake.bot_messages(thread.id) if m.attachments]
    [message] = sent
    assert [(a.filename, a.data) for a in message.attachments] == [("report.txt", report.encode())]
    assert message.content == "Here."


async def test_a_voice_message_is_transcribed_shown_and_answered(
    fake_llm: FakeLLM, opts: BridgeOptions, tmp_path: Path
) -> None:
    fake_llm.add("the weather", Reply(text="Sunny all week."))
    clip = spoken_ogg("what is the weather", tmp_path)
    async with FakeTranscriber(transcript="what is the weather") as heard:
        service = Transcription(heard.url, "whisper-1", heard.key)
        async with discord_bridge(dataclasses.replace(opts, transcribe=service)) as fake:
            dm = fake.dm_channel(ALICE)
            await fake.voice(dm, clip)
            told = await shown(fake, "what is the weather", dm)
            await shown(fake, "Sunny all week.", dm)
    [taken] = heard.clips
    assert taken.data == clip  # the clip as Discord served it
    assert taken.name.endswith(".ogg")
    assert told.content.startswith("🎤")
    saved = opts.workspace(dm_key(str(dm))) / "inbox"
    assert [p.read_bytes() for p in saved.iterdir()] == [clip]


async def test_the_export_slash_command_sends_the_sessions_html_into_the_thread(
    fake_llm: FakeLLM, opts: BridgeOptions
) -> None:
    fake_llm.add("remember", Reply(text="Noted: PAPAYA."))
    async with discord_bridge(opts) as fake:
        thread = await started(fake, "remember PAPAYA")
        await shown(fake, "Noted: PAPAYA.", thread.id)
        await shown(fake, "done", thread.id)
        used = await fake.slash(thread.id, "export")
        sent = await attached(fake, thread)
    assert used.answered
    assert not used.failed
    [file] = sent.attachments
    assert file.filename.endswith(".html")
    assert b"<html" in file.data.lower()
    key = thread_key(str(GUILD_ID), str(GENERAL), str(thread.id))
    assert [p.name for p in opts.session_dir(key).glob("*.html")] == [file.filename]
    assert fake.limited == []


async def test_diff_in_a_thread_of_a_bound_channel_shows_the_stat_and_attaches_the_patch(
    fake_llm: FakeLLM, opts: BridgeOptions, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "web")
    write = ToolCall("write", {"path": "a.txt", "content": "from a\n"})
    fake_llm.add("WRITE-A", Reply(tool_calls=[write]), Reply(text="a written."))
    bound = dataclasses.replace(
        opts,
        projects={"web": ProjectOptions(path=repo, base="main")},
        chats={f"discord:{GUILD_ID}:{GENERAL}": ChatOptions(project="web")},  # its threads
    )
    async with discord_bridge(bound) as fake:
        thread = await started(fake, "WRITE-A please")
        await shown(fake, "📝 1 file changed", thread.id)
        await fake.user_says(thread.id, "/diff")
        summary = await shown(fake, "1 file changed on", thread.id)
        sent = await attached(fake, thread)
    key = thread_key(str(GUILD_ID), str(GENERAL), str(thread.id))
    assert "a.txt | 1 +" in summary.content
    [file] = sent.attachments
    assert file.filename == branch_name(key).replace("/", "-") + ".diff"
    added = [line for line in file.data.decode().splitlines() if line.startswith("+")]
    assert added == ["+++ b/a.txt", "+from a"]
    assert not (repo / "a.txt").exists()  # written in the thread's own worktree
    assert git(repo, "branch", "--list", "pi/*", "--format=%(refname:short)").split() == [
        branch_name(key)
    ]
