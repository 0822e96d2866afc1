"""Identities of the messages the bridge makes on its own, unique across processes.

A slot name is how the outbox finds a conversation's message again, and a process may
inherit another's messages: a bridge adopts those of a run an earlier process left
unfinished (bridge/conversation/hosts.py), so that its replay edits them. Whatever the bridge
posts of its own accord (a command's answer, a picker, a /queue list, a message
waiting in the queue) must therefore never get a name an earlier process gave, or its
new message becomes an edit of the old one. `fresh_id` draws 48 random bits once per
process (and per worker of a scale-out: each is its own process) and counts within
it, so no two processes share an identity and none repeats within one.

Messages shown from the agent's records (a run's status, text and tools, the agent's
notifications) are named from the run's numbering instead (`render.status.Numbering`):
a replay must name them as before to find them again.
"""

from __future__ import annotations

import itertools
import os

ORIGIN = os.urandom(6).hex()  # this process's; a collision needs the same 48 random bits
_serial = itertools.count(1)


def fresh_id() -> str:
    """A new identity: this process's origin, then a number no earlier call had."""
    return f"{ORIGIN}.{next(_serial)}"
