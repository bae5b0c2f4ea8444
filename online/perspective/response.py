"""An analyze answer in Perspective's response shape.

``attributeScores.{NAME}``: ``summaryScore {value, type}`` and ``spanScores``, each
``{begin, end, score {value, type}}`` with ``begin`` / ``end`` in code points of the comment as
sent (end exclusive). Without ``spanAnnotations``, or when nothing was located, one span covers
the whole comment at the summary score, as Perspective answers; with it, the spans rule hits and
the model's attribution located. An attribute below its ``scoreThreshold`` is left out.
``languages`` (the ones scored in), ``detectedLanguages`` and ``clientToken`` (when sent).
"""

from __future__ import annotations

from online.perspective.mapping import AttributeScore
from online.perspective.request import AnalyzeRequest

__all__ = ["analyze_response"]


def _score(value: float, score_type: str) -> dict[str, object]:
    return {"value": round(value, 6), "type": score_type}


def _spans(
    request: AnalyzeRequest, score: AttributeScore, score_type: str
) -> list[dict[str, object]]:
    if request.span_annotations and score.spans:
        return [
            {"begin": start, "end": end, "score": _score(value, score_type)}
            for (start, end), value in score.spans
        ]
    return [{"begin": 0, "end": len(request.text), "score": _score(score.value, score_type)}]


def analyze_response(
    request: AnalyzeRequest,
    languages: list[str],
    detected: list[str],
    scores: dict[str, AttributeScore],
) -> dict[str, object]:
    """The response body for ``request`` given each requested attribute's score."""
    attribute_scores: dict[str, object] = {}
    for attribute in request.attributes:
        score = scores[attribute.name]
        if attribute.score_threshold is not None and score.value < attribute.score_threshold:
            continue
        attribute_scores[attribute.name] = {
            "spanScores": _spans(request, score, attribute.score_type),
            "summaryScore": _score(score.value, attribute.score_type),
        }
    body: dict[str, object] = {
        "attributeScores": attribute_scores,
        "languages": languages,
        "detectedLanguages": detected,
    }
    if request.client_token is not None:
        body["clientToken"] = request.client_token
    return body
