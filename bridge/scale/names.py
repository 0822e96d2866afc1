"""The Redis names frontends and workers meet at, under one prefix.

in:<key>          stream: a conversation's admitted inbounds (group "owner")
claims            stream: keys of conversations that had no owner (group "workers")
lease:<name>      string: the holder of a conversation's (or poll:<platform>'s) lease
fence:<name>      counter: the lease's fencing token
lapse             sorted set: conversation leases by when they lapse
seen:<event id>   string with a TTL: a delivery id forwarded once
calls:<platform>  stream: workers' platform calls (group "frontends")
replies:<worker>  stream: the answers to one worker instance's calls
identity:<platform>  string: what frontends learnt of the bot (its name)
rate:<platform>:… hash: shared rate budgets (budget.py)
"""

from __future__ import annotations

OWNER = "owner"  # consumer group of a conversation's inbound stream
WORKERS = "workers"  # consumer group of the claims stream


def poll_lease(platform: str) -> str:
    """The lease of a platform's long poll: one frontend at a time takes its updates."""
    return f"poll:{platform}"


POLL_LEASE = poll_lease("telegram")  # Telegram's (without a webhook, it long-polls)


def scale_prefix(store_prefix: str) -> str:
    """Under the store's own prefix, so one Redis may hold several deployments."""
    return f"{store_prefix}scale:"


def inbound_stream(prefix: str, key: str) -> str:
    return f"{prefix}in:{key}"


def claims_stream(prefix: str) -> str:
    return f"{prefix}claims"


def seen_key(prefix: str, event_id: str) -> str:
    return f"{prefix}seen:{event_id}"


def identity_key(prefix: str, platform: str) -> str:
    return f"{prefix}identity:{platform}"
