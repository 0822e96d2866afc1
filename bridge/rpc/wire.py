"""The base class of every record that crosses the agent's stdio.

Agents add fields release by release, so every wire model keeps what it does not
know (`extra="allow"`) instead of dropping it; nothing here is ever frozen to one
agent version. `tags` reads a union's discriminator values off its models, so a
list of known types or methods is derived from the union, never kept beside it.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict


class Wire(BaseModel):
    """A JSON object from or to the agent; unknown fields are kept as extras."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def tags(union: object, field: str) -> frozenset[str]:
    """The values of the `Literal` field `field` across the models of `union` (a model,
    or a union of them, `Annotated` and nested as the discriminated unions are)."""
    if get_origin(union) is Annotated:
        return tags(get_args(union)[0], field)
    members = get_args(union)
    if members:
        return frozenset().union(*(tags(member, field) for member in members))
    if not (isinstance(union, type) and issubclass(union, BaseModel)):
        raise TypeError(f"not a model or a union of models: {union!r}")
    annotation = union.model_fields[field].annotation
    if get_origin(annotation) is not Literal:
        raise TypeError(f"{union.__name__}.{field} is not a Literal")
    return frozenset(get_args(annotation))
