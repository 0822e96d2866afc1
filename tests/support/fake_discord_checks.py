"""The checks the fake Discord makes before it accepts a message, a modal or a command
list, answering as Discord does: 400 with JSON error code 50035 "Invalid Form Body" and an
`errors` tree naming the field (`{"content": {"_errors": [{"code": …, "message": …}]}}`),
413 code 40005 for a file over the upload limit, 50006 for an empty message.

Limits, from Discord's developer documentation (docs.discord.com/developers/…):
- resources/message#create-message: content up to 2000 characters, up to 10 embeds,
  up to 10 files; a message needs content, an embed, a file, components, a sticker or a
  poll (50006 "Cannot send an empty message", topics/opcodes-and-status-codes#json).
- reference#uploading-files: files up to the upload limit (10 MiB by default); beyond
  it 413 with code 40005 "Request entity too large".
- components/reference: up to 5 action rows in a message (without the components-v2
  flag); an action row holds 1-5 buttons or exactly one select; custom_id 1-100
  characters and unique within the message; a button's label up to 80 characters; a link
  button has a url and no custom_id; a string select up to 25 options; with the
  IS_COMPONENTS_V2 flag (1 << 15) up to 40 components in all and no content.
- interactions/receiving-and-responding#interaction-response-object-modal: a modal's
  title up to 45 characters, custom_id up to 100, 1-5 components; a text input's label
  up to 45, its min/max length 0-4000 / 1-4000, its value up to 4000, placeholder up to 100.
- interactions/application-commands: command and option names 1-32 characters of
  lower-case letters, digits, `-` and `_`; descriptions 1-100; up to 25 options, required
  options before optional ones; up to 100 global chat-input commands.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tests.support.fake_discord_model import ACTION_ROW, BUTTON, LABEL, TEXT_INPUT, Field, walk

if TYPE_CHECKING:
    from collections.abc import Sequence

Json = dict[str, Any]

MAX_CONTENT = 2000
MAX_EMBEDS = 10
MAX_FILES = 10
MAX_ROWS = 5
MAX_IN_ROW = 5
MAX_V2_COMPONENTS = 40
MAX_CUSTOM_ID = 100
MAX_BUTTON_LABEL = 80
MAX_SELECT_OPTIONS = 25
MAX_MODAL_TITLE = 45
MAX_MODAL_COMPONENTS = 5
MAX_INPUT_LABEL = 45
MAX_INPUT_LENGTH = 4000
MAX_PLACEHOLDER = 100
MAX_COMMANDS = 100
MAX_OPTIONS = 25
IS_COMPONENTS_V2 = 1 << 15
LINK_STYLE, PREMIUM_STYLE = 5, 6
SELECT_TYPES = frozenset({3, 5, 6, 7, 8})
_NAME = re.compile(r"^[-_\w]{1,32}$")


class ApiError(Exception):
    """An error answer: HTTP status and Discord's JSON error body."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        *,
        errors: Json | None = None,
        headers: dict[str, str] | None = None,
        body: Json | None = None,
    ) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status, self.code, self.message = status, code, message
        self.errors = errors
        self.headers = headers or {}
        self._body = body

    def body(self) -> Json:
        if self._body is not None:
            return self._body
        out: Json = {"message": self.message, "code": self.code}
        if self.errors is not None:
            out["errors"] = self.errors
        return out


def form_error(path: Sequence[str | int], code: str, message: str) -> ApiError:
    nested: Json = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        nested = {str(key): nested}
    return ApiError(400, 50035, "Invalid Form Body", errors=nested)


def too_long(path: Sequence[str | int], limit: int) -> ApiError:
    return form_error(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def _bad_length(path: Sequence[str | int], value: object, low: int, high: int) -> None:
    length = len(str(value or ""))
    if length > high:
        raise too_long(path, high)
    if length < low:
        raise form_error(
            path, "BASE_TYPE_BAD_LENGTH", f"Must be between {low} and {high} in length."
        )


def check_message(
    payload: Json, files: list[tuple[str, bytes]], upload_limit: int, *, creating: bool
) -> None:
    """Raise the ApiError Discord answers a message create/edit `payload` with."""
    content = payload.get("content")
    if content is not None and len(str(content)) > MAX_CONTENT:
        raise too_long(["content"], MAX_CONTENT)
    embeds = payload.get("embeds") or []
    if len(embeds) > MAX_EMBEDS:
        raise too_long(["embeds"], MAX_EMBEDS)
    check_components(payload.get("components") or [], int(payload.get("flags") or 0), content)
    if len(files) > MAX_FILES:
        raise too_long(["files"], MAX_FILES)
    if any(len(data) > upload_limit for _, data in files):
        raise ApiError(413, 40005, "Request entity too large")
    parts = (content, embeds, files, payload.get("components"), payload.get("sticker_ids"))
    if creating and not any(parts) and not payload.get("poll"):
        raise ApiError(400, 50006, "Cannot send an empty message")


def check_components(components: list[Json], flags: int, content: object = None) -> None:
    if flags & IS_COMPONENTS_V2:
        if content:
            raise form_error(
                ["content"],
                "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                "The 'content' field cannot be used when using MessageFlags.IS_COMPONENTS_V2",
            )
        if len(list(walk(components))) > MAX_V2_COMPONENTS:
            raise too_long(["components"], MAX_V2_COMPONENTS)
    else:
        if len(components) > MAX_ROWS:
            raise too_long(["components"], MAX_ROWS)
        for index, row in enumerate(components):
            if row.get("type") != ACTION_ROW:
                raise form_error(
                    ["components", index, "type"],
                    "UNION_TYPE_CHOICES",
                    'Value of field "type" must be one of (1,).',
                )
            _check_row(row, ["components", index])
    _check_interactive(components)


def _check_row(row: Json, path: list[str | int]) -> None:
    children = list(row.get("components") or [])
    path = [*path, "components"]
    if not children:
        raise form_error(path, "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length.")
    if len(children) > MAX_IN_ROW:
        raise too_long(path, MAX_IN_ROW)
    selects = [c for c in children if c.get("type") in SELECT_TYPES]
    if selects and len(children) > 1:
        raise form_error(
            path,
            "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
            "The specified component exceeds the maximum width",
        )


def _check_interactive(components: list[Json]) -> None:
    """Buttons and selects anywhere in the tree; custom_ids unique in the message."""
    seen: set[str] = set()
    for component in walk(components):
        kind = component.get("type")
        if kind == BUTTON:
            _check_button(component)
        elif kind in SELECT_TYPES:
            _bad_length(["custom_id"], component.get("custom_id"), 1, MAX_CUSTOM_ID)
            if len(component.get("options") or []) > MAX_SELECT_OPTIONS:
                raise too_long(["options"], MAX_SELECT_OPTIONS)
        else:
            continue
        custom_id = component.get("custom_id")
        if custom_id is not None:
            if custom_id in seen:
                raise form_error(
                    ["components"],
                    "COMPONENT_CUSTOM_ID_DUPLICATED",
                    "Component custom id cannot be duplicated",
                )
            seen.add(custom_id)


def _check_button(button: Json) -> None:
    style = button.get("style")
    if style not in range(1, 7):
        raise form_error(["style"], "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3, 4, 5, 6).")
    if len(str(button.get("label") or "")) > MAX_BUTTON_LABEL:
        raise too_long(["label"], MAX_BUTTON_LABEL)
    if style == LINK_STYLE:
        if not button.get("url") or button.get("custom_id") is not None:
            raise form_error(["url"], "BUTTON_COMPONENT_INVALID_URL", "A link button needs a url")
    elif style != PREMIUM_STYLE:
        _bad_length(["custom_id"], button.get("custom_id"), 1, MAX_CUSTOM_ID)


def check_modal(data: Json) -> list[Field]:
    """A modal callback's `data` as Discord accepts it; its text inputs as fields."""
    _bad_length(["data", "title"], data.get("title"), 1, MAX_MODAL_TITLE)
    _bad_length(["data", "custom_id"], data.get("custom_id"), 1, MAX_CUSTOM_ID)
    components = list(data.get("components") or [])
    if not components:
        raise form_error(
            ["data", "components"], "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length."
        )
    if len(components) > MAX_MODAL_COMPONENTS:
        raise too_long(["data", "components"], MAX_MODAL_COMPONENTS)
    fields: list[Field] = []
    for index, component in enumerate(components):
        path: list[str | int] = ["data", "components", index]
        if component.get("type") == ACTION_ROW:
            inner = list(component.get("components") or [])
            if len(inner) != 1 or inner[0].get("type") != TEXT_INPUT:
                raise form_error(path, "MODAL_ROW_INVALID", "A modal row holds one text input")
            fields.append(_text_input(inner[0], str(inner[0].get("label") or ""), path))
        elif component.get("type") == LABEL:
            _bad_length([*path, "label"], component.get("label"), 1, MAX_INPUT_LABEL)
            inner_one = component.get("component") or {}
            if inner_one.get("type") == TEXT_INPUT:
                fields.append(_text_input(inner_one, str(component["label"]), path))
    ids = [f.custom_id for f in fields]
    if len(ids) != len(set(ids)):
        raise form_error(
            ["data", "components"],
            "COMPONENT_CUSTOM_ID_DUPLICATED",
            "Component custom id cannot be duplicated",
        )
    return fields


def _text_input(component: Json, label: str, path: list[str | int]) -> Field:
    _bad_length([*path, "label"], label, 1, MAX_INPUT_LABEL)
    _bad_length([*path, "custom_id"], component.get("custom_id"), 1, MAX_CUSTOM_ID)
    low = int(component.get("min_length") or 0)
    high = int(component.get("max_length") or MAX_INPUT_LENGTH)
    if not 0 <= low <= MAX_INPUT_LENGTH or not 1 <= high <= MAX_INPUT_LENGTH:
        raise too_long([*path, "max_length"], MAX_INPUT_LENGTH)
    value = str(component.get("value") or "")
    if len(value) > high:
        raise too_long([*path, "value"], high)
    if len(str(component.get("placeholder") or "")) > MAX_PLACEHOLDER:
        raise too_long([*path, "placeholder"], MAX_PLACEHOLDER)
    required = component.get("required")
    return Field(
        str(component["custom_id"]),
        label,
        required=True if required is None else bool(required),
        max_length=high,
        min_length=low,
        value=value,
    )


def check_commands(commands: list[Json]) -> None:
    """A bulk overwrite of application commands as Discord accepts it."""
    if len([c for c in commands if c.get("type", 1) == 1]) > MAX_COMMANDS:
        raise too_long([], MAX_COMMANDS)
    seen: set[tuple[int, str]] = set()
    for index, command in enumerate(commands):
        kind, name = int(command.get("type", 1)), str(command.get("name") or "")
        if kind == 1:
            _check_name([index, "name"], name)
            _bad_length([index, "description"], command.get("description"), 1, 100)
            _check_options([index, "options"], list(command.get("options") or []))
        if (kind, name) in seen:
            raise form_error(
                [index, "name"],
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                "Application command names must be unique",
            )
        seen.add((kind, name))


def _check_name(path: list[str | int], name: str) -> None:
    if not _NAME.match(name) or name != name.lower():
        raise form_error(
            path, "APPLICATION_COMMAND_INVALID_NAME", f"Command name is invalid: {name!r}"
        )


def _check_options(path: list[str | int], options: list[Json]) -> None:
    if len(options) > MAX_OPTIONS:
        raise too_long(path, MAX_OPTIONS)
    optional_seen = False
    for index, option in enumerate(options):
        _check_name([*path, index, "name"], str(option.get("name") or ""))
        _bad_length([*path, index, "description"], option.get("description"), 1, 100)
        if option.get("required"):
            if optional_seen:
                raise form_error(
                    [*path, index, "required"],
                    "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                    "Required options must be placed before non-required options",
                )
        else:
            optional_seen = True
        if option.get("type") in (1, 2):  # subcommands and groups nest options
            _check_options([*path, index, "options"], list(option.get("options") or []))
