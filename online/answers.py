"""The checks waiting for their verdict, answered when it is durable (the online acknowledger).

Each check's record is registered with its model deadline before it is queued; the batch
processor tells :meth:`PendingAnswers.durable` which verdicts PostgreSQL stored, and each one
answers its call. Whatever a batch left unanswered (its row was refused, the batch failed) is
failed with ``NotDecided`` by :meth:`PendingAnswers.fail_unanswered`. An answer outlives a
caller that went away (deadline, cancellation): a repeat of the message waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from engine.stores.verdict_batches import VerdictBatch
from engine.work import Work
from online.errors import NotDecided
from pipelines.messages import SourcePosition
from pipelines.verdict import Verdict

__all__ = ["PendingAnswers"]


@dataclass(slots=True)
class _Pending:
    model_deadline: float
    answer: asyncio.Future[Verdict]


def _observe(future: asyncio.Future[Verdict]) -> None:
    """Mark an answer's outcome as seen (its caller may have gone: deadline, cancellation)."""
    if not future.cancelled():
        future.exception()


class PendingAnswers:
    def __init__(self) -> None:
        self._pending: dict[SourcePosition, _Pending] = {}

    def expect(self, position: SourcePosition, model_deadline: float) -> asyncio.Future[Verdict]:
        """The future the verdict at ``position`` will answer (``ValueError`` if one is
        already waiting there)."""
        if position in self._pending:
            raise ValueError(f"record {position} is already being decided")
        answer: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        answer.add_done_callback(_observe)
        self._pending[position] = _Pending(model_deadline, answer)
        return answer

    def model_deadline(self, position: SourcePosition) -> float | None:
        """When the model must have answered for the check at ``position`` (``None``: no
        check waits there any more)."""
        waiting = self._pending.get(position)
        return None if waiting is None else waiting.model_deadline

    async def durable(self, works: Sequence[Work], stored: VerdictBatch) -> None:
        """Answer the checks whose verdict is now stored."""
        for verdict in stored.verdicts:
            waiting = self._pending.pop(verdict.position, None)
            if waiting is not None and not waiting.answer.done():
                waiting.answer.set_result(verdict)

    def fail_unanswered(self, works: Sequence[Work]) -> None:
        """Fail the checks of ``works`` that no stored verdict answered."""
        for work in works:
            waiting = self._pending.pop(work.position, None)
            if waiting is not None and not waiting.answer.done():
                waiting.answer.set_exception(NotDecided("no verdict was stored for the message"))
