"""The PostgreSQL stores both moderating services use, one module per thing stored.

``database`` opens the pool and names the errors; ``verdict_batches`` writes a batch's verdicts,
escalations, dead letters, pending texts and consumer offsets in one transaction;
``verdict_outbox`` reads and marks verdict rows not yet published; ``pending_texts`` serves
re-scoring; ``partitions`` keeps the ``verdicts`` partitions ahead; ``strikes`` reads moderators'
strikes. "Store" always means Postgres here; Kafka output is a "publisher".
"""

__all__: list[str] = []
