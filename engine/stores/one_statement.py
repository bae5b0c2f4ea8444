"""Several INSERTs as one SQL statement: data-modifying ``WITH`` parts, one round trip.

A batch's write is a handful of ``INSERT ... SELECT FROM unnest(...)`` statements that must land
together. Sent as ``BEGIN``, each INSERT and ``COMMIT``, that is one round trip per statement,
each waiting for Postgres to be scheduled on a busy machine. Joined as the parts of one
statement they run in one implicit transaction (all or nothing, as before) in one round trip:
PostgreSQL executes every data-modifying ``WITH`` part exactly once, whether or not the main
query reads it. Each part keeps its own ``$1..$n`` numbering here; this module shifts them.
A part may also be an ``UPDATE`` of rows stored by earlier statements (the published marks ride
on the next verdict write, ``engine.stores.carried_marks``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["one_statement", "shift_placeholders"]

_PLACEHOLDER = re.compile(r"\$(\d+)")


def shift_placeholders(sql: str, shift: int) -> str:
    """``sql`` with every ``$n`` placeholder renumbered ``$(n + shift)``."""
    return _PLACEHOLDER.sub(lambda m: f"${int(m.group(1)) + shift}", sql)


def _placeholder_count(sql: str) -> int:
    numbers = {int(n) for n in _PLACEHOLDER.findall(sql)}
    if numbers != set(range(1, len(numbers) + 1)):
        raise ValueError("placeholders must be $1..$n without gaps")
    return len(numbers)


def one_statement(parts: Sequence[tuple[str, Sequence[Any]]]) -> tuple[str, list[Any]]:
    """Join ``(sql, args)`` parts (each an INSERT or UPDATE numbered from ``$1``, without
    ``RETURNING``) into one statement and its arguments, in the parts' order."""
    if not parts:
        raise ValueError("nothing to write")
    clauses: list[str] = []
    args: list[Any] = []
    for index, (sql, part_args) in enumerate(parts):
        count = _placeholder_count(sql)
        if count != len(part_args):
            raise ValueError(f"part {index} takes {count} arguments, got {len(part_args)}")
        body = shift_placeholders(sql.strip().rstrip(";"), len(args))
        clauses.append(f"part_{index} AS (\n{body}\n)")
        args.extend(part_args)
    return "WITH " + ",\n".join(clauses) + "\nSELECT 1", args
