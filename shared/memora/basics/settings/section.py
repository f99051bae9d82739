"""What every section of the settings shares: the base class and the helpers of its fields."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel
from pydantic.json_schema import JsonDict


class Section(BaseModel):
    """A group of settings. The first line of a subclass's docstring is its title in
    docs/configuration.md, the paragraph after it its introduction; each field carries a
    `description`. A section is never built alone: `Settings` inherits its fields."""


def env_names(*names: str) -> AliasChoices:
    """The environment names of a setting, the first present winning: today's name first, then
    seed 003's (docs/llm.md, "Configuration names")."""
    return AliasChoices(*names)


def shown_default(text: str) -> JsonDict:
    """A field's `json_schema_extra` naming its default in the reference, for a default that
    depends on the machine or on another setting (a temporary directory, a port + 1)."""
    return {"shown_default": text}
