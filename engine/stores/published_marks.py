"""The mark of verdict rows as published: one statement, or one part of another.

A ``verdicts`` row carries ``published``: false when stored, true once Kafka acknowledged its
record. :func:`mark_part` is that update as SQL and arguments numbered from ``$1``; it is sent
alone (``engine.stores.verdict_outbox``) or as the last part of a batch's verdict statement
(``engine.stores.verdict_batches``, the marks carried by ``engine.stores.carried_marks``). A row
already marked is left alone, so marking twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.verdict_codec import VerdictRowKey

__all__ = ["mark_part"]

_MARK_PUBLISHED = """
UPDATE verdicts v SET published = true
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[]) AS x(t, p, o, s)
WHERE v.source_topic = x.t AND v.source_partition = x.p AND v.source_offset = x.o
  AND v.sent_at = x.s AND NOT v.published
"""


def mark_part(keys: Sequence[VerdictRowKey]) -> tuple[str, list[Any]]:
    """The mark of the rows of ``keys`` as SQL and its arguments."""
    return _MARK_PUBLISHED, [
        [k[0].topic for k in keys],
        [k[0].partition for k in keys],
        [k[0].offset for k in keys],
        [k[1] for k in keys],
    ]
