"""Pure, synchronous, I/O-free moderation domain code.

Nothing in this package performs I/O or imports from ``worker``: it is the part of modstream
that unit tests cover exhaustively and that any runtime (the Kafka worker, a batch re-scorer,
a notebook) can reuse.
"""
