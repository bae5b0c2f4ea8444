"""Online mode: ``ModerationService.CheckMessage`` over gRPC, on the stream's own pipeline.

A chat server asks for a verdict before it delivers a message. The service decodes the request
with the stream's decoder, runs the stream's rules, coalesces model work into Triton batches,
decides with the stream's policy and stores, escalates and publishes through the daemon's
``BatchProcessor``, at source coordinates of its own (``online``/0/sequence; docs/online.md).
"""

__all__: list[str] = []
