"""The fake LLM itself, through a real HTTP client on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from tests.support.fake_llm import FakeLLM, Reply, Rule, ToolCall

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        yield session


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def body(*messages: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "system", "content": "You are a test."}, *messages],
        "stream": stream,
        "stream_options": {"include_usage": True},
    }


async def post_stream(
    http: aiohttp.ClientSession, llm: FakeLLM, payload: dict[str, Any]
) -> list[dict[str, Any]]:
    """POST a streaming request; the SSE chunks, checking the framing on the way."""
    async with http.post(f"{llm.base_url}/chat/completions", json=payload) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        raw = await response.read()
    events = raw.split(b"\n\n")
    assert events[-1] == b"", "the stream ends with a blank line"
    assert events[-2] == b"data: [DONE]"
    chunks = []
    for event in events[:-2]:
        assert event.startswith(b"data: ")
        chunks.append(json.loads(event[len(b"data: ") :]))
    return chunks


def streamed_text(chunks: list[dict[str, Any]]) -> list[str]:
    return [
        c["choices"][0]["delta"]["content"]
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]


def reassemble_tool_calls(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an OpenAI client does with tool_calls deltas."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for delta in choice["delta"].get("tool_calls", []):
                call = calls.setdefault(delta["index"], {"id": None, "name": "", "arguments": ""})
                if "id" in delta:
                    assert call["id"] is None, "only the first delta of a call carries its id"
                    call["id"] = delta["id"]
                    assert delta["type"] == "function"
                call["name"] += delta.get("function", {}).get("name", "")
                call["arguments"] += delta.get("function", {}).get("arguments", "")
    return [calls[i] for i in sorted(calls)]


def finish_reasons(chunks: list[dict[str, Any]]) -> list[str]:
    return [
        c["choices"][0]["finish_reason"]
        for c in chunks
        if c["choices"]
        if c["choices"][0]["finish_reason"]
    ]


async def test_text_is_streamed_in_word_chunks(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("hello", Reply(text="Hello from the fake LLM!"))
        chunks = await post_stream(http, llm, body(user("well hello there")))

    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert streamed_text(chunks) == ["Hello ", "from ", "the ", "fake ", "LLM!"]
    assert finish_reasons(chunks) == ["stop"]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["total_tokens"] == (
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    )
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1


async def test_explicit_chunks_and_no_usage_unless_asked(http: aiohttp.ClientSession) -> None:
    async with FakeLLM(default=Reply(chunks=["a\u2028", "b", " c"])) as llm:
        payload = body(user("anything"))
        del payload["stream_options"]
        chunks = await post_stream(http, llm, payload)
    assert streamed_text(chunks) == ["a\u2028", "b", " c"]
    assert all(c["choices"] for c in chunks), "no usage chunk without include_usage"


async def test_delay_spaces_the_chunks(http: aiohttp.ClientSession) -> None:
    async with FakeLLM(default=Reply(text="one two three four", delay=0.1)) as llm:
        started = asyncio.get_running_loop().time()
        chunks = await post_stream(http, llm, body(user("x")))
        elapsed = asyncio.get_running_loop().time() - started
    assert len(streamed_text(chunks)) == 4
    assert 0.25 < elapsed < 5


async def test_tool_call_deltas_reassemble(http: aiohttp.ClientSession) -> None:
    arguments = {"command": "echo 'a long enough command to need several fragments'"}
    async with FakeLLM() as llm:
        llm.add(
            "run",
            Reply(
                text="Running.",
                tool_calls=[ToolCall("bash", arguments), ToolCall("read", {"path": "x"}, id="c2")],
            ),
        )
        chunks = await post_stream(http, llm, body(user("please run it")))

    assert "".join(streamed_text(chunks)) == "Running."
    calls = reassemble_tool_calls(chunks)
    assert [c["name"] for c in calls] == ["bash", "read"]
    assert json.loads(calls[0]["arguments"]) == arguments
    assert json.loads(calls[1]["arguments"]) == {"path": "x"}
    assert calls[0]["id"].startswith("call_")
    assert len(calls[0]["id"]) > len("call_")
    assert calls[1]["id"] == "c2"
    assert finish_reasons(chunks) == ["tool_calls"]
    # The first delta of a call has the name and empty arguments; the rest are fragments.
    first = next(c for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"])
    head = first["choices"][0]["delta"]["tool_calls"][0]
    assert head["function"] == {"name": "bash", "arguments": ""}
    fragments = [
        d["function"]["arguments"]
        for c in chunks
        if c["choices"]
        for d in c["choices"][0]["delta"].get("tool_calls", [])
        if d["index"] == 0 and "id" not in d
    ]
    assert len(fragments) > 3
    assert all(len(f) <= 8 for f in fragments)


async def test_generated_tool_call_ids_differ_per_answer(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("go", Reply(tool_calls=[ToolCall("bash", {"command": "true"})]))
        first = reassemble_tool_calls(await post_stream(http, llm, body(user("go"))))
        second = reassemble_tool_calls(await post_stream(http, llm, body(user("go"))))
    assert first[0]["id"] != second[0]["id"]


async def test_step_is_the_number_of_assistant_messages_after_the_last_user_message(
    http: aiohttp.ClientSession,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    tool = {"role": "tool", "content": "out", "tool_call_id": "c1"}
    rules = [Rule("task", [Reply(text="step zero"), Reply(text="step one")])]
    async with FakeLLM(rules) as llm:
        zero = await post_stream(http, llm, body(user("a task")))
        one = await post_stream(http, llm, body(user("a task"), assistant, tool))
        beyond = await post_stream(
            http, llm, body(user("a task"), assistant, tool, assistant, tool)
        )
        # An earlier exchange does not count: only what follows the last user message.
        again = await post_stream(
            http, llm, body(user("a task"), assistant, tool, user("another task"))
        )
        other = await post_stream(http, llm, body(user("unmatched")))
        other_after_tool = await post_stream(http, llm, body(user("unmatched"), assistant, tool))

    assert "".join(streamed_text(zero)) == "step zero"
    assert "".join(streamed_text(one)) == "step one"
    assert "".join(streamed_text(beyond)) == "done"
    assert "".join(streamed_text(again)) == "step zero"
    assert "".join(streamed_text(other)) == "ok"
    assert "".join(streamed_text(other_after_tool)) == "done"
    assert [(r.rule, r.step) for r in llm.requests] == [
        ("task", 0),
        ("task", 1),
        ("task", 2),
        ("task", 0),
        (None, 0),
        (None, 1),
    ]


async def test_first_matching_rule_wins(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("alpha", Reply(text="first"))
        llm.add("alpha beta", Reply(text="second"))
        llm.add("beta", Reply(text="third"))
        a = await post_stream(http, llm, body(user("alpha beta")))
        b = await post_stream(http, llm, body(user("just beta")))
    assert "".join(streamed_text(a)) == "first"
    assert "".join(streamed_text(b)) == "third"


async def test_fail_times_gives_500s_then_answers(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("flaky", Reply(text="finally", fail_times=2))
        url = f"{llm.base_url}/chat/completions"
        statuses, errors = [], []
        for _ in range(2):
            async with http.post(url, json=body(user("flaky please"))) as response:
                statuses.append(response.status)
                errors.append(await response.json())
        chunks = await post_stream(http, llm, body(user("flaky please")))

    assert statuses == [500, 500]
    assert all("overloaded" in e["error"]["message"] for e in errors)
    assert "".join(streamed_text(chunks)) == "finally"
    assert [r.status for r in llm.requests] == [500, 500, 200]
    assert all(r.step == 0 for r in llm.requests)


async def test_status_answers_with_an_error_body(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("limit", Reply(status=429))
        llm.add("broken", Reply(status=400, error_message="bad things"))
        async with http.post(f"{llm.base_url}/chat/completions", json=body(user("limit"))) as r:
            assert r.status == 429
            assert (await r.json())["error"]["type"] == "rate_limit_error"
        async with http.post(f"{llm.base_url}/chat/completions", json=body(user("broken"))) as r:
            assert r.status == 400
            assert (await r.json())["error"]["message"] == "bad things"
        async with http.post(f"{llm.base_url}/chat/completions", data=b"{not json") as r:
            assert r.status == 400
    assert [r.status for r in llm.requests] == [429, 400, 400]


async def test_requests_are_recorded(http: aiohttp.ClientSession) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    async with FakeLLM() as llm:
        llm.add("picture", Reply(text="A picture."))
        await post_stream(
            http,
            llm,
            body(
                user("earlier text with an image"),
                {"role": "assistant", "content": "seen"},
                user([{"type": "text", "text": "a picture"}, image, image]),
            ),
        )
        await post_stream(http, llm, body(user("plain string content")))
        waited = await llm.wait_for_requests(2, within=1)

    assert waited == llm.requests
    first, second = llm.requests
    assert first.last_user_text == "a picture"
    assert first.n_images == 2
    assert first.rule == "picture"
    assert first.step == 0
    assert first.status == 200
    assert first.stream
    assert first.roles == ["system", "user", "assistant", "user"]
    assert first.body["model"] == "fake-model"
    assert second.last_user_text == "plain string content"
    assert second.n_images == 0
    assert second.rule is None


async def test_non_stream_request_and_models(http: aiohttp.ClientSession) -> None:
    async with FakeLLM() as llm:
        llm.add("tool", Reply(text="Calling.", tool_calls=[ToolCall("bash", {"command": "ls"})]))
        async with http.post(
            f"{llm.base_url}/chat/completions", json=body(user("use a tool"), stream=False)
        ) as response:
            assert response.status == 200
            answer = await response.json()
        async with http.get(f"{llm.base_url}/models") as response:
            models = await response.json()

    choice = answer["choices"][0]
    assert answer["object"] == "chat.completion"
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Calling."
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
    assert answer["usage"]["total_tokens"] > 0
    assert [m["id"] for m in models["data"]] == ["fake-model"]
    assert not llm.requests[0].stream


async def test_client_disconnect_mid_stream_is_quiet(
    http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    async with FakeLLM() as llm:
        llm.add("slow", Reply(text=words, delay=0.02))
        llm.add("after", Reply(text="still serving"))
        async with http.post(f"{llm.base_url}/chat/completions", json=body(user("slow"))) as r:
            await r.content.readuntil(b"w3 ")
            r.close()  # drop the connection, as an aborting agent does
        await asyncio.sleep(0.3)
        chunks = await post_stream(http, llm, body(user("after the abort")))
    assert "".join(streamed_text(chunks)) == "still serving"
    assert llm.requests[0].disconnected
    assert not llm.requests[1].disconnected
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_port_is_ephemeral_and_loopback() -> None:
    async with FakeLLM() as a, FakeLLM() as b:
        assert a.port != b.port
        assert a.base_url == f"http://127.0.0.1:{a.port}/v1"
    with pytest.raises(RuntimeError):
        _ = FakeLLM().base_url
