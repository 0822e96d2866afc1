"""Per-chat ordered delivery of view ops to a platform adapter.

The renderer emits `Op`s for a conversation key; `Outbox.submit` queues them and
returns at once. One worker per platform chat carries them out through the
`Adapter`, pacing calls, merging edits that would be overwritten anyway, and
turning platform failures into retries, fallbacks or a logged drop.

Invariants:
- Ops for one lane (`PlatformLimits.lane_of`) are carried out in submission order.
  A lane is a chat (`ChatRef.chat_id`, so all threads and topics of a channel) where
  the platform rate-limits per chat, as Telegram and Slack do: a 429 in one thread
  holds the whole channel anyway. Where a thread has limits of its own (a Discord
  thread is a channel: `thread_lanes`), each thread is a lane. Different lanes never
  wait for each other.
- Only queued ops are merged, never one whose call is in flight: a newer Edit of a
  slot replaces the queued Edit of that slot, or is folded into its queued Send;
  a Delete cancels the queued Edits of its slot and, with a queued Send, the Send
  and itself. An op never moves past another op of its slot.
- Calls are paced: one per `1 / chat_rate` s per chat, `global_rate` per second
  overall, one edit of a message per `edit_interval` s, and, where the platform
  limits edits over all chats (`edit_rate`), edits from a shared budget taken in
  turn, so many streams share it fairly; a routine Edit (a live status's clock)
  takes only a spare edit from that budget and lets its chat's other ops pass
  meanwhile, so under load the answers' edits come first; a chat with
  `ChatRef.is_group` uses the group values of `PlatformLimits` where it has them.
  Intervals count from the platform's answer to the previous call, since the
  platform times a call somewhere between our request and its answer. While an op
  waits it stays queued, so edits arriving meanwhile merge into it (an append to a
  stream too: `Pacer.prepay`). Where the platform limits each method on its own
  (`PlatformLimits.chat_methods`: Slack), the chat's rate holds only those methods
  (posts, per chat, whatever the thread), every other method only its own budgets
  (`bridge/rates.py`, kept by the `Pacer` in this process or in Redis), and a 429
  holds the method refused instead of the lane. There a run's status
  (`Send.gives_way`) takes only a spare post, so when a channel's posts are owed
  the answers waiting for one go first; it moves behind its thread's other ops
  (never past its own slot's), takes in its own next Edit once nothing is
  between them, and after `GIVE_WAY_LIMIT` takes its turn like any post.
- Press answers and reactions skip the chat's queue: platforms want press answers
  within seconds, and neither is a message the chat's rate counts or that races
  the chat's messages. Each kind keeps its own order in its own lane (so a press
answer never waits behind a busy bridge's reactions); both share the global rate.
- A worker never dies of a failed call: every op ends delivered, retried or
  logged and dropped. Cancellation (BaseException) is never swallowed.
- Observers (`observe`) hear of each op carried out in its chat's order, before
  `flush` counts it done; the supervisor keeps its record of live runs this way.
- A slot `adopt`ed from an earlier bridge process is edited, never reposted: if
  its message is gone, the Edit is done.
- Memory follows the live chats, not every chat ever served: `sweep` (the
  supervisor's reaper calls it) drops the lanes of chats with nothing queued and
  no pacing left to keep, and the slot maps of conversations that are gone.
- Time comes only from the injected `clock` and `sleep`, so tests run on fake time.
"""

from bridge.outbox.delivery import Outbox
from bridge.outbox.stats import OutboxStats

__all__ = ["Outbox", "OutboxStats"]
