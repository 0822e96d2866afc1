"""The platform interface (bridge/platform.py): its table names every member of every
Protocol once, `perform` makes each call through the member's method, and importing
it loads nothing that does I/O."""

from __future__ import annotations

import inspect

import pytest

import bridge.platform as platform
from bridge.model import AnswerPress, ChatRef, Delete, Edit, MessageRef, React, Send, Upload
from bridge.outbox.calls import call_of
from bridge.platform import (
    CALLS,
    CAPABILITIES,
    MEMBERS,
    Adapter,
    DirectMessages,
    Drafting,
    Forms,
    PlatformCall,
    PlatformError,
    Streaming,
    perform,
)
from tests.support.every_capability import CHAT, DM, REF, SAMPLES, EveryCapability
from tests.support.purity import forbidden_loads
from tests.support.recording_adapter import RecordingAdapter

pytestmark = pytest.mark.anyio


def declared(protocol: type) -> set[str]:
    """The members a Protocol class itself declares: methods, properties, attributes."""
    own = {name for name in vars(protocol) if not name.startswith("_")}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_importing_the_interface_alone_loads_nothing_that_does_io() -> None:
    assert forbidden_loads("bridge.platform") == []


def test_the_table_names_every_member_of_every_protocol_once() -> None:
    listed = [(m.name, m.capability) for m in MEMBERS]
    declared_members = {(name, p) for p in CAPABILITIES for name in declared(p)}

    assert len(listed) == len(set(listed)), "a member is listed twice"
    assert set(listed) == declared_members


def test_every_capability_protocol_of_the_module_is_one_of_the_capabilities() -> None:
    protocols = {
        value
        for value in vars(platform).values()
        if inspect.isclass(value)
        and value.__module__ == platform.__name__
        and getattr(value, "_is_runtime_protocol", False)  # @runtime_checkable
    }

    assert protocols == set(CAPABILITIES)
    assert CAPABILITIES[0] is Adapter


def test_the_calls_are_the_members_a_platform_is_called_for() -> None:
    assert {m.name for m in MEMBERS if m.make is not None} == CALLS
    assert {m.name for m in MEMBERS if m.place == "call"} == CALLS
    assert set(SAMPLES) == CALLS  # a new call needs its sample below


@pytest.mark.parametrize("name", sorted(SAMPLES))
async def test_perform_makes_each_call_through_its_method(name: str) -> None:
    adapter = EveryCapability()
    call, expected = SAMPLES[name]

    made = await perform(adapter, call)

    assert adapter.calls == [(name, expected)]
    if name in ("send", "upload", "start_stream"):
        assert made == MessageRef(CHAT, "1")
    else:
        assert made == (DM if name == "direct_chat" else None)


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        pytest.param(PlatformCall("start_stream", chat=CHAT), "refused", id="a-stream"),
        pytest.param(PlatformCall("draft", chat=CHAT, draft_id=1), "refused", id="a-draft"),
        pytest.param(PlatformCall("direct_chat", user_id="U1"), "none", id="a-direct-chat"),
        pytest.param(PlatformCall("limits"), "refused", id="a-local-member"),
        pytest.param(PlatformCall("forms_elsewhere"), "refused", id="a-frontend-member"),
        pytest.param(PlatformCall("teleport"), "refused", id="no-member"),
        pytest.param(PlatformCall("send"), "refused", id="a-send-without-chat"),
        pytest.param(PlatformCall("edit", text="x"), "refused", id="an-edit-without-message"),
    ],
)
async def test_a_call_the_platform_cannot_make_is_refused_or_answers_none(
    call: PlatformCall, answer: str
) -> None:
    plain = RecordingAdapter()  # an `Adapter` with no optional capability

    if answer == "none":
        assert await perform(plain, call) is None
    else:
        with pytest.raises(PlatformError):
            await perform(plain, call)
    assert plain.calls == []


@pytest.mark.parametrize(
    ("adapter", "capabilities"),
    [
        pytest.param(RecordingAdapter(), {Adapter}, id="plain"),
        pytest.param(
            EveryCapability(), {Adapter, Streaming, Drafting, DirectMessages, Forms}, id="every"
        ),
    ],
)
def test_capabilities_are_found_with_isinstance(adapter: object, capabilities: set[type]) -> None:
    assert {c for c in CAPABILITIES if isinstance(adapter, c)} == capabilities


@pytest.mark.parametrize(
    ("op", "ref", "name"),
    [
        pytest.param(Send("s", "hi", silent=True), None, "send", id="send"),
        pytest.param(Edit("s", "hi again"), REF, "edit", id="edit"),
        pytest.param(Delete("s"), REF, "delete", id="delete"),
        pytest.param(Upload("s", "out.txt", b"x", caption="c"), None, "upload", id="upload"),
        pytest.param(AnswerPress("p1", "ok", alert=True), None, "answer_press", id="press"),
        pytest.param(React("m1", "done"), None, "react", id="react"),
    ],
)
async def test_each_op_is_the_call_of_its_kind(
    op: Send | Edit | Delete | Upload | AnswerPress | React, ref: MessageRef | None, name: str
) -> None:
    """The outbox's ops go through the same `perform` as a worker's calls."""
    adapter = EveryCapability()
    chat = ChatRef("c9")

    await perform(adapter, call_of(op, chat, ref))

    [(made, args)] = adapter.calls
    assert made == name
    assert args.get("ref", ref) == ref
    assert args.get("chat", chat) == chat
