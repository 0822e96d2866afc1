"""Slack user groups named in the configuration, resolved to their members.

`SLACK_ALLOWED_USERS`, `SLACK_APPROVERS` and per-chat approvers may name user
groups (ids starting with "S", e.g. an on-call group) besides users. `UserGroups`
answers which of those groups a user is in, from `usergroups.users.list`, each
group's members cached for `ttl` seconds: a press or a message must not wait on
Slack every time, and a membership change shows within minutes. When Slack
cannot be asked, the last known members stand (and nobody, before the first
answer): admission fails closed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from bridge.platform import PlatformError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

    from adapters.slack.adapter import SlackAdapter

log = logging.getLogger(__name__)

TTL = 300.0  # seconds a group's member list is trusted
RETRY_AFTER_FAILURE = 30.0  # seconds before asking again after Slack failed to answer


def is_user_group(slack_id: str) -> bool:
    """User group ids start with "S"; user ids with "U" or "W"."""
    return slack_id.startswith("S")


def user_groups_in(*id_sets: Iterable[str]) -> frozenset[str]:
    """The user group ids among configured user and group ids."""
    return frozenset(i for ids in id_sets for i in ids if is_user_group(i))


@dataclass
class UserGroups:
    adapter: SlackAdapter
    groups: Collection[str]
    ttl: float = TTL
    clock: Callable[[], float] = time.monotonic
    _members: dict[str, tuple[frozenset[str], float]] = field(default_factory=dict)
    # One question to Slack per group at a time: a burst of messages shares its answer.
    _asking: dict[str, anyio.Lock] = field(default_factory=dict)

    async def of(self, user: str) -> frozenset[str]:
        """The configured groups `user` belongs to."""
        return frozenset([g for g in self.groups if user in await self._members_of(g)])

    async def _members_of(self, group: str) -> frozenset[str]:
        async with self._asking.setdefault(group, anyio.Lock()):
            known, at = self._members.get(group, (frozenset(), -float("inf")))
            if self.clock() - at < self.ttl:
                return known
            try:
                members = await self.adapter.user_group_members(group)
            except PlatformError as exc:
                log.warning("members of user group %s unknown (%s): last known used", group, exc)
                # Asked again only after a while: a failing Slack is not hammered per message.
                self._members[group] = (known, self.clock() - self.ttl + RETRY_AFTER_FAILURE)
                return known
            self._members[group] = (members, self.clock())
            return members
