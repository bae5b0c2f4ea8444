"""The one layer around each ``ModerationService`` handler: timed and counted, then the token.

Every call of the service's methods is recorded by its method's :class:`online.metrics.MethodCalls`
(latency and status code, so calls the token check refuses count too), has its bearer token
checked (``online.auth``; refused with ``abort``), and then reaches the handler. It is one
coroutine made once per method when the server is built: two ``grpc.aio`` interceptors did the
same with a chain of coroutines per call and a SHA-256 of the token per call (BENCHMARKS.md,
"Online"). The health and reflection services are not wrapped: they need no token and are not
moderation calls.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from grpc import aio

from online.auth import TokenCheck
from online.metrics import MethodCalls

__all__ = ["Handler", "guarded"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

Handler = Callable[[_Req, aio.ServicerContext[Any, Any]], Awaitable[_Resp]]
"""A unary handler of the aio server."""


def guarded(
    handler: Handler[_Req, _Resp], calls: MethodCalls, tokens: TokenCheck | None, method: str
) -> Handler[_Req, _Resp]:
    """``handler`` recorded by ``calls`` and behind ``tokens`` (``None``: no token needed)."""

    async def call(request: _Req, context: aio.ServicerContext[Any, Any]) -> _Resp:
        started = time.perf_counter()
        failed: BaseException | None = None
        try:
            if tokens is not None:
                refusal = await tokens.refusal(context.invocation_metadata(), method)
                if refusal is not None:
                    await context.abort(*refusal)
            return await handler(request, context)
        except BaseException as exc:  # aborts raise; re-raised untouched
            failed = exc
            raise
        finally:
            calls.record(context, started, failed)

    return call
