"""Tests for pipelines.decode: the record schema, its error codes, and that nothing else escapes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.decode import (
    MAX_ID_CHARS,
    MAX_METADATA_DEPTH,
    MAX_METADATA_NODES,
    DecodeError,
    DecodeErrorCode,
    decode_message,
)
from pipelines.errors import PipelineError
from pipelines.messages import ChatMessage
from pipelines.tenants import DEFAULT_TENANT

MAX_BYTES = 1_048_576
SECRET = "SECRET-TEXT-do-not-log"


def _record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "message_id": "m-1",
        "group_id": "g-1",
        "sender_id": "u-1",
        "text": "hello there",
        "sent_at": "2026-03-04T05:06:07Z",
    }
    record.update(overrides)
    return {key: value for key, value in record.items() if value is not _ABSENT}


_ABSENT = object()


def _decode(record: object, max_bytes: int = MAX_BYTES) -> Any:
    return decode_message(orjson.dumps(record), max_bytes=max_bytes)


def _code(record: object, max_bytes: int = MAX_BYTES) -> DecodeErrorCode:
    with pytest.raises(DecodeError) as info:
        _decode(record, max_bytes)
    return info.value.code


def test_valid_record_decodes_to_message() -> None:
    """A complete record becomes a ChatMessage with every field carried over."""
    message = _decode(_record(metadata={"sender_strikes": 2}, extra_field=[1, 2]))
    assert message.message_id == "m-1"
    assert message.group_id == "g-1"
    assert message.sender_id == "u-1"
    assert message.text == "hello there"
    assert message.sent_at == datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert message.metadata == {"sender_strikes": 2}


def test_iso_offset_is_normalised_to_utc() -> None:
    """An ISO timestamp with a +08:00 offset becomes the same instant in UTC."""
    message = _decode(_record(sent_at="2026-03-04T08:00:00+08:00"))
    assert message.sent_at == datetime(2026, 3, 4, 0, 0, tzinfo=UTC)
    assert message.sent_at.utcoffset() is not None
    assert message.sent_at.tzinfo is UTC


def test_epoch_milliseconds_are_accepted() -> None:
    """An integer sent_at is epoch milliseconds, kept to the millisecond."""
    message = _decode(_record(sent_at=1_700_000_000_123))
    assert message.sent_at == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)


def test_metadata_absent_or_null_is_empty() -> None:
    """Missing or null metadata decodes to an empty mapping."""
    assert _decode(_record()).metadata == {}
    assert _decode(_record(metadata=None)).metadata == {}


def test_non_ascii_text_round_trips() -> None:
    """Chinese text and emoji come through unchanged."""
    assert _decode(_record(text="你好 👋")).text == "你好 👋"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (None, DecodeErrorCode.EMPTY_RECORD),
        (b"", DecodeErrorCode.EMPTY_RECORD),
        (b"\xff\xfe{}", DecodeErrorCode.NOT_UTF8),
        (b'{"text": "\xc3"}', DecodeErrorCode.NOT_UTF8),
        (b"{", DecodeErrorCode.INVALID_JSON),
        (b"{'a': 1}", DecodeErrorCode.INVALID_JSON),
        (b"NaN", DecodeErrorCode.INVALID_JSON),
        (b'"\\ud800"', DecodeErrorCode.INVALID_JSON),
        (b"[1, 2]", DecodeErrorCode.NOT_OBJECT),
        (b'"text"', DecodeErrorCode.NOT_OBJECT),
        (b"null", DecodeErrorCode.NOT_OBJECT),
        (b"[" * 2000 + b"]" * 2000, DecodeErrorCode.INVALID_JSON),
    ],
)
def test_malformed_bytes_have_codes(raw: bytes | None, code: DecodeErrorCode) -> None:
    """Bytes that are not a JSON object are rejected with the matching code."""
    with pytest.raises(DecodeError) as info:
        decode_message(raw, max_bytes=MAX_BYTES)
    assert info.value.code is code


def test_too_large_is_checked_before_parsing() -> None:
    """A record over max_bytes is rejected as too_large even if it is not JSON."""
    with pytest.raises(DecodeError) as info:
        decode_message(b"x" * 101, max_bytes=100)
    assert info.value.code is DecodeErrorCode.TOO_LARGE
    assert "101" in info.value.reason


@pytest.mark.parametrize("field", ["message_id", "group_id", "sender_id", "text", "sent_at"])
def test_missing_or_null_required_field(field: str) -> None:
    """Every required field must be present and not null."""
    assert _code(_record(**{field: _ABSENT})) is DecodeErrorCode.MISSING_FIELD
    assert _code(_record(**{field: None})) is DecodeErrorCode.MISSING_FIELD


@pytest.mark.parametrize("field", ["message_id", "group_id", "sender_id", "text"])
@pytest.mark.parametrize("value", [1, 1.5, True, [], {}])
def test_string_fields_reject_other_types(field: str, value: object) -> None:
    """Ids and text must be JSON strings."""
    assert _code(_record(**{field: value})) is DecodeErrorCode.WRONG_TYPE


@pytest.mark.parametrize("field", ["message_id", "group_id", "sender_id"])
def test_id_limits(field: str) -> None:
    """Ids must be non-blank and at most 128 characters."""
    assert _code(_record(**{field: ""})) is DecodeErrorCode.EMPTY_FIELD
    assert _code(_record(**{field: "   "})) is DecodeErrorCode.EMPTY_FIELD
    assert _code(_record(**{field: "x" * (MAX_ID_CHARS + 1)})) is DecodeErrorCode.FIELD_TOO_LONG
    assert getattr(_decode(_record(**{field: "x" * MAX_ID_CHARS})), field) == "x" * MAX_ID_CHARS


@pytest.mark.parametrize("text", ["", " ", "\n\t ", "\u200b\u200d", " \ufeff "])
def test_blank_text_is_empty_text(text: str) -> None:
    """Text with nothing visible (whitespace or zero-width only) is rejected as empty_text."""
    assert _code(_record(text=text)) is DecodeErrorCode.EMPTY_TEXT


def test_text_length_counts_characters_after_unescaping() -> None:
    """The limit counts characters: 10,000 CJK characters (30,000 bytes) pass, 10,001 fail."""
    assert len(_decode(_record(text="字" * 10_000)).text) == 10_000
    assert _code(_record(text="字" * 10_001)) is DecodeErrorCode.TEXT_TOO_LONG
    escaped = b'{"message_id":"m","group_id":"g","sender_id":"s","sent_at":0,"text":"'
    raw = escaped + b"\\u0041" * 10_000 + b'"}'
    assert decode_message(raw, max_bytes=MAX_BYTES).text == "A" * 10_000


def test_max_text_chars_is_configurable() -> None:
    """A caller may lower the text limit."""
    with pytest.raises(DecodeError) as info:
        decode_message(orjson.dumps(_record(text="abcdef")), max_bytes=MAX_BYTES, max_text_chars=5)
    assert info.value.code is DecodeErrorCode.TEXT_TOO_LONG


@pytest.mark.parametrize(
    "value",
    [
        "2026-03-04T05:06:07",  # no offset
        "yesterday",
        "2026-13-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
        "2026-03-04T05:06:07Z" + " " * 60,
        -1,
        10**16,
    ],
)
def test_bad_timestamps(value: object) -> None:
    """Timestamps without offset, unparseable or out of range are bad_timestamp."""
    assert _code(_record(sent_at=value)) is DecodeErrorCode.BAD_TIMESTAMP


@pytest.mark.parametrize("value", [True, 1.5, [], {}])
def test_timestamp_wrong_type(value: object) -> None:
    """sent_at must be a string or an integer (booleans and floats are not)."""
    assert _code(_record(sent_at=value)) is DecodeErrorCode.WRONG_TYPE


@pytest.mark.parametrize(
    "record",
    [
        _record(text="a\x00b"),
        _record(sender_id="u\x00"),
        _record(metadata={"k": "v\x00"}),
        _record(metadata={"k\x00": 1}),
        _record(metadata={"k": [{"deep": "\x00"}]}),
    ],
)
def test_nul_anywhere_is_rejected(record: dict[str, Any]) -> None:
    """U+0000 in text, ids or metadata keys/values is nul_byte (PostgreSQL cannot store it)."""
    assert _code(record) is DecodeErrorCode.NUL_BYTE


def test_metadata_must_be_object() -> None:
    """Metadata that is not a JSON object is wrong_type."""
    assert _code(_record(metadata=[1])) is DecodeErrorCode.WRONG_TYPE
    assert _code(_record(metadata="x")) is DecodeErrorCode.WRONG_TYPE


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_metadata_depth_limit() -> None:
    """Metadata nested exactly MAX_METADATA_DEPTH deep passes; one level more is too_deep."""
    assert _decode(_record(metadata=_nested(MAX_METADATA_DEPTH))).metadata
    assert _code(_record(metadata=_nested(MAX_METADATA_DEPTH + 1))) is DecodeErrorCode.TOO_DEEP
    assert _code(_record(metadata={"a": [[[[[[[[1]]]]]]]]})) is DecodeErrorCode.TOO_DEEP


def test_metadata_size_limit() -> None:
    """More keys and values than MAX_METADATA_NODES is metadata_too_large."""
    half = MAX_METADATA_NODES // 2
    assert _decode(_record(metadata={f"k{i}": i for i in range(half)})).metadata
    too_many = {f"k{i}": i for i in range(half + 1)}
    assert _code(_record(metadata=too_many)) is DecodeErrorCode.METADATA_TOO_LARGE
    assert _code(_record(metadata={"a": list(range(MAX_METADATA_NODES))})) is (
        DecodeErrorCode.METADATA_TOO_LARGE
    )


@pytest.mark.parametrize(
    "record",
    [
        _record(text=SECRET * 2000),
        _record(text=SECRET + "\x00"),
        _record(text=1, message_id=SECRET),
        _record(sent_at=SECRET),
        _record(metadata={SECRET: SECRET + "\x00"}),
        _record(message_id=SECRET * 10),
    ],
)
def test_reason_never_contains_record_values(record: dict[str, Any]) -> None:
    """Error reasons name fields and limits only, never values from the record."""
    with pytest.raises(DecodeError) as info:
        _decode(record)
    assert "SECRET" not in info.value.reason
    assert "SECRET" not in str(info.value)
    assert "SECRET" not in repr(info.value)


def test_invalid_json_reason_has_no_content() -> None:
    """A parse error reports a position, not the surrounding bytes."""
    with pytest.raises(DecodeError) as info:
        decode_message(b'{"text": "' + SECRET.encode() + b'", oops}', max_bytes=MAX_BYTES)
    assert "SECRET" not in info.value.reason
    assert info.value.code is DecodeErrorCode.INVALID_JSON


def test_decode_error_is_a_pipeline_error() -> None:
    """DecodeError is classified by type: a PipelineError (bad data: dead-lettered, never
    retried), still a ValueError for callers that catch those."""
    assert issubclass(DecodeError, PipelineError)
    assert issubclass(DecodeError, ValueError)
    error = DecodeError("r", DecodeErrorCode.NOT_OBJECT)
    assert error.reason == "r"
    assert error.code.value == "not_object"


def _attempt(raw: bytes, *, max_bytes: int) -> ChatMessage | DecodeError:
    """Decode, returning the DecodeError instead of raising; any other exception propagates."""
    try:
        return decode_message(raw, max_bytes=max_bytes)
    except DecodeError as error:
        return error


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_decode_error(raw: bytes) -> None:
    """Any byte string either decodes or raises DecodeError, nothing else."""
    result = _attempt(raw, max_bytes=300)
    assert isinstance(result, ChatMessage | DecodeError)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_field_values = _json_values | st.sampled_from(
    ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00", 0, 1_700_000_000_000, "", " ", "\x00"]
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_arbitrary_json_raises_only_decode_error(value: object) -> None:
    """Any JSON document either decodes or raises DecodeError."""
    result = _attempt(orjson.dumps(value), max_bytes=MAX_BYTES)
    assert isinstance(result, ChatMessage | DecodeError)
    if isinstance(value, dict) and not value:
        assert isinstance(result, DecodeError)
        assert result.code is DecodeErrorCode.MISSING_FIELD


@settings(max_examples=500, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional=dict.fromkeys(
            ("message_id", "group_id", "sender_id", "text", "sent_at", "metadata"), _field_values
        ),
    )
)
def test_arbitrary_records_decode_or_raise_decode_error(record: dict[str, object]) -> None:
    """Objects with any mix of schema fields and values decode validly or raise DecodeError."""
    result = _attempt(orjson.dumps(record), max_bytes=MAX_BYTES)
    if isinstance(result, DecodeError):
        assert isinstance(result.code, DecodeErrorCode)
    else:
        assert result.sent_at.tzinfo is not None
        assert result.text.strip()
        assert 0 < len(result.message_id) <= MAX_ID_CHARS


def test_tenant_is_optional_and_defaults() -> None:
    """No tenant, or null, is the default tenant; a valid id is carried over."""
    assert _decode(_record()).tenant == DEFAULT_TENANT
    assert _decode(_record(tenant=None)).tenant == DEFAULT_TENANT
    assert _decode(_record(tenant="game-server_7")).tenant == "game-server_7"


@pytest.mark.parametrize(
    ("tenant", "code"),
    [
        ("", DecodeErrorCode.BAD_TENANT),
        ("Acme", DecodeErrorCode.BAD_TENANT),
        ("-acme", DecodeErrorCode.BAD_TENANT),
        ("a" * 65, DecodeErrorCode.BAD_TENANT),
        ("acme/../b", DecodeErrorCode.BAD_TENANT),
        (SECRET, DecodeErrorCode.BAD_TENANT),
        (7, DecodeErrorCode.WRONG_TYPE),
        (["acme"], DecodeErrorCode.WRONG_TYPE),
        ("ac\x00me", DecodeErrorCode.NUL_BYTE),
    ],
)
def test_bad_tenant_is_refused_without_echoing_it(tenant: object, code: DecodeErrorCode) -> None:
    """A tenant that is not a tenant id is refused with a code, and the reason never repeats it."""
    with pytest.raises(DecodeError) as info:
        _decode(_record(tenant=tenant))
    assert info.value.code is code
    assert SECRET not in info.value.reason
    assert info.value.tenant is None


def test_a_refused_record_names_its_tenant_when_it_is_known() -> None:
    """Another field refused: the error carries the record's valid tenant (absent: the default)
    for the dead letter; no object at all, no tenant."""
    with pytest.raises(DecodeError) as named:
        _decode(_record(tenant="arcade", text=" "))
    assert named.value.tenant == "arcade"
    with pytest.raises(DecodeError) as unnamed:
        _decode(_record(text=" "))
    assert unnamed.value.tenant == DEFAULT_TENANT
    with pytest.raises(DecodeError) as not_json:
        decode_message(b"{not json", max_bytes=1000)
    assert not_json.value.tenant is None
