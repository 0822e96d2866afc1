"""What the fuzz suites share: one settings object, JSON strategies, mutation, a counter.

The suites (tests/**/test_fuzz.py) build inputs shaped like what each boundary
receives, then `mutated` breaks them the way a broken or hostile peer would:
fields dropped, replaced by JSON of another type, extra fields added; `swaps`
makes every single such mistake in a sample, one after another. `deep_json` nests
past Python's recursion limit (what `json.loads` cannot take), `TEXT` leans on the
characters that break naive code (line separators, astral emoji that count twice
in UTF-16, combining marks, NUL).

`FUZZ` is deterministic (`derandomize=True`, no example database): CI and every
checkout run the same examples, so a red build is a regression in the code, never
a roll of the dice nor a failure one machine remembers and replays. The price: a
run breaks no new ground; a longer hunt does, on purpose:
`PI_BRIDGE_FUZZ_EXAMPLES=20000 pytest tests/rpc/test_fuzz.py tests/adapters`.
Every test body counts itself in `EXAMPLES`; tests/conftest.py prints the counts
at the end of the run.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from bridge.model import ChatRef

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bridge.model import Inbound

EXAMPLES: Counter[str] = Counter()  # target → examples run (printed by tests/conftest.py)

FUZZ = settings(
    max_examples=int(os.environ.get("PI_BRIDGE_FUZZ_EXAMPLES", "250")),
    derandomize=True,
    database=None,
    deadline=None,  # the machine is shared: a slow example is not a failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ran(target: str) -> None:
    """Count one example of `target`."""
    EXAMPLES[target] += 1


# Characters that break naive text handling, mixed into otherwise arbitrary text.
AWKWARD = st.sampled_from(
    [
        "\u2028",  # LINE SEPARATOR and PARAGRAPH SEPARATOR: content, never a line end
        "\u2029",
        "\r",
        "\n",
        "\x85",  # NEXT LINE: `str.splitlines()` splits on it, JSON does not
        "\x00",
        "\U0001f600",  # astral: two UTF-16 units (Telegram's entity offsets count those)
        "\U0001f469\u200d\U0001f4bb",
        "\u0301",  # a combining mark
        "\u0130",  # "İ": lower() makes it two characters
        "\u202e",  # RIGHT-TO-LEFT OVERRIDE
    ]
)
TEXT = st.lists(st.text(max_size=12) | AWKWARD, max_size=6).map("".join)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**70)  # past int64: ids that overflow
    | st.floats()  # NaN and ±inf too: Python's json reads NaN, Infinity and 1e400
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    """JSON text of arrays and objects nested up to 3,000 deep: `json.loads` stops
    near 1,000 (and `json.dumps` too, so the text is built by hand)."""
    pattern = draw(st.lists(st.sampled_from(["[", '{"a":']), min_size=1, max_size=3))
    depth = draw(st.sampled_from([10, 300, 1_500, 3_000]))
    openers = (pattern * depth)[:depth]
    closers = "".join("]" if opener == "[" else "}" for opener in reversed(openers))
    return "".join(openers) + json.dumps(draw(SCALARS)) + closers


def _paths(value: Any, prefix: tuple[Any, ...] = (), *, leaves: bool = False) -> list[Any]:
    """Every key path inside `value` (not the root itself); only the paths of
    scalars with `leaves`."""
    inner: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        inner = list(value.items())
    elif isinstance(value, list):
        inner = list(enumerate(value))
    found = [prefix] if prefix and not (leaves and isinstance(value, dict | list)) else []
    for key, item in inner:
        found += _paths(item, (*prefix, key), leaves=leaves)
    return found


def edge_values(value: Any) -> list[Any]:
    """What a careless peer sends in place of `value`: its type's edge cases and the
    types it is most often confused with (a number as a string, inf for an int)."""
    if isinstance(value, bool):
        return [0, 1, "true", None, not value]
    if isinstance(value, int | float):
        edges = [0, -1, 2**64, -(2**64), float("inf"), float("-inf"), float("nan"), 0.5]
        return [*edges, str(value), None, True, [value]]
    if isinstance(value, str):
        return ["", " ", "x" * 5_000, 0, -1, None, [value], {"text": value}]
    if isinstance(value, list):
        return [[], [None], [[]], [{}], {}, None, ""]
    return [{}, [], None, "", 0]


def swaps(sample: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """`sample` with one field dropped or swapped for one of its `edge_values`, for
    every field and every edge value: each single mistake, none left to chance."""
    for path in _paths(sample):
        value = copy.deepcopy(sample)
        parent: Any = value
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict):
            yield _without(value, parent, path[-1])
        for edge in edge_values(parent[path[-1]]):
            parent[path[-1]] = edge
            yield copy.deepcopy(value)


def _without(value: dict[str, Any], parent: dict[str, Any], key: str) -> dict[str, Any]:
    kept = parent.pop(key)
    dropped = copy.deepcopy(value)
    parent[key] = kept
    return dropped


@st.composite
def mutated(draw: st.DrawFn, sample: dict[str, Any], most: int = 4) -> dict[str, Any]:
    """`sample` with up to `most` of its fields dropped, replaced by a value near
    theirs or by any JSON, or joined by extra fields."""
    value = copy.deepcopy(sample)
    for _ in range(draw(st.integers(0, most))):
        action = draw(st.sampled_from(["drop", "near", "near", "replace", "add"]))
        paths = _paths(value, leaves=action == "near")
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = value
        for part in path[:-1]:
            parent = parent[part]
        if action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(TEXT)] = draw(JSON)
        elif action == "near":
            parent[path[-1]] = draw(st.sampled_from(edge_values(parent[path[-1]])))
        else:
            parent[path[-1]] = draw(JSON)
    return value


def assert_well_typed(inbound: Inbound) -> None:
    """An `Inbound` whose fields hold the types they declare: what the rest of the
    bridge (admission, store, outbox) relies on without checking again."""
    texts = (inbound.key, inbound.event_id, inbound.text, inbound.private_reply)
    assert all(isinstance(t, str) for t in texts), inbound
    assert isinstance(inbound.chat, ChatRef), inbound
    _chat(inbound.chat)
    sender = inbound.sender
    assert isinstance(sender.id, str), sender
    assert isinstance(sender.name, str), sender
    assert isinstance(sender.is_bot, bool), sender
    for optional in (inbound.reply_to, inbound.message_id):
        assert optional is None or isinstance(optional, str), inbound
    assert isinstance(inbound.from_self, bool), inbound
    assert isinstance(inbound.is_edit, bool), inbound
    press = inbound.press
    if press is not None:
        assert isinstance(press.token, str), press
        assert isinstance(press.press_id, str), press
        assert press.text is None or isinstance(press.text, str), press
        if press.message is not None:
            _chat(press.message.chat)
            assert isinstance(press.message.message_id, str), press


def _chat(chat: ChatRef) -> None:
    assert isinstance(chat.chat_id, str), chat
    assert chat.thread_id is None or isinstance(chat.thread_id, str), chat
    assert isinstance(chat.is_group, bool), chat
