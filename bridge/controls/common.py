"""Small pieces every control handler uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.render import PickerOption
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from bridge.controls.handling import Picker
    from bridge.controls.target import Target
    from bridge.model import Op

MAX_PICKER = 24  # buttons in one picker; more would not fit a phone screen
LABEL_LINE = 200  # of a label as a picker shows it once pressed; the button clips it shorter


def data(value: object) -> dict[str, Any]:
    """A response's data as a dict, whatever the agent sent."""
    return value if isinstance(value, dict) else {}


def one_line(text: str, limit: int) -> str:
    """On one line (a picker label, a list entry), then clipped."""
    return clip(" ".join(text.split()), limit)


def picker(
    target: Target,
    kind: Picker,
    title: str,
    values: list[str],
    labels: list[str] | None = None,
    *,
    outcomes: list[str] | None = None,
    one_per_row: bool = False,
) -> list[Op]:
    """A message of buttons, one per value, each labelled (by `labels`, else its value);
    a press comes back as a `PickerChoice`, and the picker then says the pressed
    button's `outcomes` entry (by default ✓ and its label), never its value."""
    shown = labels or values
    said = outcomes or [""] * len(values)
    options = [
        PickerOption(one_line(label, LABEL_LINE), value, outcome)
        for value, label, outcome in zip(values, shown, said, strict=True)
    ][:MAX_PICKER]
    per_row = 1 if one_per_row else target.limits.max_buttons_per_row
    return target.renderer.pick(kind.kind, title, options, per_row)
