"""The part of Triton's ``triton_python_backend_utils`` that a model's own code calls.

Inside Triton, a Python-backend model imports ``triton_python_backend_utils`` (the Python stub
provides it) for its tensors, responses, errors, log and metrics. Outside Triton,
:mod:`modelhost.python_backend` registers this module under that name before it imports a
model's ``model.py``, so the same file runs unchanged: in the worker (the ``inprocess``
backend) and in MLServer (``modelhost.mlserver_runtime``). Only what the models of this project
use is here; anything else is an ``AttributeError`` at the call, as an unknown name would be.

Metrics (``MetricFamily``/``Metric``) keep their last value in memory (:data:`METRICS`), so the
host can read what a model reports (the moderation model's ``modstream_model_encoder``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from modelhost.errors import ModelHostError

__all__ = [
    "METRICS",
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "Metric",
    "MetricFamily",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
]

_log = logging.getLogger("modelhost.model")

METRICS: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
"""(family name, sorted labels) -> the value a model last set."""


class Tensor:
    """A named array, as Triton's ``pb_utils.Tensor``."""

    def __init__(self, name: str, array: Any) -> None:
        self._name = name
        self._array = np.asarray(array)

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray[Any, Any]:
        return self._array


class InferenceRequest:
    """One request's input tensors (what ``execute`` receives, one per request)."""

    def __init__(self, inputs: Sequence[Tensor], requested_output_names: Sequence[str] = ()):
        self._inputs = list(inputs)
        self._outputs = list(requested_output_names)

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def requested_output_names(self) -> list[str]:
        return self._outputs


class TritonError:
    """An error a model returns in a response instead of outputs (Triton's ``TritonError``)."""

    UNKNOWN: ClassVar[int] = 0
    INTERNAL: ClassVar[int] = 1
    NOT_FOUND: ClassVar[int] = 2
    INVALID_ARG: ClassVar[int] = 3
    UNAVAILABLE: ClassVar[int] = 4
    UNSUPPORTED: ClassVar[int] = 5
    ALREADY_EXISTS: ClassVar[int] = 6

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class TritonModelException(ModelHostError):
    """What Triton's utilities raise; a model may raise it too."""


class InferenceResponse:
    """Output tensors, or an error (Triton's ``InferenceResponse``)."""

    def __init__(
        self, output_tensors: Sequence[Tensor] = (), error: TritonError | None = None
    ) -> None:
        self._outputs = list(output_tensors)
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)


class Logger:
    """Triton's model log, onto the ``modelhost.model`` logger."""

    @staticmethod
    def log_info(message: str) -> None:
        _log.info(message)

    @staticmethod
    def log_warn(message: str) -> None:
        _log.warning(message)

    @staticmethod
    def log_error(message: str) -> None:
        _log.error(message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _log.debug(message)


class Metric:
    """One labelled series of a :class:`MetricFamily`; its value is kept in :data:`METRICS`."""

    def __init__(self, family: str, labels: dict[str, str]) -> None:
        self._key = (family, tuple(sorted(labels.items())))
        METRICS.setdefault(self._key, 0.0)

    def set(self, value: float) -> None:
        METRICS[self._key] = float(value)

    def increment(self, value: float) -> None:
        METRICS[self._key] = METRICS.get(self._key, 0.0) + float(value)

    def value(self) -> float:
        return METRICS.get(self._key, 0.0)


class MetricFamily:
    """A named metric a model defines (gauge or counter)."""

    COUNTER: ClassVar[int] = 0
    GAUGE: ClassVar[int] = 1
    HISTOGRAM: ClassVar[int] = 2

    def __init__(self, name: str, description: str, kind: int) -> None:
        self.name = name
        self.description = description
        self.kind = kind

    def Metric(self, labels: dict[str, str] | None = None) -> Metric:  # noqa: N802 - Triton's name
        return Metric(self.name, dict(labels or {}))
