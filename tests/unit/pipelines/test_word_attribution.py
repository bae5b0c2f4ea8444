"""Leave-one-word-out attribution (``pipelines.attribution``) with a fake scorer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pipelines.attribution import (
    AttributedSpan,
    AttributionError,
    ModelAttribution,
    attribute,
    deciding_output,
    model_attribution_from_json,
    probability,
    variants,
    words,
)
from pipelines.canonical import OffsetError, OffsetMap, trace
from pipelines.scores import ModelScores


def _scores(hate: float) -> ModelScores:
    rest = 1.0 - hate
    return ModelScores((0.3, 0.4, 0.3), (0.7, 0.1, 0.1, 0.1), (rest / 2, rest / 2, hate))


class _Fake:
    """Hate is 0.2 plus the weight of each listed word the text contains; counts calls."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.calls: list[int] = []

    def __call__(self, texts: Sequence[str]) -> list[ModelScores]:
        self.calls.append(len(texts))
        return [self.one(text) for text in texts]

    def one(self, text: str) -> ModelScores:
        present = set(text.split())
        hate = 0.2 + sum(w for word, w in self.weights.items() if word in present)
        return _scores(min(hate, 0.99))


def test_the_word_that_carries_the_score_is_found_in_the_raw_text() -> None:
    raw = "well f.u.c.k y0u"
    traced = trace(raw)
    assert traced.canonical.text == "well fuck y0u"
    fake = _Fake({"fuck": 0.6, "y0u": 0.1})
    full = fake.one(traced.canonical.text)
    got = attribute(traced.canonical.text, traced.text_map, full, "toxicity.hate", fake)
    assert fake.calls == [3]  # one call, every word's variant in it
    assert [(s.start, s.end) for s in got.spans] == [(5, 12), (13, 16)]
    assert raw[5:12] == "f.u.c.k"
    assert raw[13:16] == "y0u"
    assert got.spans[0].drop == pytest.approx(0.6)
    assert got.output == "toxicity.hate"


def test_words_that_raise_or_keep_the_score_are_not_blamed() -> None:
    fake = _Fake({"bad": 0.5, "nice": -0.1})
    text = "a nice bad day"
    got = attribute(text, OffsetMap.identity(len(text)), fake.one(text), "toxicity.hate", fake)
    assert [(s.start, s.end) for s in got.spans] == [(7, 10)]


def test_at_most_top_k_spans_largest_drop_first() -> None:
    fake = _Fake({"a": 0.05, "b": 0.3, "c": 0.2, "d": 0.1})
    text = "a b c d"
    got = attribute(
        text, OffsetMap.identity(len(text)), fake.one(text), "toxicity.hate", fake, top_k=2
    )
    assert [(s.start, s.end) for s in got.spans] == [(2, 3), (4, 5)]


def test_at_most_max_words_are_tried_first_come() -> None:
    text = " ".join(f"w{i}" for i in range(50)) + " bad"
    fake = _Fake({"bad": 0.5})
    got = attribute(text, OffsetMap.identity(len(text)), fake.one(text), "toxicity.hate", fake)
    assert fake.calls == [32]
    assert got.spans == ()  # the word past the bound is never tried, so never blamed
    assert len(variants(text, 5).texts) == 5


def test_words_are_letter_and_digit_runs_and_each_cjk_character() -> None:
    assert words("hi, y0u!! 你好ok") == [(0, 2), (4, 7), (10, 11), (11, 12), (12, 14)]
    assert words("...") == []
    assert variants("go away").texts == (" away", "go ")


def test_an_empty_text_makes_no_call() -> None:
    fake = _Fake({})
    got = attribute("", OffsetMap.identity(0), _scores(0.9), "toxicity.hate", fake)
    assert got.spans == ()
    assert fake.calls == []


def test_a_map_of_another_text_and_an_unknown_output_are_refused() -> None:
    fake = _Fake({})
    with pytest.raises(OffsetError):
        attribute("abc def", OffsetMap.identity(3), _scores(0.9), "toxicity.hate", fake)
    with pytest.raises(AttributionError):
        attribute("abc", OffsetMap.identity(3), _scores(0.9), "toxicity.nope", fake)
    assert fake.calls == []


def test_the_deciding_output_is_the_first_model_reason() -> None:
    assert deciding_output(["rule:en.x", "toxicity.hate=0.912>=0.8"]) == "toxicity.hate"
    assert deciding_output(["grey_zone:toxicity=0.610"]) == "toxicity.offensive_or_hate"
    assert deciding_output(["severe:toxicity.hate=0.990"]) == "toxicity.hate"
    assert deciding_output(["grey_zone:harms.insult=0.700"]) == "harms.insult"
    assert deciding_output(["harms.threat=0.734>=0.5", "intent.spam=0.9>=0.8"]) == "harms.threat"
    assert deciding_output(["rule:en.x", "model:pending"]) is None
    assert probability(_scores(0.4), "toxicity.offensive_or_hate") == pytest.approx(0.7)


def test_the_stored_form_round_trips_and_holds_no_text() -> None:
    value = ModelAttribution("toxicity.hate", (AttributedSpan(5, 12, 0.61234),))
    stored = value.as_dict()
    assert stored == {"output": "toxicity.hate", "spans": [{"span": [5, 12], "drop": 0.6123}]}
    back = model_attribution_from_json(stored)
    assert back == ModelAttribution("toxicity.hate", (AttributedSpan(5, 12, 0.6123),))
    assert model_attribution_from_json(None) is None
    bad: object
    for bad in ({"spans": []}, {"output": "x", "spans": [{"span": [3, 3], "drop": 0.1}]}, []):
        with pytest.raises(AttributionError):
            model_attribution_from_json(bad)
