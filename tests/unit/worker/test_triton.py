"""Tests for worker.triton: retries by status code, the retry budget and the breaker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

import worker.triton as inference_module
from pipelines.scores import INTENT_LABELS, SENTIMENT_LABELS, TOXICITY_LABELS
from worker.breaker import BreakerState, CircuitBreaker
from worker.inference import InferenceRejected, InferenceUnavailable
from worker.settings import TritonSettings
from worker.triton import TritonModerationClient

UNAVAILABLE = "StatusCode.UNAVAILABLE"
DEADLINE = "StatusCode.DEADLINE_EXCEEDED"
INVALID = "StatusCode.INVALID_ARGUMENT"


def _uniform(n: int, width: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.full((n, width), 1.0 / width, dtype=np.float32)


@dataclass
class _ResponseMeta:
    model_version: str


class FakeResponse:
    """Mimics tritonclient's InferResult: as_numpy(name) and get_response().model_version."""

    def __init__(self, outputs: dict[str, np.ndarray[Any, Any]], version: str) -> None:
        self._outputs = outputs
        self._version = version

    def as_numpy(self, name: str) -> np.ndarray[Any, Any] | None:
        return self._outputs.get(name)

    def get_response(self) -> _ResponseMeta:
        return _ResponseMeta(self._version)


class FakeTriton:
    """A stand-in for the grpc aio client: each call takes the next scripted failure, if any."""

    def __init__(self, script: list[BaseException | str] | None = None, *, rows: int = 0) -> None:
        self.script = list(script or [])
        self.forever: str | None = None
        self.rows = rows
        self.calls = 0
        self.closed = False

    async def infer(self, model_name: str, inputs: list[Any], **kwargs: Any) -> FakeResponse:
        self.calls += 1
        failure: BaseException | str | None = self.script.pop(0) if self.script else self.forever
        if isinstance(failure, str):
            raise InferenceServerException("scripted failure", status=failure)
        if failure is not None:
            raise failure
        n = self.rows or int(inputs[0].shape()[0])
        outputs = {
            "SENTIMENT": _uniform(n, len(SENTIMENT_LABELS)),
            "INTENT": _uniform(n, len(INTENT_LABELS)),
            "TOXICITY": _uniform(n, len(TOXICITY_LABELS)),
        }
        return FakeResponse(outputs, "3")

    async def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _state(breaker: CircuitBreaker) -> BreakerState:
    """The breaker's state, read through a call so mypy does not narrow it between asserts."""
    return breaker.state


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests must not sleep."""
    monkeypatch.setattr(inference_module, "backoff_s", lambda *_a, **_k: 0.0)


async def _client(
    fake: FakeTriton, *, max_attempts: int = 4, threshold: int = 5, clock: FakeClock | None = None
) -> TritonModerationClient:
    settings = TritonSettings(max_attempts=max_attempts, breaker_failure_threshold=threshold)
    client = TritonModerationClient(
        settings, client_factory=lambda **_: fake, clock=clock or FakeClock()
    )
    await client.start(wait_ready=False)
    return client


def _breaker(client: TritonModerationClient) -> CircuitBreaker:
    """The breaker of the client's one replica."""
    (replica,) = client.breaker.replicas
    return replica.breaker


@pytest.mark.parametrize("status", [UNAVAILABLE, DEADLINE])
async def test_transient_status_is_retried(status: str) -> None:
    """UNAVAILABLE and DEADLINE_EXCEEDED are retried, and the retry's answer is returned."""
    fake = FakeTriton([status])
    result = await (await _client(fake)).infer(["hi", "there"])
    assert fake.calls == 2
    assert len(result.scores) == 2
    assert result.model_version == "3"
    assert result.model_name == "moderation"
    assert result.scores[0].toxicity == pytest.approx((1 / 3, 1 / 3, 1 / 3))


@pytest.mark.parametrize("error", [TimeoutError(), ConnectionResetError()])
async def test_transport_errors_are_unavailable_and_retried(error: BaseException) -> None:
    """Timeouts and socket errors are wrapped as InferenceUnavailable and retried."""
    fake = FakeTriton([error])
    result = await (await _client(fake)).infer(["hi"])
    assert fake.calls == 2
    assert len(result.scores) == 1


async def test_invalid_argument_is_rejected_without_retry() -> None:
    """INVALID_ARGUMENT raises InferenceRejected after one call and does not trip the breaker."""
    fake = FakeTriton([INVALID, INVALID])
    client = await _client(fake, threshold=1)
    with pytest.raises(InferenceRejected, match="INVALID_ARGUMENT"):
        await client.infer(["hi"])
    assert fake.calls == 1
    assert _state(_breaker(client)) is BreakerState.CLOSED


async def test_gives_up_after_max_attempts() -> None:
    """A server that stays unavailable costs max_attempts calls, then InferenceUnavailable."""
    fake = FakeTriton()
    fake.forever = UNAVAILABLE
    with pytest.raises(InferenceUnavailable):
        await (await _client(fake, max_attempts=3, threshold=100)).infer(["hi"])
    assert fake.calls == 3


async def test_retry_budget_limits_retries_under_a_long_outage() -> None:
    """With many attempts allowed, the retry budget still stops retrying a dead server."""
    fake = FakeTriton()
    fake.forever = UNAVAILABLE
    client = await _client(fake, max_attempts=1000, threshold=10_000)
    with pytest.raises(InferenceUnavailable):
        await client.infer(["hi"])
    retries = fake.calls - 1
    ratio = client._settings.retry_budget_ratio
    assert fake.calls < 1000
    assert retries <= 3 + ratio * fake.calls  # RetryBudget's default min_retries is 3


async def test_breaker_opens_then_fails_fast_without_calling() -> None:
    """After threshold failed calls the breaker opens and infer fails without reaching Triton."""
    fake = FakeTriton()
    fake.forever = UNAVAILABLE
    clock = FakeClock()
    client = await _client(fake, max_attempts=1, threshold=3, clock=clock)
    for _ in range(3):
        with pytest.raises(InferenceUnavailable):
            await client.infer(["hi"])
    assert fake.calls == 3
    assert _state(_breaker(client)) is BreakerState.OPEN
    with pytest.raises(InferenceUnavailable, match="breaker"):
        await client.infer(["hi"])
    assert fake.calls == 3
    fake.forever = None
    clock.now += client._settings.breaker_reset_s
    result = await client.infer(["hi"])  # the half-open probe
    assert len(result.scores) == 1
    assert fake.calls == 4
    assert _state(_breaker(client)) is BreakerState.CLOSED


async def test_wrong_row_count_is_a_contract_violation() -> None:
    """Outputs with a different number of rows than texts raise InferenceRejected."""
    fake = FakeTriton(rows=1)
    with pytest.raises(InferenceRejected, match="rows"):
        await (await _client(fake)).infer(["a", "b"])
    assert fake.calls == 1


async def test_rows_not_summing_to_one_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Score rows that break the contract raise InferenceRejected, not ScoreRowError."""
    fake = FakeTriton()
    monkeypatch.setattr(
        FakeResponse, "as_numpy", lambda self, name: np.full((1, 4 if name == "INTENT" else 3), 0.9)
    )
    with pytest.raises(InferenceRejected, match="contract"):
        await (await _client(fake)).infer(["a"])


async def test_empty_input_makes_no_call() -> None:
    """Scoring no texts returns an empty result without calling Triton."""
    fake = FakeTriton()
    result = await (await _client(fake)).infer([])
    assert result.scores == []
    assert fake.calls == 0


async def test_not_started_is_unavailable() -> None:
    """infer before start raises InferenceUnavailable; stop is safe twice."""
    fake = FakeTriton()
    client = TritonModerationClient(TritonSettings(), client_factory=lambda **_: fake)
    with pytest.raises(InferenceUnavailable, match="not started"):
        await client.infer(["hi"])
    await client.start(wait_ready=False)
    await client.stop()
    await client.stop()
    assert fake.closed
    with pytest.raises(InferenceUnavailable, match="not started"):
        await client.infer(["hi"])
