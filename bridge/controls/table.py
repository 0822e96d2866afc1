"""The bridge's commands, declared once (pure: no handler is imported here).

The router, /help, the Telegram command menu and Slack's `!word`s read this table;
`handlers.py` binds each control command to what carries it out.
"""

from __future__ import annotations

from bridge.controls.registry import Command, Registry

COMMANDS = Registry(
    [
        Command("stop", "stop the current run", "talk", "stop", aliases=("abort", "cancel")),
        Command("later", "queue a message for after this run", "talk", "later",
                usage="text", aliases=("followup", "follow_up")),
        Command("steer", "steer the current run now", "talk", "steer", usage="text"),
        Command("new", "start a new session", "session", idle_only=True),
        Command("status", "what the agent is doing", "session"),
        Command("name", "name the session", "session", usage="<name>"),
        Command("fork", "fork from an earlier message", "session", idle_only=True),
        Command("clone", "clone the session", "session", idle_only=True),
        Command("sessions", "list this conversation's sessions to resume one", "session",
                idle_only=True),
        Command("export", "export the session as HTML", "session"),
        Command("get", "send a file of the workspace", "session", usage="<path>"),
        Command("queue", "show queued messages", "session", usage="[clear]"),
        Command("project", "work in a project's git worktree, or finish with it", "session",
                usage="[name|done]", idle_only=True),
        Command("diff", "what this conversation changed in its project", "session"),
        Command("model", "show or change the model", "settings", usage="[provider/id]"),
        Command("thinking", "show or change the thinking level", "settings", usage="[level]"),
        Command("compact", "compact the session's context", "settings", usage="[focus]",
                idle_only=True),
        Command("policy", "what a message does while the agent works", "settings",
                usage="steer|follow_up|ask"),
        Command("verbose", "how tool calls are shown", "settings", usage="all|compact|off"),
        Command("commands", "the agent's own commands (sent as /name)", "settings"),
        Command("grants", "commands and files allowed without asking", "settings",
                usage="[clear]"),
        Command("help", "what the bridge understands", "settings"),
        Command("pr", "push this conversation's branch and open its pull request", "session",
                usage="[title]", idle_only=True),
        Command("every", "run a prompt on a schedule", "talk", usage="<when> <prompt>"),
        Command("at", "run a prompt once, later", "talk", usage="<when> <prompt>"),
        Command("schedules", "this conversation's schedules: pause, resume, delete", "talk"),
        Command("tz", "show or change the chat's time zone", "settings", usage="[Area/City]"),
        Command("usage", "tokens and cost: yours, this chat's, this conversation's",
                "settings"),
        Command("plan", "plan a task read-only first, then execute, revise or cancel it",
                "talk", usage="<task>|cancel"),
    ]
)  # fmt: skip
