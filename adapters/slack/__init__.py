"""The Slack adapter: bolt (Socket Mode or HTTP) in, slack_sdk Web API out.

`convert` turns Slack payloads into `bridge.model.Inbound` (pure), `format` turns
Markdown into Block Kit message chunks, `adapter.SlackAdapter` carries out the
bridge's ops, and `runner` wires a bolt app to a `Bridge`.
"""

from adapters.slack.adapter import SlackAdapter
from adapters.slack.settings import SlackSettings

__all__ = ["SlackAdapter", "SlackSettings"]
