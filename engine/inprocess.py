"""The in-process backend: the model repository's own ``model.py``, run inside the worker.

For small deployments and laptops (``inference.backend = "inprocess"``): no inference server.
The moderation model Triton serves is one Python-backend model (tokenizer, ONNX Runtime encoder,
heads, in ``moderation/<version>/model.py``); this client loads that very file from
``inference.repository`` with ``modelhost.python_backend`` (which stands in for Triton's
utilities) and calls it on a thread pool, so the event loop never waits on the model: one thread
per model instance (``inference.instances``), one call at a time per instance, as Triton runs
an instance.

It is the ``inprocess`` backend of ``engine.inference``'s ``InferenceClient`` with what the
Triton client has: the model name, version (``triton.model_version``; empty: the config's
default, as Triton's) and deadline (``triton.request_timeout_s``) of the ``triton`` section, a
circuit breaker with the same thresholds, the same per-replica metrics (replica label
``inprocess``) and the same provenance (the verdict's ``model_name`` and the loaded
``model_version``). Loading runs in the background from :meth:`start`: until it is done, calls
fail fast with ``InferenceUnavailable`` (rules-only ``pending_model`` verdicts, re-scored later);
a load that failed is tried again when the breaker half-opens. A model that answers with an
error, raises or breaks the contract gives ``InferenceRejected``, as Triton's error response does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from common.logs import get_logger
from engine.breaker import BreakerState, CircuitBreaker
from engine.inference import (
    InferenceRejected,
    InferenceResult,
    InferenceUnavailable,
    scores_from_outputs,
)
from engine.metrics import ReplicaMetrics
from engine.replicas import CallOutcome, Replica
from engine.settings import InferenceSettings, TritonSettings
from modelhost.python_backend import ModelFailed, ModelHostError, ModelRefused, PythonBackendModel

__all__ = ["REPLICA", "InProcessModerationClient"]

REPLICA = "inprocess"
"""The ``replica`` label of this backend's metrics and log lines."""
_log = get_logger(__name__)

ModelLoader = Callable[..., Any]
"""Makes one model instance: ``(repository, name, version, instance=i)`` ->
an object with ``version``, ``infer(texts)`` and ``close()`` (``PythonBackendModel``)."""


class InProcessModerationClient:
    """Scores texts with the repository's moderation model inside this process (see the module
    docstring). ``load`` makes one instance (tests pass a fake); ``clock`` drives the breaker."""

    def __init__(
        self,
        inference: InferenceSettings,
        triton: TritonSettings,
        *,
        load: ModelLoader = PythonBackendModel,
        clock: Callable[[], float] = time.monotonic,
        metrics: ReplicaMetrics | None = None,
    ) -> None:
        self._settings = inference
        self._triton = triton
        self._load_instance = load
        self._replica = Replica(
            REPLICA,
            CircuitBreaker(triton.breaker_failure_threshold, triton.breaker_reset_s, clock=clock),
            metrics,
        )
        self._executor: ThreadPoolExecutor | None = None
        self._idle: asyncio.Queue[Any] | None = None
        self._instances: list[Any] = []
        self._loading: asyncio.Task[None] | None = None
        self._failure: str | None = None
        self._version = ""

    @property
    def state(self) -> BreakerState:
        return self._replica.breaker.state

    @property
    def loaded(self) -> bool:
        """Every instance is loaded and calls may be made."""
        return bool(self._instances)

    @property
    def model_version(self) -> str:
        """The version loaded (empty until then)."""
        return self._version

    async def start(self, *, wait_ready: bool = True) -> None:
        """Start loading the model's instances on the pool's threads; by default, wait for
        them (``triton.ready_timeout_s``)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._settings.instances, thread_name_prefix="inprocess-model"
            )
            self._idle = asyncio.Queue()
            self._begin_load()
        if wait_ready:
            await self.wait_ready(self._triton.ready_timeout_s)

    def _begin_load(self) -> None:
        self._failure = None
        self._loading = asyncio.create_task(self._load(), name="inprocess-model-load")

    async def _load(self) -> None:
        assert self._executor is not None
        assert self._idle is not None
        loop = asyncio.get_running_loop()
        s, t = self._settings, self._triton
        started = time.perf_counter()
        made: list[Any] = []
        try:
            for number in range(s.instances):
                load = functools.partial(
                    self._load_instance,
                    s.repository,
                    t.model_name,
                    t.model_version,
                    instance=number,
                )
                made.append(await loop.run_in_executor(self._executor, load))
        except ModelHostError as exc:
            for instance in made:
                instance.close()
            self._failure = str(exc)
            self._replica.breaker.trip()
            self._replica.publish_state()
            _log.error("inprocess_model_load_failed", model=t.model_name, error=str(exc))
            return
        self._version = str(made[0].version)
        self._instances = made
        for instance in made:
            self._idle.put_nowait(instance)
        self._replica.breaker.record_success()
        self._replica.publish_state()
        _log.info(
            "inprocess_model_loaded",
            model=t.model_name,
            version=self._version,
            instances=len(made),
            repository=str(s.repository),
            seconds=round(time.perf_counter() - started, 2),
        )

    async def stop(self) -> None:
        """Wait for a load in progress, ``finalize`` every instance, end the pool's threads;
        a second call does nothing."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if self._loading is not None:
            await asyncio.gather(self._loading, return_exceptions=True)
        instances, self._instances = self._instances, []
        loop = asyncio.get_running_loop()
        for instance in instances:
            await loop.run_in_executor(executor, instance.close)
        executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> InProcessModerationClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_ready(self, timeout_s: float) -> None:
        """Return once the model is loaded; ``InferenceUnavailable`` (with the reason) when
        loading failed or took longer than ``timeout_s``."""
        if self._loading is None:
            raise InferenceUnavailable("in-process backend not started")
        try:
            await asyncio.wait_for(asyncio.shield(self._loading), timeout_s)
        except TimeoutError as exc:
            raise InferenceUnavailable(
                f"model {self._triton.model_name!r} not loaded after {timeout_s:.0f}s"
            ) from exc
        if not self.loaded:
            raise InferenceUnavailable(f"model not loaded: {self._failure}")
        _log.info("inprocess_ready", model=self._triton.model_name, version=self._version)

    async def probe(self) -> bool:
        """A half-open breaker closes once the model is loaded; a load that failed is tried
        again then. Returns whether calls may go out now."""
        breaker = self._replica.breaker
        if breaker.state is BreakerState.HALF_OPEN and breaker.allow():
            if self.loaded:
                breaker.record_success()
                _log.info("replica_breaker_closed", replica=REPLICA, by="probe")
            else:
                loading = self._loading is not None and not self._loading.done()
                if self._executor is not None and not loading:
                    self._begin_load()
                breaker.record_failure()
            self._replica.publish_state()
        return breaker.state is BreakerState.CLOSED

    async def infer(self, texts: Sequence[str]) -> InferenceResult:
        """Score ``texts`` (one row each) on a free instance, within ``triton.request_timeout_s``
        (waiting for the instance included)."""
        t = self._triton
        if not texts:
            return InferenceResult([], t.model_name, self._version, 0.0)
        if self._executor is None or self._idle is None:
            raise InferenceUnavailable("in-process backend not started")
        if not self.loaded:
            raise InferenceUnavailable(f"model not loaded: {self._failure or 'loading'}")
        breaker = self._replica.breaker
        if not breaker.allow():
            raise InferenceUnavailable("circuit breaker open")
        started = time.perf_counter()
        try:
            async with asyncio.timeout(t.request_timeout_s):
                outputs = await self._run(list(texts))
        except TimeoutError as exc:
            detail = f"deadline of {t.request_timeout_s}s exceeded"
            self._replica.record(CallOutcome.UNAVAILABLE, time.perf_counter() - started, detail)
            raise InferenceUnavailable(detail) from exc
        except (ModelRefused, ModelFailed) as exc:
            self._replica.record(CallOutcome.REJECTED, time.perf_counter() - started, str(exc))
            raise InferenceRejected(f"{t.model_name}: {exc}") from exc
        except BaseException:
            breaker.abandon()  # cancelled or unexpected: free a half-open slot
            raise
        try:
            scores = scores_from_outputs(outputs.get, len(texts))
        except InferenceRejected as exc:
            self._replica.record(CallOutcome.REJECTED, time.perf_counter() - started, str(exc))
            raise
        latency_s = time.perf_counter() - started
        self._replica.record(CallOutcome.ANSWERED, latency_s)
        return InferenceResult(scores, t.model_name, self._version, latency_s * 1000.0)

    async def _run(self, texts: list[str]) -> dict[str, Any]:
        """One call on a free instance's thread. The instance goes back to the idle queue when
        its thread is done, also when the caller gave up waiting (deadline, cancellation)."""
        assert self._executor is not None
        assert self._idle is not None
        idle = self._idle
        instance = await idle.get()
        loop = asyncio.get_running_loop()

        def release(_: Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(idle.put_nowait, instance)

        try:
            future = self._executor.submit(instance.infer, texts)
        except RuntimeError:  # the pool is shutting down
            idle.put_nowait(instance)
            raise InferenceUnavailable("in-process backend stopping") from None
        future.add_done_callback(release)
        return dict(await asyncio.wrap_future(future))
