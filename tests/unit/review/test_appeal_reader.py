"""review.appeal_reader without Kafka or PostgreSQL: decoding, dead letters, retries, replays."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import orjson
import pytest

from common.publishing import PublishError
from review.appeal_reader import AppealReader, AppealRecord, decode_appeal
from review.errors import AlreadyAppealedError, InvalidAppealError, StatementTooLongError
from review.schemas import AppealFiled, AppealRequest, AppealStatus

_SECRET = "my private words"
_GOOD = {
    "appeal_id": "a-1",
    "decision_id": str(uuid.uuid4()),
    "appellant_id": "u-1",
    "statement": _SECRET,
}


def _record(value: bytes | None, offset: int = 7) -> AppealRecord:
    return AppealRecord("moderation.appeals", 0, offset, b"a-1", value)


def _filed(created: bool) -> AppealFiled:
    now = datetime.now(UTC)
    return AppealFiled(
        appeal_id=str(uuid.uuid4()),
        appeal_key="a-1",
        item_id=str(uuid.uuid4()),
        status=AppealStatus.OPEN,
        filed_at=now,
        due_at=now,
        created=created,
    )


class FakeDesk:
    """Files what it is given; ``errors`` are raised first, one per call."""

    def __init__(self, *errors: BaseException, created: bool = True) -> None:
        self.errors = list(errors)
        self.created = created
        self.filed: list[tuple[AppealRequest, str, str]] = []

    async def file(self, request: AppealRequest, *, channel: str, filed_by: str) -> AppealFiled:
        if self.errors:
            raise self.errors.pop(0)
        self.filed.append((request, channel, filed_by))
        return _filed(self.created)


class FakeDeadLetters:
    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.letters: list[tuple[AppealRecord, str, str]] = []

    async def dead_letter(self, record: AppealRecord, reason_code: str, reason: str) -> None:
        if self.failures:
            self.failures -= 1
            raise PublishError("dlq away")
        self.letters.append((record, reason_code, reason))


def _reader(desk: FakeDesk, letters: FakeDeadLetters) -> tuple[AppealReader, list[str]]:
    counted: list[str] = []
    reader = AppealReader(
        desk,
        letters,
        max_bytes=4096,
        retry_s=0.001,
        on_filed=lambda: counted.append("filed"),
        on_refused=counted.append,
    )
    return reader, counted


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (None, "no value"),
        (b"", "no value"),
        (b"{nope", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"x" * 5000, "bytes"),
        (orjson.dumps({**_GOOD, "statement": "   "}), "blank"),
        (orjson.dumps({**_GOOD, "statement": "a\x00b"}), "NUL"),
        (orjson.dumps({**_GOOD, "source": {"topic": "t", "partition": 0, "offset": 1}}), "one"),
        (orjson.dumps({k: v for k, v in _GOOD.items() if k != "decision_id"}), "one"),
        (orjson.dumps({**_GOOD, "appellant_id": ""}), "appellant_id"),
        (orjson.dumps({**_GOOD, "appeal_id": "x" * 129}), "appeal_id"),
    ],
)
def test_a_value_that_is_no_appeal_is_refused_without_quoting_it(
    value: bytes | None, why: str
) -> None:
    """Every malformed value is an InvalidAppealError naming the problem, never the values."""
    with pytest.raises(InvalidAppealError) as caught:
        decode_appeal(value, max_bytes=4096)
    assert why in str(caught.value)
    assert _SECRET not in str(caught.value)


def test_a_good_value_decodes_and_unknown_fields_are_ignored() -> None:
    request = decode_appeal(orjson.dumps({**_GOOD, "extra": 1}), max_bytes=4096)
    assert request.appeal_id == "a-1"
    assert str(request.decision_id) == _GOOD["decision_id"]
    assert request.source is None


async def test_a_refused_appeal_is_dead_lettered_with_its_code_and_counted() -> None:
    """The desk's typed refusal becomes a dead letter with the error's code and reason."""
    desk = FakeDesk(AlreadyAppealedError("message 'm1' already has an appeal", "x"))
    letters = FakeDeadLetters()
    reader, counted = _reader(desk, letters)
    assert await reader.handle(_record(orjson.dumps(_GOOD))) == "already_appealed"
    assert [(code, record.offset) for record, code, _ in letters.letters] == [
        ("already_appealed", 7)
    ]
    assert counted == ["already_appealed"]


async def test_a_long_statement_is_dead_lettered_as_statement_too_long() -> None:
    desk = FakeDesk(StatementTooLongError("a statement may be at most 2000 characters"))
    letters = FakeDeadLetters()
    reader, _ = _reader(desk, letters)
    assert await reader.handle(_record(orjson.dumps(_GOOD))) == "statement_too_long"
    assert _SECRET not in letters.letters[0][2]


async def test_a_malformed_record_never_reaches_the_desk() -> None:
    desk = FakeDesk()
    letters = FakeDeadLetters()
    reader, _ = _reader(desk, letters)
    assert await reader.handle(_record(b"{nope")) == "invalid_appeal"
    assert desk.filed == []


async def test_services_away_are_waited_for_and_nothing_is_skipped() -> None:
    """PostgreSQL away (twice), then the DLQ away (once): the record is retried until handled."""
    desk = FakeDesk(OSError("refused"), TimeoutError(), created=True)
    letters = FakeDeadLetters()
    reader, counted = _reader(desk, letters)
    assert await reader.handle(_record(orjson.dumps(_GOOD))) == "filed"
    assert len(desk.filed) == 1
    assert desk.filed[0][1:] == ("kafka", "kafka:moderation.appeals")
    assert counted == ["filed"]

    letters = FakeDeadLetters(failures=1)
    reader, _ = _reader(FakeDesk(), letters)
    assert await reader.handle(_record(b"{nope")) == "invalid_appeal"
    assert len(letters.letters) == 1


async def test_an_unexpected_failure_is_retried_not_skipped() -> None:
    desk = FakeDesk(RuntimeError("a bug"))
    reader, _ = _reader(desk, FakeDeadLetters())
    async with asyncio.timeout(5):
        assert await reader.handle(_record(orjson.dumps(_GOOD))) == "filed"


async def test_a_replay_is_handled_and_not_counted_as_filed() -> None:
    reader, counted = _reader(FakeDesk(created=False), FakeDeadLetters())
    assert await reader.handle(_record(orjson.dumps(_GOOD))) == "replayed"
    assert counted == []
