"""Think's prompt, personality descriptions and opinion drawing, against the fake LLM server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from memora.basics.config import Settings
from memora.nlp.llm import LLMClient, LLMUnavailable
from memora.think.personality import (
    HIGH_BIAS,
    LOW_BIAS,
    MODERATE_BIAS,
    bias_message,
    describe_trait,
    personality_lines,
)
from memora.think.reasoning import (
    OPINION_MARKER,
    THINK_MARKER,
    Evidence,
    Profile,
    think,
    think_messages,
)
from tests.fakes import LLM_TEST_SETTINGS, Fail, FakeOpenAI, Reply


def _client(fake: FakeOpenAI) -> LLMClient:
    return LLMClient(Settings(llm_base_url=fake.base_url, **LLM_TEST_SETTINGS))  # type: ignore[arg-type]


def _evidence(text: str, fact_type: str, confidence: float | None = None) -> Evidence:
    when = datetime(2024, 1, 15, tzinfo=UTC)
    return Evidence(uuid.uuid4(), text, fact_type, 0.9, when, None, confidence)


BASED_ON = {
    "world": [_evidence("Alice works at Google as a software engineer", "world")],
    "agent": [_evidence("I recommended remote-work tools to Alice", "agent")],
    "opinion": [_evidence("Remote work improves productivity", "opinion", 0.7)],
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "very low"),
        (0.19, "very low"),
        (0.2, "low"),
        (0.4, "moderate"),
        (0.59, "moderate"),
        (0.6, "high"),
        (0.79, "high"),
        (0.8, "very high"),
        (1.0, "very high"),
    ],
)
def test_describe_trait_thresholds(value: float, expected: str) -> None:
    assert describe_trait("openness", value) == f"{expected} openness"


@pytest.mark.parametrize(
    ("strength", "message"),
    [
        (0.0, LOW_BIAS),
        (0.39, LOW_BIAS),
        (0.4, MODERATE_BIAS),
        (0.69, MODERATE_BIAS),
        (0.7, HIGH_BIAS),
        (1.0, HIGH_BIAS),
    ],
)
def test_bias_message_thresholds(strength: float, message: str) -> None:
    assert bias_message(strength) == message


PERSONALITIES = [
    (
        {
            "openness": 0.9,
            "conscientiousness": 0.3,
            "extraversion": 0.7,
            "agreeableness": 0.2,
            "neuroticism": 0.5,
            "bias_strength": 0.8,
        },
        [
            "very high openness to new ideas",
            "low conscientiousness and organization",
            "high extraversion and sociability",
            "low agreeableness and cooperation",
            "moderate emotional sensitivity",
        ],
        HIGH_BIAS,
        "80%",
    ),
    (
        {
            "openness": 0.1,
            "conscientiousness": 0.95,
            "extraversion": 0.45,
            "agreeableness": 0.65,
            "neuroticism": 0.05,
            "bias_strength": 0.2,
        },
        [
            "very low openness to new ideas",
            "very high conscientiousness and organization",
            "moderate extraversion and sociability",
            "high agreeableness and cooperation",
            "very low emotional sensitivity",
        ],
        LOW_BIAS,
        "20%",
    ),
    (
        {},  # defaults: everything 0.5
        ["moderate openness to new ideas", "moderate emotional sensitivity"],
        MODERATE_BIAS,
        "50%",
    ),
]


@pytest.mark.parametrize(("personality", "lines", "system", "strength"), PERSONALITIES)
def test_prompt_carries_traits_and_bias_message(
    fake_llm: FakeOpenAI,
    personality: dict[str, float],
    lines: list[str],
    system: str,
    strength: str,
) -> None:
    fake_llm.script(Reply("I think remote work suits creative people."), when=THINK_MARKER)
    fake_llm.script(Reply({"opinions": []}), when=OPINION_MARKER)
    profile = Profile("a1", personality, "I am a creative software engineer.")
    result = think(_client(fake_llm), profile, "What do you think about remote work?", BASED_ON)
    assert result.text == "I think remote work suits creative people."
    request = fake_llm.requests_matching(THINK_MARKER)[0]
    sys_text, user = request.content_of("system"), request.content_of("user")
    assert system in sys_text
    for other in {HIGH_BIAS, MODERATE_BIAS, LOW_BIAS} - {system}:
        assert other not in sys_text
    for line in lines:
        assert f"- {line}\n" in user + "\n"
    assert f"Personality influence strength: {strength}" in user
    # seed 000 §4.3 layout, in order
    order = [
        "MY IDENTITY & EXPERIENCES:",
        "WHAT I KNOW ABOUT THE WORLD:",
        "MY EXISTING OPINIONS & BELIEFS:",
        "Your personality traits:",
        "Personality influence strength",
        "Your background:",
        "QUESTION:",
    ]
    positions = [user.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "I recommended remote-work tools to Alice" in user.split("WHAT I KNOW")[0]
    assert "Remote work improves productivity (2024-01-15) [confidence: 0.70]" in user
    assert "I am a creative software engineer." in user


def test_reflections_have_their_part_after_the_opinions_only_when_found() -> None:
    reflection = Evidence(uuid.uuid4(), "Alice works best without interruptions", "reflection",
                          0.7, datetime(2024, 2, 3, tzinfo=UTC))  # fmt: skip
    profile = Profile("a1", {})
    plain = think_messages(profile, "q?", BASED_ON)[1]["content"]
    assert "MY REFLECTIONS" not in plain
    assert think_messages(profile, "q?", BASED_ON | {"reflection": []})[1]["content"] == plain
    user = think_messages(profile, "q?", BASED_ON | {"reflection": [reflection]})[1]["content"]
    part = user.split("MY REFLECTIONS (insights I drew from my memories):\n")[1]
    assert part.startswith("- Alice works best without interruptions (2024-02-03)\n")
    assert user.index("MY EXISTING OPINIONS") < user.index("MY REFLECTIONS")
    assert user.index("MY REFLECTIONS") < user.index("Your personality traits:")


def test_personality_lines_ignore_unknown_keys() -> None:
    assert len(personality_lines({"openness": 1.0, "mood": 0.1})) == 5  # type: ignore[dict-item]


def test_opinions_are_drawn_and_linked_to_the_existing_one(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        Reply("Remote work is great for focused work, so I am even more convinced."),
        when=THINK_MARKER,
    )
    fake_llm.script(
        Fail(429),
        Reply(
            {
                "opinions": [
                    {
                        "statement": "Remote work improves productivity",
                        "reasons": ["no commute"],
                        "confidence": 0.9,
                        "updates": 1,
                        "stance": "supports",
                    },
                    {
                        "statement": "Offices are for socialising",
                        "reasons": [],
                        "confidence": 0.4,
                        "updates": None,
                        "stance": "new",
                    },
                ]
            }
        ),
        when=OPINION_MARKER,
    )
    result = think(_client(fake_llm), Profile("a1", {}), "Remote work?", BASED_ON)
    assert [o.statement for o in result.new_opinions] == [
        "Remote work improves productivity",
        "Offices are for socialising",
    ]
    first, second = result.new_opinions
    assert first.previous_id == BASED_ON["opinion"][0].id and first.stance == "supports"
    assert second.previous_id is None and second.stance == "new"
    extraction = fake_llm.requests_matching(OPINION_MARKER)[-1].content_of("user")
    assert "[1] Remote work improves productivity [confidence: 0.70]" in extraction
    assert "ANSWER:\nRemote work is great" in extraction


def test_answer_survives_failed_opinion_extraction(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(Reply("My answer."), when=THINK_MARKER)
    fake_llm.always(Reply("this is not JSON at all"), when=OPINION_MARKER)
    result = think(_client(fake_llm), Profile("a1", {}), "Q?", BASED_ON)
    assert result.text == "My answer."
    assert result.new_opinions == []
    assert result.opinion_error is not None and "LLMInvalidOutput" in result.opinion_error


def test_unavailable_llm_fails_think(fake_llm: FakeOpenAI) -> None:
    fake_llm.always(Fail(503))
    with pytest.raises(LLMUnavailable):
        think(_client(fake_llm), Profile("a1", {}), "Q?", BASED_ON)
