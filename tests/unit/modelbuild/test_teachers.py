"""Weak labels from the teachers: HateSonar's offensive calls stand only where the profanity
teacher agrees; its hate calls and chatterbot's lines are unchanged."""

from __future__ import annotations

from modelbuild.datasets import (
    SENTIMENT,
    TOXICITY,
    Example,
    SecondOpinion,
    TaskData,
    toxicity_examples,
)

TWEETS = ("thank ya!!!!!", "you stupid fucking clown", "they should all be deported")


def _teacher(texts: list[str]) -> list[list[float]]:
    """Offensive for the first two tweets, hate for the third, none otherwise."""
    calls = {TWEETS[0]: [0.2, 0.8, 0.0], TWEETS[1]: [0.1, 0.9, 0.0], TWEETS[2]: [0.1, 0.1, 0.8]}
    return [calls.get(t, [0.9, 0.05, 0.05]) for t in texts]


def _profane(texts: list[str]) -> list[float]:
    return [0.99 if "fucking" in t else 0.01 for t in texts]


def _labels(second_opinion: SecondOpinion | None) -> dict[str, str]:
    sentiment = TaskData(
        "sentiment", SENTIMENT, tuple(Example(t, 1, "en", "tweets", False) for t in TWEETS)
    )
    data = toxicity_examples(
        {"en": ["you are a robot"], "zh": []},
        {"spam": [], "ham": []},
        sentiment,
        [],
        _teacher,
        {"en": ["moron"], "zh": ["废物"], "zh_ads": []},
        7,
        second_opinion=second_opinion,
    )
    return {e.text: TOXICITY[e.label] for e in data.examples if e.source == "tweets"}


def test_an_offensive_call_needs_the_profanity_teacher() -> None:
    """ "thank ya!!!!!" loses HateSonar's offensive call (not profane); the profane insult keeps
    it; the hate call needs no profanity."""
    assert _labels(_profane) == {TWEETS[0]: "none", TWEETS[1]: "offensive", TWEETS[2]: "hate"}


def test_without_a_second_opinion_the_first_teacher_decides() -> None:
    """The previous behaviour: every confident call stands."""
    assert _labels(None) == {TWEETS[0]: "offensive", TWEETS[1]: "offensive", TWEETS[2]: "hate"}


def test_only_lines_both_teachers_call_clean_are_vetted() -> None:
    """A line is vetted when HateSonar says none and the profanity teacher says not profane;
    the teachers read the canonical text (lower case)."""
    import numpy as np

    from modelbuild.teacher import clean_lines

    lines = ["See you at NINE", "what the fuck", "they should all be deported"]
    seen: list[str] = []

    def none_of(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return np.array([0.1 if "deported" in t else 0.9 for t in texts], dtype=np.float32)

    def profane_of(texts: list[str]) -> np.ndarray:
        return np.array([0.9 if "fuck" in t else 0.1 for t in texts], dtype=np.float32)

    assert clean_lines(lines, none_of, profane_of) == frozenset({"See you at NINE"})
    assert "see you at nine" in seen
    assert clean_lines([], none_of, profane_of) == frozenset()
