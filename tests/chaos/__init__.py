"""The chaos suite: ``python -m tests.chaos`` (full) or ``python -m tests.chaos --quick``.

Each scenario produces uniquely numbered records into its own topics, breaks something (kills
the worker, stops Triton, PostgreSQL or Kafka, scales workers, feeds bad input, reloads rules)
and then checks the ledger: every produced record ends as exactly one verdict row or one dead
letter, none missing, none twice. Endpoints come from ``Settings`` (``MODSTREAM_*``); services
are stopped and started through ``stack`` on the stack those settings point at.
"""
