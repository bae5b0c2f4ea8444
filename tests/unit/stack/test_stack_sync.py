"""run_sync() drives a coroutine from sync code, with or without a running loop."""

from __future__ import annotations

import asyncio
import threading

from stack._sync import run_sync


async def _thread_name() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_runs_in_this_thread_without_a_loop() -> None:
    """Outside any event loop the coroutine runs right here."""
    assert run_sync(_thread_name) == threading.current_thread().name


async def test_moves_to_a_helper_thread_inside_a_loop() -> None:
    """Inside a running loop (where asyncio.run would refuse) it runs on another thread."""
    assert run_sync(_thread_name) != threading.current_thread().name
