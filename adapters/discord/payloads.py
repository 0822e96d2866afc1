"""discord.py's objects back as the API's JSON, for the pure converter (convert.py).

discord.py hands events over as objects (a `Message`, an `Interaction`); the
converter reads payloads as Discord documents them, so that it is tested on JSON
fixtures and knows nothing of the SDK. These write back the fields it reads, the way
Discord writes them (ids as strings; a member's roles without @everyone), and say
what kind of place a channel is (`Place`), which a message does not carry.
"""

from __future__ import annotations

from typing import Any

import discord

from adapters.discord.convert import Place, PlaceKind

Json = dict[str, Any]


def place_of(channel: object) -> Place:
    """What kind of place `channel` is, from discord.py's view of it."""
    if isinstance(channel, discord.DMChannel):
        return Place(str(channel.id), "dm")
    if isinstance(channel, discord.Thread):
        forum = isinstance(channel.parent, discord.ForumChannel)
        kind: PlaceKind = "forum_post" if forum else "thread"
        return Place(str(channel.id), kind, str(channel.guild.id), str(channel.parent_id))
    if isinstance(channel, discord.TextChannel):
        return Place(str(channel.id), "text", str(channel.guild.id))
    return Place(str(getattr(channel, "id", "")), "other")


def user_json(user: discord.abc.User) -> Json:
    return {
        "id": str(user.id),
        "username": user.name,
        "global_name": user.global_name,
        "bot": user.bot,
    }


def member_json(user: object) -> Json | None:
    if not isinstance(user, discord.Member):
        return None
    return {"roles": [str(r.id) for r in user.roles if not r.is_default()]}


def message_json(message: discord.Message) -> Json:
    reference = message.reference
    return {
        "id": str(message.id),
        "type": message.type.value,
        "content": message.content,
        "author": user_json(message.author),
        "member": member_json(message.author),
        "mentions": [{"id": str(u.id)} for u in message.mentions],
        "attachments": [
            {
                "url": a.url,
                "filename": a.filename,
                "content_type": a.content_type,
                "size": a.size,
            }
            for a in message.attachments
        ],
        "flags": message.flags.value,
        "message_reference": (
            {"message_id": str(reference.message_id)}
            if reference is not None and reference.message_id is not None
            else None
        ),
    }


def interaction_json(interaction: discord.Interaction[Any]) -> Json:
    member = member_json(interaction.user)
    out: Json = {
        "id": str(interaction.id),
        "type": interaction.type.value,
        "token": interaction.token,
        "application_id": str(interaction.application_id),
        "data": dict(interaction.data or {}),
        "user": user_json(interaction.user),
    }
    if member is not None:
        out["member"] = {**member, "user": out["user"]}
    if interaction.message is not None:
        out["message"] = {"id": str(interaction.message.id)}
    return out
