"""online.request: requests are decoded straight into ChatMessage by the stream decoder's own field
checks, with its reason codes, and give the message the stream would read."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from google.protobuf.struct_pb2 import Struct

from online.api import moderation_pb2 as pb
from online.errors import InvalidMessage
from online.request import message_from_request, request_fields
from pipelines.decode import decode_message

SENT = datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC)


def _request(**fields: object) -> pb.CheckMessageRequest:
    values: dict[str, object] = {
        "message_id": "m-1",
        "group_id": "g-1",
        "sender_id": "u-1",
        "text": "hello there",
        "sent_at": SENT,
    }
    values.update(fields)
    return pb.CheckMessageRequest(**{k: v for k, v in values.items() if v is not None})


def test_a_valid_request_becomes_the_same_message_the_stream_would_read() -> None:
    """Fields, the microsecond timestamp and metadata all arrive in the ChatMessage."""
    metadata = Struct()
    metadata.update({"sender_joined_at": "2026-12-01T00:00:00Z", "score": 3})
    message = message_from_request(_request(metadata=metadata), max_bytes=1_000_000)
    assert (message.message_id, message.group_id, message.sender_id) == ("m-1", "g-1", "u-1")
    assert message.text == "hello there"
    assert message.sent_at == SENT
    assert message.metadata == {"sender_joined_at": "2026-12-01T00:00:00Z", "score": 3.0}


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"text": " \u200b "}, "empty_text"),
        ({"message_id": ""}, "empty_field"),
        ({"sent_at": None}, "missing_field"),
        ({"text": "x" * 10_001}, "text_too_long"),
        ({"group_id": "g" * 129}, "field_too_long"),
        ({"text": "nul\x00byte"}, "nul_byte"),
    ],
)
def test_bad_requests_carry_the_decoders_reason_code(fields: dict[str, object], code: str) -> None:
    """Each invalid field is refused with the code the stream's decoder gives it."""
    with pytest.raises(InvalidMessage) as caught:
        message_from_request(_request(**fields), max_bytes=1_000_000)
    assert caught.value.code == code
    assert caught.value.detail.startswith(f"{code}: ")


def test_the_record_never_exceeds_the_stream_size_limit_unnoticed() -> None:
    """A request larger than max_bytes is refused as too_large, like an oversized record."""
    with pytest.raises(InvalidMessage) as caught:
        message_from_request(_request(text="a" * 500), max_bytes=200)
    assert caught.value.code == "too_large"


def test_an_unset_timestamp_is_an_absent_field_not_the_epoch() -> None:
    """Without sent_at the fields have no sent_at (the decoder then says missing_field)."""
    fields = request_fields(_request(sent_at=None))
    assert "sent_at" not in fields
    assert "metadata" not in fields


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"text": "\uff26\uff35\uff2c\uff2c width and \u200bzero width"},
        {"sent_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)},
        {"message_id": " padded id ", "group_id": "群"},
    ],
)
def test_a_request_gives_the_message_the_stream_would_decode(fields: dict[str, object]) -> None:
    """The same fields published as a Kafka record and sent as a request give equal messages."""
    metadata = Struct()
    metadata.update({"sender_joined_at": "2026-12-01T00:00:00Z", "nested": {"a": [1, "b"]}})
    request = _request(metadata=metadata, **fields)
    sent_at = request.sent_at.ToDatetime(tzinfo=UTC)
    record = {
        "message_id": request.message_id,
        "group_id": request.group_id,
        "sender_id": request.sender_id,
        "text": request.text,
        "sent_at": sent_at.isoformat(),
        "metadata": {"sender_joined_at": "2026-12-01T00:00:00Z", "nested": {"a": [1.0, "b"]}},
    }
    streamed = decode_message(orjson.dumps(record), max_bytes=1_000_000)
    assert message_from_request(request, max_bytes=1_000_000) == streamed


def test_a_timestamp_beyond_datetime_is_a_bad_timestamp() -> None:
    """A Timestamp whose seconds no datetime can hold is refused as bad_timestamp, not a crash."""
    request = _request()
    request.sent_at.seconds = 10**15
    with pytest.raises(InvalidMessage) as caught:
        message_from_request(request, max_bytes=1_000_000)
    assert caught.value.code == "bad_timestamp"


def test_a_tenant_arrives_in_the_message_and_an_empty_one_is_the_default() -> None:
    """``tenant`` is the stream's field: validated by the decoder (``bad_tenant``), empty means
    the default tenant."""
    assert message_from_request(_request(tenant="arcade"), max_bytes=10_000).tenant == "arcade"
    assert message_from_request(_request(), max_bytes=10_000).tenant == "default"
    assert "tenant" not in request_fields(_request())
    with pytest.raises(InvalidMessage) as refused:
        message_from_request(_request(tenant="Not A Tenant"), max_bytes=10_000)
    assert refused.value.code == "bad_tenant"
    assert "Not A Tenant" not in refused.value.detail
