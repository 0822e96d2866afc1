"""The base class of every record that crosses the agent's stdio.

Agents add fields release by release, so every wire model keeps what it does not
know (`extra="allow"`) instead of dropping it; nothing here is ever frozen to one
agent version.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Wire(BaseModel):
    """A JSON object from or to the agent; unknown fields are kept as extras."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
