"""Tests for engine.triton: retries by status code, the retry budget and the breaker."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

import engine.triton as inference_module
from engine.breaker import BreakerState, CircuitBreaker
from engine.inference import InferenceRejected, InferenceUnavailable
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from pipelines.scores import (
    HARM_LABELS,
    INTENT_LABELS,
    MODEL_OUTPUTS,
    SENTIMENT_LABELS,
    TOXICITY_LABELS,
)

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
    """A stand-in for the grpc aio client: each call takes the next scripted failure, if any.
    Its model declares ``declared`` outputs (metadata); it answers the outputs asked for that
    it has (``harms``: the HARMS rows it gives when asked, ``None``: it gives none)."""

    def __init__(
        self,
        script: list[BaseException | str] | None = None,
        *,
        rows: int = 0,
        declared: tuple[str, ...] = tuple(MODEL_OUTPUTS),
        harms: tuple[float, ...] | None = None,
    ) -> None:
        self.script = list(script or [])
        self.forever: str | None = None
        self.rows = rows
        self.calls = 0
        self.closed = False
        self.declared = declared
        self.harms = harms
        self.metadata_calls = 0
        self.metadata_failure: str | None = None
        self.asked: list[list[str]] = []

    async def get_model_metadata(self, model_name: str, *_: Any, **__: Any) -> SimpleNamespace:
        self.metadata_calls += 1
        if self.metadata_failure is not None:
            raise InferenceServerException("metadata failure", status=self.metadata_failure)
        return SimpleNamespace(
            name=model_name, outputs=[SimpleNamespace(name=n) for n in self.declared]
        )

    async def infer(self, model_name: str, inputs: list[Any], **kwargs: Any) -> FakeResponse:
        self.calls += 1
        failure: BaseException | str | None = self.script.pop(0) if self.script else self.forever
        if isinstance(failure, str):
            raise InferenceServerException("scripted failure", status=failure)
        if failure is not None:
            raise failure
        asked = [output.name() for output in kwargs["outputs"]]
        self.asked.append(asked)
        n = self.rows or int(inputs[0].shape()[0])
        outputs = {
            "SENTIMENT": _uniform(n, len(SENTIMENT_LABELS)),
            "INTENT": _uniform(n, len(INTENT_LABELS)),
            "TOXICITY": _uniform(n, len(TOXICITY_LABELS)),
        }
        if "HARMS" in asked and self.harms is not None:
            outputs["HARMS"] = np.tile(np.asarray(self.harms, dtype=np.float32), (n, 1))
        return FakeResponse({k: v for k, v in outputs.items() if k in asked}, "3")

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


# --- the optional HARMS output ---------------------------------------------------------------

HARMS = (0.75, 0.0, 0.5, 0.25, 1.0)
WITH_HARMS = (*MODEL_OUTPUTS, "HARMS")


async def test_a_model_declaring_harms_is_asked_for_them_and_they_reach_the_scores() -> None:
    """Metadata naming HARMS: the request asks for the four outputs and every row's ``harms``
    holds the model's five probabilities."""
    fake = FakeTriton(declared=WITH_HARMS, harms=HARMS)
    result = await (await _client(fake)).infer(["a", "b"])
    assert fake.asked == [list(WITH_HARMS)]
    assert [row.harms for row in result.scores] == [HARMS, HARMS]
    assert len(HARMS) == len(HARM_LABELS)


async def test_a_model_without_harms_is_not_asked_for_them() -> None:
    """Metadata without HARMS: only the three required outputs are asked for, and the scores
    have ``harms=None``."""
    fake = FakeTriton()
    result = await (await _client(fake)).infer(["a"])
    assert fake.asked == [list(MODEL_OUTPUTS)]
    assert result.scores[0].harms is None


async def test_a_response_without_the_declared_harms_gives_scores_without_them() -> None:
    """A model that declares HARMS but leaves it out of a response (a version without it) still
    scores: ``harms=None``, no refusal."""
    fake = FakeTriton(declared=WITH_HARMS, harms=None)
    result = await (await _client(fake)).infer(["a"])
    assert fake.asked == [list(WITH_HARMS)]
    assert result.scores[0].harms is None


async def test_harms_outside_the_contract_are_rejected() -> None:
    """A harm probability above 1 is a contract violation: ``InferenceRejected``."""
    fake = FakeTriton(declared=WITH_HARMS, harms=(0.1, 1.5, 0.0, 0.0, 0.0))
    with pytest.raises(InferenceRejected, match="HARMS"):
        await (await _client(fake)).infer(["a"])


async def test_the_metadata_is_read_once_and_again_after_the_replica_failed() -> None:
    """The outputs are read on the first call and kept; after an UNAVAILABLE call they are read
    again, so a server back with another model is asked for what it has."""
    fake = FakeTriton(declared=tuple(MODEL_OUTPUTS))
    client = await _client(fake)
    await client.infer(["a"])
    await client.infer(["b"])
    assert fake.metadata_calls == 1
    fake.script = [UNAVAILABLE]
    fake.declared = WITH_HARMS
    fake.harms = HARMS
    result = await client.infer(["c"])
    assert fake.metadata_calls == 2
    assert fake.asked[-1] == list(WITH_HARMS)
    assert result.scores[0].harms == HARMS


async def test_unavailable_metadata_is_retried_like_a_call() -> None:
    """Metadata answered UNAVAILABLE is a retriable failure: the call is tried again."""
    fake = FakeTriton(declared=WITH_HARMS, harms=HARMS)
    fake.metadata_failure = UNAVAILABLE
    client = await _client(fake, max_attempts=2, threshold=10)
    with pytest.raises(InferenceUnavailable):
        await client.infer(["a"])
    assert (fake.metadata_calls, fake.calls) == (2, 0)
    fake.metadata_failure = None
    assert (await client.infer(["a"])).scores[0].harms == HARMS


async def test_refused_metadata_scores_without_harms() -> None:
    """A server that refuses to describe the model (a status that is not retried) is asked for
    the required outputs only, and the call goes through."""
    fake = FakeTriton(declared=WITH_HARMS, harms=HARMS)
    fake.metadata_failure = "StatusCode.UNIMPLEMENTED"
    client = await _client(fake)
    result = await client.infer(["a"])
    assert fake.asked == [list(MODEL_OUTPUTS)]
    assert result.scores[0].harms is None
    assert _state(_breaker(client)) is BreakerState.CLOSED
