"""Platform adapters (Telegram, Slack, console). Each imports `bridge`, never the reverse."""
