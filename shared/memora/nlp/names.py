"""Entity names as entity resolution and the read path's entity retriever compare them."""

from __future__ import annotations

import re

_PUNCT = re.compile(r"[^\w\s&+-]")
_SPACE = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Lower case, no possessive, punctuation as spaces, no leading "the"."""
    name = name.strip().lower()
    name = re.sub(r"'s$|’s$", "", name)
    name = _SPACE.sub(" ", _PUNCT.sub(" ", name)).strip()
    return name[4:] if name.startswith("the ") else name
