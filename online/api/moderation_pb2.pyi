import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CheckMessageRequest(_message.Message):
    __slots__ = ("message_id", "group_id", "sender_id", "text", "sent_at", "metadata", "tenant")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    group_id: str
    sender_id: str
    text: str
    sent_at: _timestamp_pb2.Timestamp
    metadata: _struct_pb2.Struct
    tenant: str
    def __init__(self, message_id: _Optional[str] = ..., group_id: _Optional[str] = ..., sender_id: _Optional[str] = ..., text: _Optional[str] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tenant: _Optional[str] = ...) -> None: ...

class CheckMessagesRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[CheckMessageRequest]
    def __init__(self, messages: _Optional[_Iterable[_Union[CheckMessageRequest, _Mapping]]] = ...) -> None: ...

class RuleHit(_message.Message):
    __slots__ = ("rule_id", "category", "severity", "action", "spans")
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    rule_id: str
    category: str
    severity: str
    action: str
    spans: _containers.RepeatedCompositeFieldContainer[TextSpan]
    def __init__(self, rule_id: _Optional[str] = ..., category: _Optional[str] = ..., severity: _Optional[str] = ..., action: _Optional[str] = ..., spans: _Optional[_Iterable[_Union[TextSpan, _Mapping]]] = ...) -> None: ...

class TextSpan(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class ModelSpan(_message.Message):
    __slots__ = ("span", "drop")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    span: TextSpan
    drop: float
    def __init__(self, span: _Optional[_Union[TextSpan, _Mapping]] = ..., drop: _Optional[float] = ...) -> None: ...

class ModelSpans(_message.Message):
    __slots__ = ("output", "spans")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    output: str
    spans: _containers.RepeatedCompositeFieldContainer[ModelSpan]
    def __init__(self, output: _Optional[str] = ..., spans: _Optional[_Iterable[_Union[ModelSpan, _Mapping]]] = ...) -> None: ...

class TaskScores(_message.Message):
    __slots__ = ("probabilities", "label")
    class ProbabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    probabilities: _containers.ScalarMap[str, float]
    label: str
    def __init__(self, probabilities: _Optional[_Mapping[str, float]] = ..., label: _Optional[str] = ...) -> None: ...

class Latency(_message.Message):
    __slots__ = ("rules_ms", "queue_ms", "inference_ms", "total_ms")
    RULES_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    rules_ms: float
    queue_ms: float
    inference_ms: float
    total_ms: float
    def __init__(self, rules_ms: _Optional[float] = ..., queue_ms: _Optional[float] = ..., inference_ms: _Optional[float] = ..., total_ms: _Optional[float] = ...) -> None: ...

class CheckMessageResponse(_message.Message):
    __slots__ = ("message_id", "decision", "decided_by", "escalate", "category", "priority", "reasons", "rule_hits", "scores", "model_name", "model_version", "latency", "replayed", "source_offset", "model_spans")
    class ScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TaskScores
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TaskScores, _Mapping]] = ...) -> None: ...
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RULE_HITS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MODEL_SPANS_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    decision: str
    decided_by: str
    escalate: bool
    category: str
    priority: float
    reasons: _containers.RepeatedScalarFieldContainer[str]
    rule_hits: _containers.RepeatedCompositeFieldContainer[RuleHit]
    scores: _containers.MessageMap[str, TaskScores]
    model_name: str
    model_version: str
    latency: Latency
    replayed: bool
    source_offset: int
    model_spans: ModelSpans
    def __init__(self, message_id: _Optional[str] = ..., decision: _Optional[str] = ..., decided_by: _Optional[str] = ..., escalate: _Optional[bool] = ..., category: _Optional[str] = ..., priority: _Optional[float] = ..., reasons: _Optional[_Iterable[str]] = ..., rule_hits: _Optional[_Iterable[_Union[RuleHit, _Mapping]]] = ..., scores: _Optional[_Mapping[str, TaskScores]] = ..., model_name: _Optional[str] = ..., model_version: _Optional[str] = ..., latency: _Optional[_Union[Latency, _Mapping]] = ..., replayed: _Optional[bool] = ..., source_offset: _Optional[int] = ..., model_spans: _Optional[_Union[ModelSpans, _Mapping]] = ...) -> None: ...

class CheckMessagesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CheckMessageResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[CheckMessageResponse, _Mapping]]] = ...) -> None: ...
