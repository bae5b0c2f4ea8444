"""A ``CheckMessageRequest`` decoded straight into the stream's ``ChatMessage``.

The request's fields go to ``pipelines.decode.message_from_fields``, the stream decoder's own
field checks, so online and stream accept, normalise and refuse exactly the same messages, with
the same reason codes; nothing is written out as JSON and parsed again. The size limit is the
stream's record limit, applied to the request's encoded size. An unset ``sent_at`` is an absent
field, and so is an empty ``tenant`` (the default tenant); metadata numbers arrive as doubles
(``google.protobuf.Struct`` has no integers).
"""

from __future__ import annotations

from datetime import UTC

from google.protobuf.json_format import MessageToDict

from online.api import moderation_pb2 as pb
from online.errors import InvalidMessage
from pipelines.decode import DecodeError, DecodeErrorCode, message_from_fields
from pipelines.messages import ChatMessage

__all__ = ["message_from_request", "request_fields"]


def request_fields(request: pb.CheckMessageRequest) -> dict[str, object]:
    """The request's fields as the decoder takes them (``InvalidMessage`` for a timestamp no
    ``datetime`` can hold)."""
    fields: dict[str, object] = {
        "message_id": request.message_id,
        "group_id": request.group_id,
        "sender_id": request.sender_id,
        "text": request.text,
    }
    if request.HasField("sent_at"):
        try:
            fields["sent_at"] = request.sent_at.ToDatetime(tzinfo=UTC)
        except (ValueError, OverflowError) as exc:
            raise InvalidMessage(
                DecodeErrorCode.BAD_TIMESTAMP.value, "sent_at is outside the supported range"
            ) from exc
    if request.HasField("metadata"):
        fields["metadata"] = MessageToDict(request.metadata)
    if request.tenant:
        fields["tenant"] = request.tenant
    return fields


def message_from_request(request: pb.CheckMessageRequest, *, max_bytes: int) -> ChatMessage:
    """The validated message; ``InvalidMessage`` with the decoder's code when it is refused."""
    size = request.ByteSize()
    if size > max_bytes:
        code = DecodeErrorCode.TOO_LARGE.value
        raise InvalidMessage(code, f"request is {size} bytes, limit {max_bytes}")
    try:
        return message_from_fields(request_fields(request))
    except DecodeError as exc:
        raise InvalidMessage(exc.code.value, exc.reason) from exc
