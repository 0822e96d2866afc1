"""Extension UI requests (agent → client) and their answers (client → agent).

Dialogs (`select`, `confirm`, `input`, `editor`) block the agent until answered;
the rest are fire-and-forget. A dialog's `timeout` (ms) is enforced by the agent,
which tells the client nothing when it fires (docs/rpc.md, "Dialog timeouts are
tracked here"),
so whoever shows the dialog keeps its own timer. Unknown methods are kept as
`OtherUIRequest`. The unions below are the one list of each kind of request: the
method names (`DIALOG_METHODS`, `KNOWN_METHODS`) and `is_dialog` are derived from them.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeGuard

from pydantic import Field

from bridge.rpc.wire import Wire, tags


class _UIRequest(Wire):
    type: Literal["extension_ui_request"]
    id: str


class _Dialog(_UIRequest):
    title: str = ""
    timeout: int | None = None  # milliseconds; the agent resolves by itself after it


class SelectRequest(_Dialog):
    method: Literal["select"]
    options: list[str] = Field(default_factory=list)


class ConfirmRequest(_Dialog):
    method: Literal["confirm"]
    message: str = ""


class InputRequest(_Dialog):
    method: Literal["input"]
    placeholder: str | None = None


class EditorRequest(_Dialog):
    method: Literal["editor"]
    prefill: str | None = None


class NotifyRequest(_UIRequest):
    method: Literal["notify"]
    message: str = ""
    notifyType: str = "info"


class SetStatusRequest(_UIRequest):
    method: Literal["setStatus"]
    statusKey: str = ""
    statusText: str | None = None  # absent: clear the entry


class SetWidgetRequest(_UIRequest):
    method: Literal["setWidget"]
    widgetKey: str = ""
    widgetLines: list[str] | None = None  # absent: clear the widget
    widgetPlacement: str | None = None


class SetTitleRequest(_UIRequest):
    method: Literal["setTitle"]
    title: str = ""


class SetEditorTextRequest(_UIRequest):
    method: Literal["set_editor_text"]
    text: str = ""


class OtherUIRequest(_UIRequest):
    """A UI method this bridge does not know; kept so it can be logged or shown."""

    method: str = ""


DialogRequest = SelectRequest | ConfirmRequest | InputRequest | EditorRequest
# Shown and forgotten: the agent waits for no answer.
FireAndForgetRequest = (
    NotifyRequest | SetStatusRequest | SetWidgetRequest | SetTitleRequest | SetEditorTextRequest
)
KnownUIRequest = Annotated[DialogRequest | FireAndForgetRequest, Field(discriminator="method")]
UIRequest = DialogRequest | FireAndForgetRequest | OtherUIRequest

DIALOG_METHODS = tags(DialogRequest, "method")
KNOWN_METHODS = tags(KnownUIRequest, "method")


def is_dialog(item: object) -> TypeGuard[DialogRequest]:
    """Whether `item` (an agent event, a UI request) is a dialog: the agent waits for
    its answer."""
    return isinstance(item, DialogRequest)
