"""One conversation and its parts: its agent's lifetime, its dialogs and approval
questions, the messages that wait, and the supervisor that keeps one agent per conversation."""
