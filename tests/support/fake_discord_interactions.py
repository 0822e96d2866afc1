"""Interactions in the fake Discord: a user's button press, slash command and modal
submission dispatched as INTERACTION_CREATE, and the bot's answers
(docs.discord.com/developers/interactions/receiving-and-responding).

An interaction must be answered within 3 seconds (`ANSWER_WITHIN`) through
`POST /interactions/{id}/{token}/callback`, once: a second answer gets 400 code 40060
("Interaction has already been acknowledged."), a late one 404 code 10062 ("Unknown
interaction") and the interaction is recorded as failed — what Discord's client shows as
"This interaction failed". Callback types: 4 (a message), 5 (deferred: a "thinking"
message, flag LOADING), 6 (deferred update of the component's message), 7 (update the
component's message), 9 (a modal); 6 and 7 only answer a component (or a modal submitted
from one), 9 nothing that is itself a modal submit. With `?with_response=1` the answer is
the interaction callback response (`interaction` and the `resource` message).

The interaction's token then serves as a webhook for 15 minutes (`TOKEN_LIFE`; after it
401 code 50027): `POST /webhooks/{app_id}/{token}` sends a followup (404 code 10015
"Unknown Webhook" before the interaction is answered; after a deferred answer the first
followup fills the thinking message), and `/webhooks/{app_id}/{token}/messages/@original`
(or a followup's id) reads, edits or deletes the answer.

The user side checks what Discord's client would not let a user do: pressing a button that
is not on the message or is disabled, a command that was never synced, a modal submitted
twice, by someone else, or with a required field empty or a value over its max_length.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, ClassVar

from tests.support.fake_discord_checks import ApiError, check_modal, form_error
from tests.support.fake_discord_model import (
    ACTION_ROW,
    ALICE,
    ANSWER_WITHIN,
    APP_ID,
    APPLICATION_COMMAND,
    BOT,
    BUTTON,
    DM,
    EPHEMERAL,
    GUILD_ID,
    LABEL,
    LOADING,
    MESSAGE_COMPONENT,
    MODAL_SUBMIT,
    TEXT_INPUT,
    TOKEN_LIFE,
    Interaction,
    Message,
    Modal,
    User,
    member_json,
    permissions_of,
    walk,
)
from tests.support.fake_discord_store import Store

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tests.support.fake_discord_model import Call

Json = dict[str, Any]
# Callback types (interaction-response-object-interaction-callback-type).
MESSAGE, DEFERRED_MESSAGE, DEFERRED_UPDATE, UPDATE, MODAL = 4, 5, 6, 7, 9
# Option types whose value is sent as given (application-command-option-type).
_OPTION_TYPES = {3: str, 4: int, 5: bool, 10: float}
_WEBHOOK = "/webhooks/{webhook_id}/{webhook_token}"


class InteractionMethods(Store):
    ROUTES: ClassVar[list[tuple[str, str, str]]] = [
        ("POST", "/interactions/{interaction_id}/{interaction_token}/callback", "_callback"),
        ("POST", _WEBHOOK, "_followup"),
        ("GET", _WEBHOOK + "/messages/{message_id}", "_webhook_get"),
        ("PATCH", _WEBHOOK + "/messages/{message_id}", "_webhook_edit"),
        ("DELETE", _WEBHOOK + "/messages/{message_id}", "_webhook_delete"),
    ]

    # --- the user's side -----------------------------------------------------------------

    async def press(
        self, message: Message | int, custom_id: str, *, user: User = ALICE
    ) -> Interaction:
        """A press on the button `custom_id` of a bot message (INTERACTION_CREATE type 3)."""
        found = message if isinstance(message, Message) else self.all_messages[int(message)]
        found = self.all_messages[found.id]  # the message as it is now
        buttons = [c for c in walk(found.components) if c.get("type") == BUTTON]
        button = next((b for b in buttons if b.get("custom_id") == custom_id), None)
        if found.deleted or button is None or button.get("disabled"):
            raise LookupError(f"no enabled button {custom_id!r} on message {found.id}")
        shown_to = self.interactions.get(found.interaction_id or 0)
        if found.ephemeral and shown_to is not None and shown_to.user.id != user.id:
            raise LookupError(f"message {found.id} is shown to {shown_to.user.username} only")
        data = {"custom_id": custom_id, "component_type": BUTTON}
        return await self._interact(MESSAGE_COMPONENT, found.channel_id, user, data, found)

    async def slash(
        self,
        channel_id: int,
        name: str,
        options: Mapping[str, object] | None = None,
        *,
        user: User = ALICE,
    ) -> Interaction:
        """The slash command `/name` used in `channel_id` (INTERACTION_CREATE type 2)."""
        channel = self.channel(channel_id)
        scopes = [GUILD_ID, None] if channel.guild_id else [None]
        known = [c for s in scopes for c in self.commands.get(s, []) if c.get("type", 1) == 1]
        command = next((c for c in known if c["name"] == name), None)
        if command is None:
            raise LookupError(f"/{name} was not synced (synced: {[c['name'] for c in known]})")
        data: Json = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": _options(command, dict(options or {})),
        }
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        return await self._interact(APPLICATION_COMMAND, channel.id, user, data)

    async def submit_modal(
        self, shown: Modal | Interaction, values: Mapping[str, str], *, user: User = ALICE
    ) -> Interaction:
        """Submit a modal the bot showed (INTERACTION_CREATE type 5); `values` by the
        text inputs' custom_id, unnamed fields keep their prefilled value."""
        modal = shown if isinstance(shown, Modal) else self._modal_of(shown)
        if modal.submitted or user.id != modal.user.id:
            raise LookupError(f"modal {modal.custom_id!r} is not open for {user.username}")
        filled = {f.custom_id: str(values.get(f.custom_id, f.value)) for f in modal.fields}
        for field in modal.fields:
            value = filled[field.custom_id]
            if (field.required and not value) or not len(value) <= field.max_length:
                raise ValueError(f"{field.custom_id!r} cannot be submitted as {value!r}")
        unknown = set(values) - set(filled)
        if unknown:
            raise LookupError(f"the modal has no fields {sorted(unknown)}")
        origin = self.interactions[modal.interaction_id]
        data = {"custom_id": modal.custom_id, "components": _echo(modal.components, filled)}
        message = self.all_messages.get(origin.message_id or 0)
        modal.submitted = True
        return await self._interact(MODAL_SUBMIT, origin.channel_id, user, data, message)

    def _modal_of(self, interaction: Interaction) -> Modal:
        found = [m for m in self.modals if m.interaction_id == interaction.id]
        if not found:
            raise LookupError(f"interaction {interaction.id} was not answered with a modal")
        return found[-1]

    async def _interact(
        self, kind: int, channel_id: int, user: User, data: Json, message: Message | None = None
    ) -> Interaction:
        await self.connected()
        channel = self.channel(channel_id)
        interaction = Interaction(
            self.snowflake(),
            secrets.token_urlsafe(48),
            kind,
            channel.id,
            user,
            data,
            self.clock(),
            self.clock,
            guild_id=channel.guild_id,
            message_id=message.id if message else None,
        )
        self.interactions[interaction.id] = interaction
        payload = self._interaction_json(interaction, message)
        await self.gateway.dispatch("INTERACTION_CREATE", lambda _: payload)
        return interaction

    def _interaction_json(self, interaction: Interaction, message: Message | None) -> Json:
        channel = self.channel(interaction.channel_id)
        out: Json = {
            "id": str(interaction.id),
            "application_id": str(APP_ID),
            "type": interaction.type,
            "data": interaction.data,
            "channel": channel.json(),
            "channel_id": str(channel.id),
            "token": interaction.token,
            "version": 1,
            "app_permissions": str(permissions_of(BOT)),
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": self.upload_limit,
            "context": 1 if channel.type == DM else 0,
        }
        if channel.guild_id:
            out |= {
                "guild_id": str(channel.guild_id),
                "guild": {"id": str(channel.guild_id), "locale": "en-US", "features": []},
                "guild_locale": "en-US",
                "member": member_json(interaction.user, permissions=True),
                "authorizing_integration_owners": {"0": str(channel.guild_id)},
            }
        else:
            out |= {"user": interaction.user.json(), "authorizing_integration_owners": {"0": "0"}}
        if message is not None:
            out["message"] = message.json()
        return out

    # --- the bot's answers -------------------------------------------------------------

    async def _callback(self, call: Call, p: dict[str, str]) -> Json | None:
        interaction = self.interactions.get(int(p["interaction_id"]))
        if interaction is None or interaction.token != p["interaction_token"]:
            raise ApiError(404, 10062, "Unknown interaction")
        if interaction.answered:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        now = self.clock()
        if now - interaction.at > ANSWER_WITHIN:
            interaction.late = True  # Discord has shown "This interaction failed"
            raise ApiError(404, 10062, "Unknown interaction")
        body = dict(call.json or {})
        kind = int(body.get("type") or 0)
        resource = await self._answer(interaction, kind, dict(body.get("data") or {}), call.files)
        interaction.response_type, interaction.response = kind, body
        interaction.answered_at = now
        if call.query.get("with_response", "").lower() not in ("1", "true"):
            return None
        summary: Json = {"id": str(interaction.id), "type": interaction.type}
        if resource is not None:
            summary |= {
                "response_message_id": str(resource.id),
                "response_message_loading": bool(resource.flags & LOADING),
                "response_message_ephemeral": resource.ephemeral,
            }
        out: Json = {"interaction": summary}
        if resource is not None:
            out["resource"] = {"type": kind, "message": resource.json()}
        return out

    async def _answer(
        self, interaction: Interaction, kind: int, data: Json, files: list[tuple[str, bytes]]
    ) -> Message | None:
        """Carry out an answer of type `kind`; the message it shows, if any."""
        from_component = interaction.message_id is not None
        if kind in (DEFERRED_UPDATE, UPDATE) and not from_component:
            raise _type_invalid()
        if kind == MODAL:
            if interaction.type == MODAL_SUBMIT:
                raise _type_invalid()
            fields = check_modal(data)
            self.modals.append(
                Modal(
                    interaction.id,
                    interaction.user,
                    str(data["custom_id"]),
                    str(data["title"]),
                    list(data["components"]),
                    fields,
                    self.clock(),
                )
            )
            return None
        channel = self.channel(interaction.channel_id)
        if kind == MESSAGE:
            message = self.new_message(channel, BOT, data, files)
        elif kind == DEFERRED_MESSAGE:
            flags = LOADING | (int(data.get("flags") or 0) & EPHEMERAL)
            message = self.new_message(channel, BOT, {"flags": flags}, check=False)
        elif kind in (DEFERRED_UPDATE, UPDATE):
            message = self.message_in(channel.id, interaction.message_id or 0)
            interaction.original_id = message.id
            if kind == DEFERRED_UPDATE:
                return None
            self.edit(message, data, files)
            await self.announce("MESSAGE_UPDATE", message)
            return message
        else:
            raise _type_invalid()
        message.interaction_id = interaction.id
        interaction.original_id = message.id
        await self.announce("MESSAGE_CREATE", message)
        return message

    # --- the interaction's webhook ---------------------------------------------------

    def _hooked(self, p: dict[str, str]) -> Interaction:
        """The interaction whose token the webhook route names, while it is valid."""
        found = [i for i in self.interactions.values() if i.token == p["webhook_token"]]
        if int(p["webhook_id"]) != APP_ID or not found or not found[0].answered:
            raise ApiError(404, 10015, "Unknown Webhook")
        if self.clock() - found[0].at > TOKEN_LIFE:
            raise ApiError(401, 50027, "Invalid Webhook Token")
        return found[0]

    def _hooked_message(self, interaction: Interaction, message_id: str) -> Message:
        wanted = interaction.original_id if message_id == "@original" else int(message_id)
        mine = {interaction.original_id, *interaction.followup_ids}
        message = self.all_messages.get(wanted or 0)
        if message is None or message.deleted or message.id not in mine:
            raise ApiError(404, 10008, "Unknown Message")
        return message

    async def _followup(self, call: Call, p: dict[str, str]) -> Json | None:
        interaction = self._hooked(p)
        payload = dict(call.json or {})
        original = self.all_messages.get(interaction.original_id or 0)
        if original is not None and original.flags & LOADING and not original.deleted:
            message = await self._fill(original, payload, call.files)
        else:
            channel = self.channel(call.query.get("thread_id") or interaction.channel_id)
            message = self.new_message(channel, BOT, payload, call.files)
            message.interaction_id = interaction.id
            await self.announce("MESSAGE_CREATE", message)
        interaction.followup_ids.append(message.id)
        wait = call.query.get("wait", "").lower() in ("1", "true")
        return message.json() if wait else None

    async def _fill(
        self, message: Message, payload: Json, files: list[tuple[str, bytes]]
    ) -> Message:
        """The thinking message of a deferred answer, given its content."""
        self.edit(message, payload, files)
        message.flags &= ~LOADING
        await self.announce("MESSAGE_UPDATE", message)
        return message

    async def _webhook_get(self, call: Call, p: dict[str, str]) -> Json:
        return self._hooked_message(self._hooked(p), p["message_id"]).json()

    async def _webhook_edit(self, call: Call, p: dict[str, str]) -> Json:
        message = self._hooked_message(self._hooked(p), p["message_id"])
        if message.flags & LOADING:
            return (await self._fill(message, dict(call.json or {}), call.files)).json()
        self.edit(message, dict(call.json or {}), call.files)
        await self.announce("MESSAGE_UPDATE", message)
        return message.json()

    async def _webhook_delete(self, call: Call, p: dict[str, str]) -> None:
        message = self._hooked_message(self._hooked(p), p["message_id"])
        message.deleted = True
        await self.announce_delete(message)


def _type_invalid() -> ApiError:
    return form_error(
        ["type"],
        "INTERACTION_RESPONSE_TYPE_INVALID",
        "Interaction response type is not valid for this interaction",
    )


def _options(command: Json, given: dict[str, object]) -> list[Json]:
    """`given` as the command's options, typed as it declares them."""
    declared = {str(o["name"]): o for o in command.get("options") or []}
    unknown = set(given) - set(declared)
    if unknown:
        raise LookupError(f"/{command['name']} has no options {sorted(unknown)}")
    missing = [n for n, o in declared.items() if o.get("required") and n not in given]
    if missing:
        raise ValueError(f"/{command['name']} needs {missing}")
    out = []
    for name, value in given.items():
        kind = int(declared[name]["type"])
        convert = _OPTION_TYPES.get(kind, str)
        out.append({"name": name, "type": kind, "value": convert(value)})
    return out


def _echo(components: list[Json], values: dict[str, str]) -> list[Json]:
    """A modal's components as its submission carries them, with the values entered."""
    echoed: list[Json] = []
    for component in components:
        if component.get("type") == ACTION_ROW:
            inner = component["components"][0]
            filled = {
                "type": TEXT_INPUT,
                "custom_id": inner["custom_id"],
                "value": values.get(inner["custom_id"], ""),
            }
            echoed.append({"type": ACTION_ROW, "components": [filled]})
        elif component.get("type") == LABEL:
            inner = component.get("component") or {}
            answer: Json = {"type": inner.get("type"), "custom_id": inner.get("custom_id")}
            if inner.get("type") == TEXT_INPUT:
                answer["value"] = values.get(str(inner.get("custom_id")), "")
            else:
                answer["values"] = []
            echoed.append({"type": LABEL, "component": answer})
    return echoed
