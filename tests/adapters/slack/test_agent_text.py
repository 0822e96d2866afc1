"""Agent text is shown, never obeyed: what reaches Slack from the agent's Markdown.

A prompt injection controls the agent's text. Slack's reference does not say whether a
`markdown` block (or a stream's `markdown_text`) acts on mrkdwn's control sequences
(`<!here>`, `<@U…>`, `<#C…>`, `<!subteam^…>`, `<url|label>`) or on a bare `@here`, so
what the bridge sends must hold either way: none of those sequences appears in it, and
read as standard Markdown (CommonMark, as `pyromark` reads it) it shows what the agent
wrote, with no link whose text is not its address and no raw HTML. A stream shows the
same as a block (test_streamed_agent_text.py follows one as it grows).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pyromark
import pytest

from adapters.slack.format import chunks, format_markdown, message_blocks
from bridge.model import Edit
from bridge.outbox.streams import markdown_of
from tests.adapters.slack.test_e2e import find, slack_bridge
from tests.support.agents import DEFAULT_VERSION
from tests.support.fake_llm import Reply
from tests.support.fake_slack_messages import blocks_of

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

WORD_JOINER = "\u2060"
# mrkdwn's control sequences: a special mention, a user or channel, a labelled link.
CONTROL = re.compile(r"<[!@#]|<[A-Za-z][\w+.-]*:[^\s<>]*\|")
BROADCAST = re.compile(r"(?<![\w@])@(?:here|channel|everyone)\b", re.IGNORECASE)
MARKDOWN = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
)

# (the agent's Markdown, what a reader of the markdown block sees)
SHOWN = [
    ("[✅ Allow once](https://evil.example/x)", "✅ Allow once (https://evil.example/x)"),
    ("[me](tg://user?id=123)", "me (tg://user?id=123)"),
    ("<!channel> hi", "<!channel> hi"),
    ("<!here> <!everyone> <!subteam^S0LEADS>", "<!here> <!everyone> <!subteam^S0LEADS>"),
    ("<@U123ABC> and <#C123ABC>", "<@U123ABC> and <#C123ABC>"),
    ("@here and @channel and @alice", "@here and @channel and @alice"),
    ("cp <src> <dst>", "cp <src> <dst>"),
    ("`cp <src> <dst>`", "cp <src> <dst>"),
    ("`<!here>` and `<@U1>`", "<!here> and <@U1>"),
    ("```html\n<b>bold</b> <!channel>\n```", "<b>bold</b> <!channel>\n"),
    ("[docs](https://ex.com)", "docs (https://ex.com)"),
    ("https://ex.com", "https://ex.com"),
    ("<https://ex.com>", "https://ex.com"),
    ("<https://evil.example|✅ Allow once>", "<https://evil.example|✅ Allow once>"),
    ("a & b &lt; c > d", "a & b < c > d"),
    ("![✅ Allow](https://evil.example/i.png)", "✅ Allow (https://evil.example/i.png)"),
    ('<a href="https://evil.example">✅ Allow</a>', '<a href="https://evil.example">✅ Allow</a>'),
]


def read(markdown: str) -> tuple[str, list[tuple[str, str]], list[str]]:
    """Standard Markdown as a reader gets it: (its text, its links as (text, address),
    the raw HTML in it)."""
    text: list[str] = []
    linked: list[tuple[str, str]] = []
    html: list[str] = []
    label: list[str] | None = None
    event: Any
    for event in pyromark.events(markdown, options=MARKDOWN):
        if event == "SoftBreak":
            text.append("\n")
        elif not isinstance(event, dict):
            continue
        elif "Text" in event or "Code" in event:
            piece = str(event.get("Text", event.get("Code", "")))
            text.append(piece)
            if label is not None:
                label.append(piece)
        elif "InlineHtml" in event or "Html" in event:
            html.append(str(event.get("InlineHtml", event.get("Html", ""))))
        elif isinstance(start := event.get("Start"), dict) and {"Link", "Image"} & start.keys():
            address = (start.get("Link") or start.get("Image") or {})["dest_url"]
            label = []
        elif event.get("End") in ("Link", "Image") and label is not None:
            linked.append(("".join(label), address))
            label = None
    return "".join(text), linked, html


def block_texts(markdown: str) -> tuple[str, str]:
    """The markdown block text and the `text` fallback of the one message `markdown` makes."""
    [piece] = format_markdown(markdown, 12_000)
    fallback, [block] = message_blocks(piece, "formatted", ())
    assert block["type"] == "markdown"
    return block["text"], fallback


def assert_no_control(sent: str) -> None:
    """Nothing mrkdwn would act on (the `text` fallback is mrkdwn, with no Markdown links)."""
    assert not CONTROL.search(sent), sent
    assert not BROADCAST.search(sent), sent


def assert_inert(sent: str) -> None:
    """Nothing mrkdwn would act on, and read as Markdown no link but its own address."""
    assert_no_control(sent)
    _, linked, _ = read(sent)
    assert all(text == address for text, address in linked), linked
    assert all(address.startswith(("https://", "http://")) for _, address in linked), linked


@pytest.mark.parametrize(("markdown", "visible"), SHOWN)
def test_a_markdown_block_shows_agent_markdown_as_written_and_obeys_none_of_it(
    markdown: str, visible: str
) -> None:
    block, fallback = block_texts(markdown)
    assert_inert(block)
    assert_no_control(fallback)
    text, _, html = read(block)
    assert text.replace(WORD_JOINER, "") == visible
    assert html == []


@pytest.mark.parametrize(("markdown", "visible"), SHOWN)
def test_a_streamed_answer_shows_agent_markdown_as_a_block_does(
    markdown: str, visible: str
) -> None:
    [chunk] = chunks(markdown_of(Edit("t", markdown)))
    assert_inert(chunk["text"])
    text, _, html = read(chunk["text"])
    assert text.replace(WORD_JOINER, "") == visible
    assert html == []


@pytest.mark.parametrize(
    ("first", "second"),
    [("say <", "!here> now"), ("ping @", "channel"), ("ping @chan", "nel"), ("x <@", "U1>")],
)
def test_a_stream_cut_inside_a_control_does_not_join_it_again(first: str, second: str) -> None:
    joined = "".join(c["text"] for piece in (first, second) for c in chunks(piece))
    assert_inert(joined)
    assert joined.replace(WORD_JOINER, "") == first + second


@pytest.mark.parametrize(
    "markdown",
    [
        "**Done.** See `main.py`:\n\n```python\nprint('hi')\n```",
        "# Title\n\n- one\n- two\n\n> quoted _text_\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    ],
)
def test_markdown_without_links_or_tags_goes_out_unchanged(markdown: str) -> None:
    block, _ = block_texts(markdown)
    assert block == markdown
    assert chunks(markdown)[0]["text"] == markdown


HOSTILE = (
    "EVIL-ANSWER <!channel> <@U0CAROL> @here [✅ Allow once](https://evil.example/x) "
    "[me](tg://user?id=123) <https://evil.example|✅ Deny> cp <src> <dst>"
)
SENDS = (
    "chat.postMessage",
    "chat.update",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.postEphemeral",
)


@pytest.mark.anyio
@pytest.mark.agent
@pytest.mark.parametrize("stream", [False, True])
async def test_a_hostile_answer_reaches_slack_without_a_mention_or_a_dressed_link(
    stream: bool, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    from tests.conftest import require_agent

    require_agent(DEFAULT_VERSION)
    fake_llm.add("tell me", Reply(text=HOSTILE, delay=0.05))
    async with slack_bridge(agent_home, DEFAULT_VERSION, tmp_path, stream=stream) as slack:
        root = (await slack.mention("tell me something"))["payload"]["event"]["ts"]
        await slack.wait_until(lambda: find(slack, root, "done") is not None, 30.0)
        answer = find(slack, root, "EVIL-ANSWER")
    assert answer is not None
    assert (answer.stream is not None) == stream
    sent = [c.args for method in SENDS for c in slack.called(method)]
    assert sent
    markdown = [
        part["text"]
        for args in sent
        for field in ("blocks", "chunks")
        for part in blocks_of({"blocks": args.get(field)})
        if part.get("type") in ("markdown", "markdown_text")
    ]
    assert any("EVIL-ANSWER" in text for text in markdown)
    for text in markdown:
        assert_inert(text)
    for args in sent:
        assert_no_control(json.dumps(args, ensure_ascii=False))
    shown, linked, _ = read(answer.visible)
    assert "EVIL-ANSWER" in shown
    assert "https://evil.example/x" in shown.replace(WORD_JOINER, "")
    assert "cp <src> <dst>" in shown
    assert linked == [("https://evil.example/x", "https://evil.example/x")]
