"""One error root per program: every exception class modstream defines derives from its
package's root (aiokafka's ``KafkaError`` style), so callers can catch a program's errors whole."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

from admin.errors import AdminError
from common.errors import CommonError
from engine.errors import EngineError
from modelhost.errors import ModelHostError
from online.errors import OnlineError
from pipelines.errors import PipelineError
from review.errors import ReviewError
from stack.errors import StackError
from worker.errors import WorkerError

ROOTS: dict[str, type[Exception]] = {
    "pipelines": PipelineError,
    "common": CommonError,
    "engine": EngineError,
    "modelhost": ModelHostError,
    "worker": WorkerError,
    "online": OnlineError,
    "review": ReviewError,
    "admin": AdminError,
    "stack": StackError,
}
FRAMEWORK_BOUND = {"review.bodylimit.BodyTooLargeError"}
"""Exceptions a framework must see as its own type (Starlette's ``HTTPException``)."""
MLSERVER_ONLY = {"modelhost.mlserver_runtime"}
"""Modules that import ``mlserver``, installed only in MLServer's own virtual environment."""


def _modules(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    names = [package] + [
        info.name
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")
        if not info.name.endswith("_pb2") and info.name not in MLSERVER_ONLY
    ]
    return [importlib.import_module(name) for name in names]


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_exception_a_package_defines_derives_from_its_root(package: str) -> None:
    """Each exception class defined in the package's modules subclasses the package's root."""
    strays = [
        f"{module.__name__}.{name}"
        for module in _modules(package)
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
        and not issubclass(value, ROOTS[package])
        and f"{module.__name__}.{name}" not in FRAMEWORK_BOUND
    ]
    assert strays == []


def test_retriable_is_declared_on_the_roots_that_retries_read() -> None:
    """The worker's and the shared clients' roots declare ``retriable`` (false by default);
    the kinds that may succeed later say so."""
    from common.publishing import PublishError
    from engine.inference import InferenceRejected, InferenceUnavailable
    from engine.stores.database import StoreError, StoreUnavailable

    assert WorkerError.retriable is False
    assert EngineError.retriable is False
    assert CommonError.retriable is False
    assert (StoreUnavailable.retriable, StoreError.retriable) == (True, False)
    assert (InferenceUnavailable.retriable, InferenceRejected.retriable) == (True, False)
    assert PublishError.retriable is True
