"""Test-only entry point for chaos scenario 9: ``modstream worker`` with poisoned verdict writes.

``python -m tests.chaos.poisoned_worker`` runs the ordinary worker, except that in the verdict
INSERT of ``VerdictBatchStore.write`` the ``message_id`` of every message whose id starts with
``poison-`` gets a lone surrogate appended: a Python ``str`` that asyncpg cannot encode as UTF-8,
so the driver refuses the write on the client side, before anything reaches the server. That
stands for any value the driver rejects; the scenario checks that such a batch is isolated (the
poisoned rows dead-lettered as ``sink_rejected``, the rest stored) and never retried as an
outage. Nothing in the worker itself knows about this; the patch lives only here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from engine.stores import verdict_batches
from engine.stores.arrays import verdict_arrays
from pipelines.verdict import Verdict
from pipelines.verdict_codec import VERDICT_COLUMNS

__all__ = ["POISON_PREFIX", "main", "poisoned_verdict_arrays"]

POISON_PREFIX = "poison-"
_MESSAGE_ID = VERDICT_COLUMNS.index("message_id")
_UNENCODABLE = "\ud800"


def poisoned_verdict_arrays(verdicts: Sequence[Verdict]) -> list[list[Any]]:
    """``verdict_arrays`` with an unencodable ``message_id`` for the poisoned messages."""
    arrays = verdict_arrays(verdicts)
    arrays[_MESSAGE_ID] = [
        f"{mid}{_UNENCODABLE}" if mid.startswith(POISON_PREFIX) else mid
        for mid in arrays[_MESSAGE_ID]
    ]
    return arrays


def main() -> int:
    verdict_batches.verdict_arrays = poisoned_verdict_arrays  # type: ignore[attr-defined]
    from modstream.cli import main as cli_main

    return cli_main(sys.argv[1:] or ["worker"])


if __name__ == "__main__":
    sys.exit(main())
