"""/every, /at, /schedules and /tz: a conversation's scheduled work (bridge/schedules/).

A new schedule is stored as a draft and shown back with its next runs in the chat's
zone, with [✅ Schedule] [✖ Cancel]; the ticker fires only confirmed ones. /schedules
shows each with [⏸ Pause] or [▶ Resume] and [🗑 Delete]. Only the person who made a
schedule, or an approver of the conversation, may confirm or change it; a press by
anyone else is refused privately and leaves the buttons. `[schedules] max_per_user`
caps one person's schedules over all conversations.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bridge.controls.common import picker
from bridge.controls.handling import NotYours, Personal, Picker
from bridge.schedules.occurrences import known_zone, next_runs, shown
from bridge.schedules.rules import rule_fields, rule_of
from bridge.schedules.when import WhenError, parse_at, parse_every
from bridge.store.schedule_record import ScheduleRecord

if TYPE_CHECKING:
    from bridge.controls.handling import Asker
    from bridge.controls.target import Target
    from bridge.model import Op
    from bridge.schedules.when import Parsed

MAX_LISTED = 20  # schedules shown by /schedules, each a message with its buttons
NOT_YOURS = "Only the person who made this schedule or an approver may change it."


def _zone(target: Target, asker: Asker) -> str:
    record = target.record
    return asker.options.timezone_of(asker.key, record.settings if record else None)


async def every(target: Target, arg: str, asker: Asker) -> list[Op]:
    try:
        parsed = parse_every(arg)
    except WhenError as error:
        return target.renderer.notice(str(error), markdown=True)
    return await _draft(target, asker, parsed, "every")


async def at(target: Target, arg: str, asker: Asker) -> list[Op]:
    zone = _zone(target, asker)
    now = datetime.fromtimestamp(asker.wall(), ZoneInfo(zone))
    try:
        parsed = parse_at(arg, now)
    except WhenError as error:
        return target.renderer.notice(str(error), markdown=True)
    return await _draft(target, asker, parsed, "at")


async def _draft(target: Target, asker: Asker, parsed: Parsed, kind: str) -> list[Op]:
    if (full := await _full(asker, asker.sender.id)) is not None:
        return target.renderer.notice(full)
    zone, now = _zone(target, asker), asker.wall()
    record = ScheduleRecord.model_validate(
        {
            "id": target.new_token(),
            "key": asker.key,
            "chat_id": asker.chat.chat_id,
            "thread_id": asker.chat.thread_id,
            "is_group": asker.chat.is_group,
            "owner": asker.sender.id,
            "owner_name": asker.sender.name,
            "owner_groups": sorted(asker.sender.groups),
            "words": parsed.words,
            "zone": zone,
            "prompt": parsed.prompt,
            "created_at": now,
            "done_until": now,
            **rule_fields(parsed.rule),
        }
    )
    await asker.store.put_schedule(record)
    title = f"{_described(record)}\n{_next(record, now)}\nSchedule it?"
    values = [f"ok:{record.id}", f"cancel:{record.id}"]
    labels = ["✅ Schedule", "✖ Cancel"]
    kind_of = CONFIRM if kind == "every" else CONFIRM_AT
    return picker(target, kind_of, title, values, labels, outcomes=["✅ scheduled", "✖ cancelled"])


async def _full(asker: Asker, owner: str, besides: str = "") -> str | None:
    """Why `owner` may make no more schedules, or None."""
    cap = asker.options.schedules.max_per_user
    mine = [s for s in await asker.store.schedules() if s.owner == owner and s.state != "draft"]
    if len([s for s in mine if s.id != besides]) >= cap:
        return f"You have {cap} schedules already, the most one person may have. /schedules"
    return None


def _described(record: ScheduleRecord) -> str:
    when = f"at {record.words}" if record.one_shot else record.words
    return f"⏰ {when} ({record.zone}): {record.prompt}"


def _next(record: ScheduleRecord, now: float) -> str:
    runs = next_runs(rule_of(record), max(now, record.done_until), record.zone, record.created_at)
    if not runs:
        return "No run to come."
    return "Next: " + ", ".join(shown(moment, record.zone) for moment in runs)


async def _mine(asker: Asker, schedule_id: str) -> ScheduleRecord | None:
    """The schedule, if it is this conversation's; NotYours if the asker may not change it."""
    record = await asker.store.get_schedule(schedule_id)
    if record is None or record.key != asker.key:
        return None
    sender = asker.sender
    if sender.id != record.owner and not sender.named_in(asker.options.approvers_of(record.key)):
        raise NotYours(NOT_YOURS)
    return record


async def _confirmed(target: Target, value: str, asker: Asker) -> list[Op]:
    action, _, schedule_id = value.partition(":")
    record = await _mine(asker, schedule_id)
    if record is None:
        return target.renderer.notice("That schedule is gone.")
    if action != "ok":
        await asker.store.delete_schedule(record.id)
        return []
    if (full := await _full(asker, record.owner, besides=record.id)) is not None:
        await asker.store.delete_schedule(record.id)
        return target.renderer.notice(full)
    now = asker.wall()
    if record.one_shot and record.at <= now:
        await asker.store.delete_schedule(record.id)
        return target.renderer.notice("That time has passed; nothing was scheduled.")
    active = record.model_copy(update={"state": "active", "done_until": now})
    await asker.store.put_schedule(active)
    return target.renderer.notice(f"{_described(active)}\n{_next(active, now)}\n/schedules")


async def listing(target: Target, arg: str, asker: Asker) -> list[Op]:
    found = [s for s in await asker.store.schedules(asker.key) if s.state != "draft"]
    if not found:
        return target.renderer.notice(
            "No schedules here. `/every weekdays 9:00 …` or `/at tomorrow 8:00 …` makes one.",
            markdown=True,
        )
    now, ops = asker.wall(), []
    for record in found[:MAX_LISTED]:
        paused = record.state == "paused"
        by = record.owner_name or record.owner
        state = "⏸ paused" if paused else _next(record, now)
        title = f"{_described(record)}\n{state} · by {by}"
        toggle = ("resume", "▶ Resume", "▶ resumed") if paused else ("pause", "⏸ Pause", "⏸ paused")
        values = [f"{toggle[0]}:{record.id}", f"delete:{record.id}"]
        ops += picker(
            target,
            CHANGE,
            title,
            values,
            [toggle[1], "🗑 Delete"],
            outcomes=[toggle[2], "🗑 deleted"],
        )
    return ops


async def _changed(target: Target, value: str, asker: Asker) -> list[Op]:
    action, _, schedule_id = value.partition(":")
    record = await _mine(asker, schedule_id)
    if record is None:
        return target.renderer.notice("That schedule is gone.")
    match action:
        case "pause":
            await asker.store.put_schedule(record.model_copy(update={"state": "paused"}))
        case "resume":
            # The runs due while it was paused are neither run nor reported missed.
            now = max(asker.wall(), record.done_until)
            await asker.store.put_schedule(
                record.model_copy(update={"state": "active", "done_until": now})
            )
        case "delete":
            await asker.store.delete_schedule(record.id)
    return []


async def tz(target: Target, arg: str, asker: Asker) -> list[Op]:
    record = target.record
    settings = record.settings if record is not None else None
    zone = arg.strip()
    if not zone:
        current = _zone(target, asker)
        return target.renderer.notice(
            f"This chat's time zone is {current}. `/tz Europe/Berlin` changes it, "
            "`/tz default` goes back to the configured one.",
            markdown=True,
        )
    if zone.lower() == "default":
        chosen = None
    elif known_zone(zone):
        chosen = zone
    else:
        return target.renderer.notice(
            f"I don't know the time zone “{zone}”. Use a name like Europe/Berlin, "
            "America/New_York or UTC."
        )
    if settings is not None:
        await target.set_settings(settings.model_copy(update={"timezone": chosen}))
    current = _zone(target, asker)
    return target.renderer.notice(
        f"Time zone: {current}. New schedules use it; those made before keep theirs."
    )


CONFIRM = Picker("schedule", Personal(_confirmed))
CONFIRM_AT = Picker("schedule-at", Personal(_confirmed))
CHANGE = Picker("schedules", Personal(_changed))
