"""Discord: discord.py lives only in this package.

`convert` (payloads → `Inbound`, pure), `format` (Markdown → Discord messages,
buttons → components, forms → modals, pure), `adapter` (`DiscordAdapter`, the
bridge's `Adapter` on discord.py's `Client`), `intake` (messages and interactions
into the bridge), `runner` (`serve`: the gateway, the slash commands), `settings`
(`DiscordSettings`); `failures`, `files`, `indicator` and `payloads` are their parts.

Nothing is imported here, so that importing the pure converter loads no SDK: take
each part from its own module.
"""
