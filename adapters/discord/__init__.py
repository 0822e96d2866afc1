"""Discord: discord.py lives only in this package.

`convert` (payloads → `Inbound`, pure), `format` (Markdown → Discord messages,
buttons → components, forms → modals, pure), `adapter` (`DiscordAdapter`, the
bridge's `Adapter` on discord.py's `Client`), `intake` (messages and interactions
into the bridge), `runner` (`serve`: the gateway, the slash commands), `settings`
(`DiscordSettings`); `failures`, `files`, `indicator` and `payloads` are their parts.
"""

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.runner import serve
from adapters.discord.settings import DiscordSettings

__all__ = ["DiscordAdapter", "DiscordSettings", "serve"]
