"""The Slack adapter: bolt (Socket Mode or HTTP) in, slack_sdk Web API out.

`convert` turns Slack payloads into `bridge.model.Inbound` (pure), `format` turns
Markdown into Block Kit message chunks, `adapter.SlackAdapter` carries out the
bridge's ops, and `runner` wires a bolt app to a `Bridge`.

This package imports nothing, so importing the pure converter loads no SDK.
"""
