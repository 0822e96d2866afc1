"""What a command is (pure): its words, what the router does with it, its line in /help.

`Registry` holds the commands (declared once, in `table.py`): the router asks it
what a `/word` is, `/help` and the Telegram command menu are written from it, and
Slack's addressed `!word`s are checked against it, so a command added to the table
is everywhere at once. Commands of the router's own (stop, steer, later) are carried
out by its intents; how the others ("control") are carried out is `handling.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable

# What the router does with a command word: stop the run, queue the rest of the
# line as a steer or a follow-up, or hand it to a control handler.
Action = Literal["stop", "steer", "later", "control"]
Section = Literal["talk", "session", "settings"]
SECTIONS: dict[Section, str] = {
    "talk": "Talking to the agent",
    "session": "Session",
    "settings": "Settings",
}
# Lines of /help that are not commands: what plain messages do.
TALK_NOTES = (
    "a message starts a run; while it runs, a message steers it",
    "`>> text` — the same as /later",
)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    summary: str  # one line: /help and the Telegram menu
    section: Section
    action: Action = "control"
    usage: str = ""  # what follows the name in /help: "[provider/id]"
    aliases: tuple[str, ...] = ()
    idle_only: bool = False  # refused while the agent works

    @property
    def words(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


class Registry:
    """Every command by each of its words; two commands never share a word."""

    def __init__(self, commands: Iterable[Command]) -> None:
        self.commands = tuple(commands)
        self._by_word: dict[str, Command] = {}
        for command in self.commands:
            for word in command.words:
                if word in self._by_word:
                    raise ValueError(f"command word {word!r} declared twice")
                self._by_word[word] = command

    def find(self, word: str) -> Command | None:
        return self._by_word.get(word.lower())

    def words(self, action: Action | None = None) -> frozenset[str]:
        return frozenset(w for c in self.commands if action in (None, c.action) for w in c.words)

    def menu(self) -> list[tuple[str, str]]:
        """(name, summary) of each command, for a platform's command menu."""
        return [(c.name, c.summary) for c in self.commands]

    def help(self) -> str:
        """The /help text (Markdown): the commands by section, one per line."""
        lines: list[str] = []
        for section, title in SECTIONS.items():
            lines.append(f"*{title}*")
            if section == "talk":
                lines += [f"• {note}" for note in TALK_NOTES]
            for c in self.commands:
                if c.section != section:
                    continue
                usage = f" {c.usage}" if c.usage else ""
                idle = " (while idle)" if c.idle_only else ""
                lines.append(f"`/{c.name}{usage}` — {c.summary}{idle}")
        return "\n".join(lines)
