"""An analyze request body, parsed and checked against Perspective's request schema.

Fields (Perspective's names): ``comment.text`` (required) and ``comment.type`` (``PLAIN_TEXT``;
``HTML`` is refused: modstream moderates text as sent), ``requestedAttributes`` (required, at
least one: ``{NAME: {scoreType, scoreThreshold}}``), ``languages``, ``spanAnnotations``,
``doNotStore``, ``context`` (accepted and ignored: modstream scores the comment alone),
``clientToken``, ``communityId``, ``sessionId``. Unknown fields are refused, as Google's JSON
parsing refuses them. Every error names the field, never its value (a comment's text, a
context entry and the ids are the caller's data).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from online.perspective.errors import PerspectiveError
from pipelines.decode import MAX_ID_CHARS

__all__ = ["AnalyzeRequest", "RequestedAttribute", "parse_request"]

SCORE_TYPES = frozenset({"PROBABILITY"})
"""The score types answered (Perspective's only current one)."""
_TOP_FIELDS = frozenset(
    {
        "comment",
        "context",
        "requestedAttributes",
        "languages",
        "doNotStore",
        "clientToken",
        "sessionId",
        "spanAnnotations",
        "communityId",
    }
)
_MAX_ID_CHARS = MAX_ID_CHARS


@dataclass(frozen=True, slots=True)
class RequestedAttribute:
    name: str
    score_type: str = "PROBABILITY"
    score_threshold: float | None = None
    """Leave the attribute out of the answer when its summary score is below this."""


@dataclass(frozen=True, slots=True)
class AnalyzeRequest:
    text: str
    attributes: tuple[RequestedAttribute, ...]
    languages: tuple[str, ...] = ()
    """As sent (empty: detect them)."""
    span_annotations: bool = False
    do_not_store: bool = False
    client_token: str | None = None
    community_id: str | None = None
    session_id: str | None = None
    comment_type: str = "PLAIN_TEXT"


def _invalid(message: str) -> PerspectiveError:
    return PerspectiveError.invalid(message)


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise _invalid(f"Invalid JSON payload received. {where}: expected an object.")
    return value


def _optional_string(document: Mapping[str, object], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(f"Invalid value at '{name}': expected a string.")
    if len(value) > _MAX_ID_CHARS:
        raise _invalid(f"Invalid value at '{name}': at most {_MAX_ID_CHARS} characters.")
    return value


def _flag(document: Mapping[str, object], name: str) -> bool:
    value = document.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _invalid(f"Invalid value at '{name}': expected true or false.")
    return value


def _attribute(name: str, value: object) -> RequestedAttribute:
    options = _object(value if value is not None else {}, f"requestedAttributes.{name}")
    unknown = set(options) - {"scoreType", "scoreThreshold"}
    if unknown:
        field = sorted(unknown)[0]
        raise _invalid(f"Invalid JSON payload received. Unknown name \"{field}\" at '{name}'.")
    score_type = options.get("scoreType") or "PROBABILITY"
    if not isinstance(score_type, str) or score_type not in SCORE_TYPES:
        raise _invalid(f"Attribute {name} does not support score type: {score_type}")
    threshold = options.get("scoreThreshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, float | int)
        or not 0.0 <= threshold <= 1.0
    ):
        raise _invalid(f"Invalid value at 'requestedAttributes.{name}.scoreThreshold'.")
    return RequestedAttribute(name, score_type, None if threshold is None else float(threshold))


def _languages(document: Mapping[str, object]) -> tuple[str, ...]:
    value = document.get("languages")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _invalid("Invalid value at 'languages': expected a list of language codes.")
    return tuple(value)


def parse_request(body: bytes) -> AnalyzeRequest:
    """The request in ``body`` (JSON); ``PerspectiveError`` 400 naming what is wrong."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _invalid("Invalid JSON payload received.") from None
    document = _object(document, "request")
    unknown = set(document) - _TOP_FIELDS
    if unknown:
        field = sorted(unknown)[0]
        raise _invalid(f'Invalid JSON payload received. Unknown name "{field}": Cannot find field.')
    comment = _object(document.get("comment"), "comment")
    text = comment.get("text")
    if not isinstance(text, str) or not text.strip():
        raise PerspectiveError.invalid("Comment must be non-empty.", "COMMENT_EMPTY")
    comment_type = comment.get("type") or "PLAIN_TEXT"
    if comment_type != "PLAIN_TEXT":
        raise _invalid(f"Unsupported comment type: {comment_type}; send PLAIN_TEXT.")
    raw_attributes = document.get("requestedAttributes")
    if not isinstance(raw_attributes, dict) or not raw_attributes:
        raise PerspectiveError.invalid(
            "Must request at least one attribute.", "NO_REQUESTED_ATTRIBUTES"
        )
    return AnalyzeRequest(
        text=text,
        attributes=tuple(_attribute(str(n), v) for n, v in raw_attributes.items()),
        languages=_languages(document),
        span_annotations=_flag(document, "spanAnnotations"),
        do_not_store=_flag(document, "doNotStore"),
        client_token=_optional_string(document, "clientToken"),
        community_id=_optional_string(document, "communityId"),
        session_id=_optional_string(document, "sessionId"),
        comment_type=str(comment_type),
    )
