"""Agent events → chat view ops, one pure state machine per conversation.

`Renderer` is the entry point; the `…Choice` classes are what `Renderer.pressed`
says a button press means. See renderer.py for the slots it names and the
invariants it keeps.
"""

from bridge.render.choices import (
    BusyChoice,
    Choice,
    DialogChoice,
    PickerChoice,
    PickerOption,
    QueueChoice,
    StopChoice,
)
from bridge.render.renderer import Renderer

__all__ = [
    "BusyChoice",
    "Choice",
    "DialogChoice",
    "PickerChoice",
    "PickerOption",
    "QueueChoice",
    "Renderer",
    "StopChoice",
]
