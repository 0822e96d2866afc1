"""A scripted fake OpenAI-compatible LLM server on 127.0.0.1.

The real pi agents are pointed at it through a custom provider in `models.json`
(see `tests.support.agents`). It serves `POST /v1/chat/completions` (streamed as
server-sent events like OpenAI, or as one JSON body) and `GET /v1/models`.

Scripting: a `Rule` matches when its keyword is a substring of the text of the
LAST user message in the request; the first matching rule (in the order added)
answers. Its `steps` are the successive answers within one run: the step index
is the number of assistant messages after that last user message, so step 0 is
the first answer, step 1 the answer after the first tool results, and so on.
Past the last step the fake answers the plain text "done" (it does not repeat
the last step, so a script that ends in a tool call cannot loop forever). When
no rule matches, the `default` reply (text "ok") is a one-step script of its own.

Usage::

    async with FakeLLM() as llm:
        llm.add("list", Reply(tool_calls=[ToolCall("bash", {"command": "ls"})]),
                Reply(text="Listed."))
        ...  # point an agent at llm.base_url
        assert llm.requests[0].last_user_text == "please list"
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.support.loopback import serve_on_loopback

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

MODEL_ID = "fake-model"
DONE_TEXT = "done"
ARGUMENT_FRAGMENT = 8  # characters of tool-call arguments per streamed delta

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass
class ToolCall:
    """A tool call the fake asks for. `id` is generated ("call_<hex>") per answer if None."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass
class Reply:
    """One answer of the fake.

    text:       streamed split into words (whitespace kept), unless `chunks` is given,
                in which case the chunks are the content deltas and `text` is ignored.
    tool_calls: streamed after the text; the answer then finishes with "tool_calls".
    delay:      seconds to wait before each streamed content / argument delta after the first.
    status:     non-200 answers with an OpenAI-style error body and this HTTP status.
    fail_times: the first N requests that reach this step get a 500 "overloaded" error.
    error_message: the message of those error bodies (a default is chosen by status).
    """

    text: str = ""
    chunks: list[str] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200
    fail_times: int = 0
    error_message: str | None = None

    def content_chunks(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return _WORDS.findall(self.text)


@dataclass
class Rule:
    """Answers a request whose last user message text contains `keyword`."""

    keyword: str
    steps: list[Reply]


@dataclass
class RequestRecord:
    """One request the fake received."""

    body: dict[str, Any]
    last_user_text: str
    n_images: int
    rule: str | None  # the matched rule's keyword; None for the default reply
    step: int
    status: int = 200
    stream: bool = False
    disconnected: bool = False  # the client went away before the answer was complete
    path: str = "/v1/chat/completions"
    usage: dict[str, Any] | None = None  # what the answer reported (OpenAI's `usage`)

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def roles(self) -> list[str]:
        return [str(m.get("role")) for m in self.messages]


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict)]
    return []


def analyse_messages(messages: Sequence[Any]) -> tuple[str, int, int]:
    """(text of the last user message, images in it, assistant messages after it)."""
    msgs = [m for m in messages if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
    assistants = sum(1 for m in msgs[last_user + 1 :] if m.get("role") == "assistant")
    if last_user < 0:
        return "", 0, assistants
    parts = _parts(msgs[last_user].get("content"))
    text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    images = sum(1 for p in parts if p.get("type") in ("image_url", "image", "input_image"))
    return text, images, assistants


def _default_error_message(status: int) -> str:
    if status == 429:
        return "fake rate limit exceeded, please retry"
    if status >= 500:
        return "fake internal server error (overloaded)"
    return f"fake error {status}"


def _estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


class FakeLLM:
    """Scripted OpenAI-compatible chat completions server; an async context manager."""

    def __init__(self, rules: Sequence[Rule] = (), default: Reply | None = None) -> None:
        self.rules: list[Rule] = list(rules)
        self.default: Reply = default if default is not None else Reply(text="ok")
        self.requests: list[RequestRecord] = []
        self._failures: dict[tuple[int, int], int] = {}  # (rule index or -1, step) -> 500s sent
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._changed = asyncio.Condition()

    # -- scripting ---------------------------------------------------------------------

    def add(self, keyword: str, *steps: Reply) -> None:
        """Add a rule (after the existing ones): answer `steps` when `keyword` matches."""
        self.rules.append(Rule(keyword, list(steps) or [Reply(text="ok")]))

    def select(self, last_user_text: str, step: int) -> tuple[int, str | None, Reply]:
        """(rule index or -1 for the default, rule keyword, reply) for a request."""
        for index, rule in enumerate(self.rules):
            if rule.keyword in last_user_text:
                steps = rule.steps
                return index, rule.keyword, steps[step] if step < len(steps) else _done()
        return -1, None, self.default if step == 0 else _done()

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeLLM is not started: use `async with FakeLLM() as llm`")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("FakeLLM already started")
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._models)
        self._runner, self._port = await serve_on_loopback(app)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def wait_for_requests(self, count: int, within: float = 30.0) -> list[RequestRecord]:
        """Wait until at least `count` requests were received; return them all."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= count)
        return list(self.requests)

    # -- HTTP --------------------------------------------------------------------------

    async def _record(self, record: RequestRecord) -> None:
        self.requests.append(record)
        async with self._changed:
            self._changed.notify_all()

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            record = RequestRecord({}, "", 0, None, 0, status=400)
            await self._record(record)
            return _error(400, "request body must be a JSON object with `messages`")

        text, images, step = analyse_messages(body["messages"])
        index, keyword, reply = self.select(text, step)
        stream = bool(body.get("stream"))
        record = RequestRecord(body, text, images, keyword, step, stream=stream)

        record.status = self._status(index, step, reply)
        await self._record(record)
        if record.status != 200:
            message = reply.error_message or _default_error_message(record.status)
            return _error(record.status, message)

        completion = _Completion(body, reply)
        record.usage = completion.usage()
        if not stream:
            return web.json_response(completion.whole())
        return await _streamed(request, completion, reply, record)

    def _status(self, index: int, step: int, reply: Reply) -> int:
        """500 while the reply's `fail_times` for this step last, then its own status."""
        failed = self._failures.get((index, step), 0)
        if failed < reply.fail_times:
            self._failures[(index, step)] = failed + 1
            return 500
        return reply.status


async def _streamed(
    request: web.Request, completion: _Completion, reply: Reply, record: RequestRecord
) -> web.StreamResponse:
    """The completion as server-sent events, pausing `reply.delay` where it pauses."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    try:
        await response.prepare(request)
        first = True
        for chunk, pause in completion.chunks():
            if pause and not first and reply.delay > 0:
                await asyncio.sleep(reply.delay)
            first = first and not pause
            await response.write(_sse(chunk))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (ConnectionError, asyncio.CancelledError) as exc:
        # The agent aborted and closed the connection: nothing to report.
        record.disconnected = True
        if isinstance(exc, asyncio.CancelledError):
            raise
    return response


def _done() -> Reply:
    return Reply(text=DONE_TEXT)


def _error(status: int, message: str) -> web.Response:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    if status == 429:
        kind = "rate_limit_error"
    body = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    return web.json_response(body, status=status)


def _sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


class _Completion:
    """The answer to one request, as a stream of chunks or as one body."""

    def __init__(self, body: dict[str, Any], reply: Reply) -> None:
        self.reply = reply
        self.id = "chatcmpl-" + secrets.token_hex(8)
        self.created = int(time.time())
        self.model = str(body.get("model") or MODEL_ID)
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.tool_calls = [
            (call.id or "call_" + secrets.token_hex(5), call.name, json.dumps(call.arguments))
            for call in reply.tool_calls
        ]
        self.finish_reason = "tool_calls" if self.tool_calls else "stop"
        self.prompt_tokens = _estimate_tokens(json.dumps(body.get("messages", [])))
        completion_text = "".join(reply.content_chunks()) + "".join(
            a for _, _, a in self.tool_calls
        )
        self.completion_tokens = _estimate_tokens(completion_text)

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def chunks(self) -> list[tuple[dict[str, Any], bool]]:
        """(chunk, whether the reply's delay applies before it) in streaming order."""
        out: list[tuple[dict[str, Any], bool]] = [
            (self._chunk({"role": "assistant", "content": ""}), False)
        ]
        out += [(self._chunk({"content": c}), True) for c in self.reply.content_chunks() if c]
        for index, (call_id, name, arguments) in enumerate(self.tool_calls):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            out.append((self._chunk({"tool_calls": [head]}), True))
            for start in range(0, len(arguments), ARGUMENT_FRAGMENT):
                fragment = arguments[start : start + ARGUMENT_FRAGMENT]
                part = {"index": index, "function": {"arguments": fragment}}
                out.append((self._chunk({"tool_calls": [part]}), True))
        out.append((self._chunk({}, self.finish_reason), False))
        if self.include_usage:
            usage = {**self._chunk({}), "choices": [], "usage": self.usage()}
            out.append((usage, False))
        return out

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.reply.content_chunks()) or None,
        }
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in self.tool_calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage(),
        }
