"""A ``CheckMessageRequest`` as the stream's record, validated by the stream's own decoder.

The request's fields are written as the JSON object a platform would publish to Kafka and handed
to ``pipelines.decode.decode_message``, so online and stream accept, normalise and refuse exactly
the same messages, with the same reason codes. An unset ``sent_at`` is an absent field; metadata
numbers arrive as doubles (``google.protobuf.Struct`` has no integers).
"""

from __future__ import annotations

from datetime import UTC

import orjson
from google.protobuf.json_format import MessageToDict

from online.api import moderation_pb2 as pb
from online.errors import InvalidMessage
from pipelines.decode import DecodeError, DecodeErrorCode, decode_message
from pipelines.messages import ChatMessage

__all__ = ["message_from_request", "request_record"]


def request_record(request: pb.CheckMessageRequest) -> bytes:
    """The request as the JSON record value the stream would read (``InvalidMessage`` for a
    timestamp no ``datetime`` can hold)."""
    document: dict[str, object] = {
        "message_id": request.message_id,
        "group_id": request.group_id,
        "sender_id": request.sender_id,
        "text": request.text,
    }
    if request.HasField("sent_at"):
        try:
            document["sent_at"] = request.sent_at.ToDatetime(tzinfo=UTC).isoformat()
        except (ValueError, OverflowError) as exc:
            raise InvalidMessage(
                DecodeErrorCode.BAD_TIMESTAMP.value, "sent_at is outside the supported range"
            ) from exc
    if request.HasField("metadata"):
        document["metadata"] = MessageToDict(request.metadata)
    return orjson.dumps(document)


def message_from_request(request: pb.CheckMessageRequest, *, max_bytes: int) -> ChatMessage:
    """The validated message; ``InvalidMessage`` with the decoder's code when it is refused."""
    try:
        return decode_message(request_record(request), max_bytes=max_bytes)
    except DecodeError as exc:
        raise InvalidMessage(exc.code.value, exc.reason) from exc
