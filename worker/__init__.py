"""The moderation daemon: Kafka in, rules, micro-batched Triton inference, verdicts in PostgreSQL.

Only the daemon's parts live here (settings, Kafka source and publisher, batcher, inference
client, processing, stores, offsets, re-scoring, outbox relay, health and metrics). It imports
``pipelines`` (pure domain code) and ``common`` (settings base, logging, shared database reads),
never the review service, the development stack, ``modelbuild``, ``bench`` or ``tests``.
"""
