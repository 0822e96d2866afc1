"""Telegram: python-telegram-bot lives only in this package.

`convert` (updates → `Inbound`, pure), `format` (Markdown → MarkdownV2, split),
`adapter` (`TelegramAdapter`, the bridge's `Adapter` on PTB's `Bot`), `runner`
(`serve`: long polling or the webhook into `Bridge.handle`), `webhook`
(the webhook endpoint), `settings` (`TelegramSettings`).

This package imports nothing, so importing the pure converter loads no SDK.
"""
