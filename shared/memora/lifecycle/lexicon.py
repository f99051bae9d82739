"""The small lexicon of relation words memora.lifecycle.changes maps sentence structure with:
which relation lemmas and attribute nouns name which attribute family, which verbs hold a state,
change or end one, and the markers of plans, additions and time."""

from __future__ import annotations

from memora.basics.turns import SPEAKER_NAME

# families one value at a time holds: a new value replaces the old
SINGLE = frozenset(
    {"residence", "employer", "school", "occupation", "relationship_status", "email", "phone",
     "car", "age", "major", "diet", "manager"}
)  # fmt: skip
# a family that stands for several (moved/transferred to an institution: employer or school)
# ("any": sold, left, replaced: whatever family held that value)
GROUPED = {
    "affiliation": frozenset({"employer", "school", "affiliation"}),
    "role": frozenset({"occupation", "role"}),
    "occupation": frozenset({"occupation", "role"}),
    "work": frozenset({"employer", "occupation", "role"}),
    "place": frozenset({"residence", "employer", "school", "affiliation"}),
}
# nouns that name an attribute of their possessor ("Jin's favourite band", "my e-mail address")
ATTRIBUTE_NOUNS = {
    "home": "residence", "hometown": "residence", "employer": "employer", "job": "employer",
    "title": "occupation", "position": "occupation", "post": "employer", "role": "occupation",
    "email": "email", "e-mail": "email", "mail": "email", "phone": "phone", "number": "phone",
    "mobile": "phone", "landline": "phone", "cell": "phone", "car": "car", "vehicle": "car",
    "manager": "manager", "boss": "manager", "supervisor": "manager", "lead": "manager",
    "school": "school", "major": "major", "diet": "diet", "age": "age",
}  # fmt: skip
SPELLING = {"color": "colour", "favorite": "favourite", "neighbor": "neighbour"}
PARTNERS = frozenset({"girlfriend", "boyfriend", "partner", "fiance", "fiancé", "fiancée"})
RELATIONSHIP_WORDS = {
    "married": "married", "single": "single", "engaged": "engaged", "divorced": "divorced",
    "divorce": "divorced", "separated": "separated", "separate": "separated",
    "widowed": "widowed", "marry": "married", "engage": "engaged", "dating": "dating",
    "date": "dating", "relationship": "in a relationship",
}  # fmt: skip
DIET_WORDS = frozenset(
    {"vegan", "vegetarian", "pescatarian", "keto", "paleo", "carnivore", "meat", "fish"}
)
INSTITUTIONS = frozenset(
    {"school", "academy", "college", "university", "primary", "high", "lycée", "lycee",
     "gymnasium", "kindergarten", "nursery", "institute"}
)  # fmt: skip
GROUPS = frozenset({"club", "team", "group", "choir", "band", "gym", "class", "society", "league"})
# verbs holding a state (they count in the present tense only) → (family, preposition of value)
STATES: dict[str, tuple[str, str | None]] = {
    "live": ("residence", "in"), "reside": ("residence", "in"), "base": ("residence", "in"),
    "work": ("employer", "at|for|with"), "employ": ("employer", "by|at"),
    "attend": ("school", None), "drive": ("car", None), "report": ("manager", "to"),
    "follow": ("diet", None),
}  # fmt: skip
# verbs of change (any tense) → (family, preposition of the new value)
CHANGES: dict[str, tuple[str, str | None]] = {
    "move": ("residence", "to"), "relocate": ("residence", "to"), "settle": ("residence", "in"),
    "join": ("employer", None), "hire": ("employer", "by|at"), "transfer": ("affiliation", "to"),
    "switch": ("affiliation", "to"), "promote": ("occupation", "to"),
    "retrain": ("occupation", "as"), "turn": ("age", None),
}  # fmt: skip
# verbs ending a value: the object (or the prepositional object) is what ended
ENDS: dict[str, tuple[str, str | None]] = {
    "leave": ("affiliation", None), "quit": ("affiliation", None), "resign": ("employer", "from"),
    "retire": ("occupation", "from"), "sell": ("any", None), "drop": ("any", None),
    "trade": ("any", "in"), "replace": ("any", None),
}  # fmt: skip
PHRASAL_ENDS = {("step", "down"): "employer", ("lay", "off"): "employer",
                ("give", "up"): "any", ("break", "up"): "relationship_status"}  # fmt: skip
PLANS = frozenset(
    {"plan", "want", "hope", "consider", "think", "wish", "intend", "dream", "try", "aim",
     "expect", "like", "love", "use", "apply", "go", "decide", "promise", "need"}
)  # fmt: skip
FUTURE_MODALS = frozenset(
    {"might", "may", "could", "would", "should", "will", "shall", "'ll", "'d"}
)
ADDITIVE = frozenset({"also", "too", "additionally", "another", "second", "other", "well"})
NOW = frozenset({"now", "nowadays", "currently", "anymore", "longer", "again"})
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "we", "us", "our", "myself"})
THIRD_PERSON = frozenset({"he", "she", "they", "him", "her", "his", "hers", "their", "them"})
SPEAKER = SPEAKER_NAME  # memora.basics.turns
DROP = frozenset(
    {"a", "an", "the", "my", "his", "her", "their", "our", "your", "its", "now", "new", "old",
     "current", "'s", "these", "days", "currently", "again", "fully"}
)  # fmt: skip
