"""Async I/O and lifecycle for modstream: Kafka, Triton, Postgres, HTTP, the CLI."""
