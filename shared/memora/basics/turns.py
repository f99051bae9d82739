"""How a stored conversation turn names its speaker: the pipeline writes a transcript turn as
"Maya: I moved to Berlin". Two readings of that prefix, one place for both:

- `SPEAKER_PREFIX`: who speaks, loosely (up to 40 characters of name-like text before the
  colon: "Dr. Ana", "maya_b"), for entity resolution's speakers; a PostgreSQL regular
  expression too (`store.entity_names.speakers` reads the agent's speakers in SQL).
- `SPEAKER_NAME`: a prefix of capitalised words only, for the parsers of the lifecycle and
  relations, which must not take a label ("Family update: ...") for a speaker.
"""

from __future__ import annotations

import re

SPEAKER_PREFIX = r"^\s*([A-Z][\w.'\- ]{0,40}?)\s*:\s"
SPEAKER_NAME = re.compile(r"^\s*([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s+(?=\S)")
