"""The moderation engine: what the stream worker and the online service both run.

Neither service owns it; both import it (``worker`` and ``online`` sit above it in the import
layers of ``pyproject.toml``). Today it holds the PostgreSQL stores (``engine.stores``), with
the one verdict write both services send per batch (``engine.stores.verdict_batches``).
"""

__all__: list[str] = []
