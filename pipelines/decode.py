"""Decode one Kafka record value into a validated ``ChatMessage``.

The record is a UTF-8 JSON object:

===============  ==========================================================================
``message_id``   string, 1..128 characters
``group_id``     string, 1..128 characters
``sender_id``    string, 1..128 characters
``text``         string, at most ``max_text_chars`` (10,000) characters after JSON unescaping;
                 text that is empty once whitespace and zero-width characters are removed is
                 rejected (``empty_text``): there is nothing to moderate
``sent_at``      ISO-8601 string with a UTC offset (``2026-01-02T03:04:05Z``) or an integer of
                 epoch milliseconds; normalised to an aware UTC ``datetime``
``metadata``     optional JSON object (absent or ``null`` means ``{}``), nested at most
                 ``MAX_METADATA_DEPTH`` levels and holding at most ``MAX_METADATA_NODES`` values
``tenant``       optional tenant id (``pipelines.tenants``: 1..64 of ``a-z0-9_-``); absent or
                 ``null`` is the default tenant
===============  ==========================================================================

Unknown top-level fields are ignored; ``null`` counts as absent. No string may contain U+0000
(PostgreSQL text and jsonb cannot store it). Every failure raises ``DecodeError`` with a stable
``code`` and a short ``reason`` meant for Kafka headers and logs: it names fields and limits,
never the message text or any other value from the record.

:func:`message_from_fields` runs the same field checks on values that arrive already parsed (the
online service's protobuf request): the same messages are accepted, normalised and refused with
the same codes, and ``sent_at`` may also be a ``datetime`` (it must be timezone-aware).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum

import orjson

from pipelines.errors import PipelineError
from pipelines.messages import ChatMessage
from pipelines.tenants import DEFAULT_TENANT, TENANT_ID

__all__ = [
    "MAX_ID_CHARS",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_NODES",
    "MAX_TEXT_CHARS",
    "DecodeError",
    "DecodeErrorCode",
    "decode_message",
    "message_from_fields",
]

MAX_ID_CHARS = 128
MAX_TEXT_CHARS = 10_000
MAX_METADATA_DEPTH = 8
"""The metadata object itself is depth 1; each nested object or array adds one."""
MAX_METADATA_NODES = 256
"""Keys plus values, counted over the whole metadata tree."""
_MAX_TIMESTAMP_CHARS = 64
_MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INVISIBLE = re.compile("[\\s\u200b-\u200d\u2060\ufeff\u180e\u00ad]+")
_ID_FIELDS = ("message_id", "group_id", "sender_id")


class DecodeErrorCode(StrEnum):
    """Why a record could not be decoded; stable values, safe for headers and metric labels."""

    EMPTY_RECORD = "empty_record"
    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    INVALID_JSON = "invalid_json"
    NOT_OBJECT = "not_object"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    EMPTY_FIELD = "empty_field"
    FIELD_TOO_LONG = "field_too_long"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    BAD_TIMESTAMP = "bad_timestamp"
    NUL_BYTE = "nul_byte"
    TOO_DEEP = "too_deep"
    METADATA_TOO_LARGE = "metadata_too_large"
    BAD_TENANT = "bad_tenant"


class DecodeError(PipelineError):
    """A record that can never become a ``ChatMessage``: dead-letter it, do not retry."""

    def __init__(self, reason: str, code: DecodeErrorCode) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.tenant: str | None = None
        """The record's tenant when it could be read although another field was refused (a
        JSON object whose ``tenant`` is valid, or absent: the default), else ``None``."""

    def __repr__(self) -> str:
        return f"DecodeError(reason={self.reason!r}, code={self.code.value!r})"


def decode_message(
    raw: bytes | None, *, max_bytes: int, max_text_chars: int = MAX_TEXT_CHARS
) -> ChatMessage:
    """Parse and validate one record value; raise ``DecodeError`` (and nothing else) if invalid."""
    if raw is None or len(raw) == 0:
        raise DecodeError("record value is empty", DecodeErrorCode.EMPTY_RECORD)
    if len(raw) > max_bytes:
        raise DecodeError(
            f"record is {len(raw)} bytes, limit {max_bytes}", DecodeErrorCode.TOO_LARGE
        )
    document = _parse(raw)
    if not isinstance(document, dict):
        raise DecodeError(
            f"top level is {_json_type(document)}, expected object", DecodeErrorCode.NOT_OBJECT
        )
    return message_from_fields(document, max_text_chars=max_text_chars)


def message_from_fields(
    document: dict[str, object], *, max_text_chars: int = MAX_TEXT_CHARS
) -> ChatMessage:
    """Validate a message's fields given as parsed values (the keys of the JSON record; ``None``
    or a missing key is an absent field); raise ``DecodeError`` (and nothing else) if invalid,
    naming the record's tenant when it is known (``DecodeError.tenant``)."""
    try:
        return _message(document, max_text_chars)
    except DecodeError as exc:
        exc.tenant = _known_tenant(document)
        raise


def _known_tenant(document: dict[str, object]) -> str | None:
    value = document.get("tenant")
    if value is None:
        return DEFAULT_TENANT
    return value if isinstance(value, str) and TENANT_ID.fullmatch(value) else None


def _message(document: dict[str, object], max_text_chars: int) -> ChatMessage:
    ids = [_id_field(document, name) for name in _ID_FIELDS]
    return ChatMessage(
        message_id=ids[0],
        group_id=ids[1],
        sender_id=ids[2],
        text=_text_field(document, max_text_chars),
        sent_at=_sent_at(document),
        metadata=_metadata(document),
        tenant=_tenant(document),
    )


def _parse(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as utf8_exc:
            raise DecodeError(
                f"record is not valid UTF-8 at byte {utf8_exc.start}", DecodeErrorCode.NOT_UTF8
            ) from None
        # orjson's message is about structure, but keep only the position: it is never text.
        raise DecodeError(
            f"record is not valid JSON near char {exc.pos}", DecodeErrorCode.INVALID_JSON
        ) from None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _required(document: dict[str, object], name: str) -> object:
    value = document.get(name)
    if value is None:
        raise DecodeError(f"field {name!r} is missing", DecodeErrorCode.MISSING_FIELD)
    return value


def _string(document: dict[str, object], name: str) -> str:
    value = _required(document, name)
    if not isinstance(value, str):
        raise DecodeError(
            f"field {name!r} is {_json_type(value)}, expected string", DecodeErrorCode.WRONG_TYPE
        )
    if "\x00" in value:
        raise DecodeError(f"field {name!r} contains U+0000", DecodeErrorCode.NUL_BYTE)
    return value


def _id_field(document: dict[str, object], name: str) -> str:
    value = _string(document, name)
    if not value.strip():
        raise DecodeError(f"field {name!r} is empty", DecodeErrorCode.EMPTY_FIELD)
    if len(value) > MAX_ID_CHARS:
        raise DecodeError(
            f"field {name!r} is {len(value)} characters, limit {MAX_ID_CHARS}",
            DecodeErrorCode.FIELD_TOO_LONG,
        )
    return value


def _text_field(document: dict[str, object], max_text_chars: int) -> str:
    text = _string(document, "text")
    if len(text) > max_text_chars:
        raise DecodeError(
            f"field 'text' is {len(text)} characters, limit {max_text_chars}",
            DecodeErrorCode.TEXT_TOO_LONG,
        )
    if not _INVISIBLE.sub("", text):
        raise DecodeError("field 'text' is empty or only whitespace", DecodeErrorCode.EMPTY_TEXT)
    return text


def _sent_at(document: dict[str, object]) -> datetime:
    value = _required(document, "sent_at")
    if isinstance(value, datetime):
        return _aware_utc(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DecodeError(
            f"field 'sent_at' is {_json_type(value)}, expected string or integer",
            DecodeErrorCode.WRONG_TYPE,
        )
    if isinstance(value, int):
        if not 0 <= value <= _MAX_EPOCH_MS:
            raise DecodeError(
                "field 'sent_at' epoch milliseconds out of range", DecodeErrorCode.BAD_TIMESTAMP
            )
        return _EPOCH + timedelta(milliseconds=value)
    return _iso_timestamp(value)


def _iso_timestamp(value: str) -> datetime:
    if len(value) > _MAX_TIMESTAMP_CHARS or "\x00" in value:
        raise DecodeError("field 'sent_at' is not a timestamp", DecodeErrorCode.BAD_TIMESTAMP)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise DecodeError(
            "field 'sent_at' is not an ISO-8601 timestamp", DecodeErrorCode.BAD_TIMESTAMP
        ) from None
    return _aware_utc(parsed)


def _aware_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise DecodeError("field 'sent_at' has no UTC offset", DecodeErrorCode.BAD_TIMESTAMP)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise DecodeError(
            "field 'sent_at' is out of range in UTC", DecodeErrorCode.BAD_TIMESTAMP
        ) from None


def _tenant(document: dict[str, object]) -> str:
    if document.get("tenant") is None:
        return DEFAULT_TENANT
    value = _string(document, "tenant")
    if not TENANT_ID.fullmatch(value):
        raise DecodeError(
            f"field 'tenant' is not a tenant id (it must match {TENANT_ID.pattern})",
            DecodeErrorCode.BAD_TENANT,
        )
    return value


def _metadata(document: dict[str, object]) -> Mapping[str, object]:
    value = document.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(
            f"field 'metadata' is {_json_type(value)}, expected object", DecodeErrorCode.WRONG_TYPE
        )
    _check_tree(value)
    return value


def _check_tree(root: dict[str, object]) -> None:
    """Bound the metadata's depth and size and reject U+0000, without recursion."""
    nodes = 0
    stack: list[tuple[object, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_METADATA_DEPTH:
                raise DecodeError(
                    f"field 'metadata' nests deeper than {MAX_METADATA_DEPTH}",
                    DecodeErrorCode.TOO_DEEP,
                )
            children = list(value.values()) if isinstance(value, dict) else value
            if isinstance(value, dict):
                nodes += len(value)
                if any("\x00" in key for key in value):
                    raise DecodeError(
                        "field 'metadata' has a key containing U+0000", DecodeErrorCode.NUL_BYTE
                    )
            nodes += len(children)
            if nodes > MAX_METADATA_NODES:
                raise DecodeError(
                    f"field 'metadata' holds more than {MAX_METADATA_NODES} keys and values",
                    DecodeErrorCode.METADATA_TOO_LARGE,
                )
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(value, str) and "\x00" in value:
            raise DecodeError(
                "field 'metadata' has a string containing U+0000", DecodeErrorCode.NUL_BYTE
            )
