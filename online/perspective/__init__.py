"""``comments:analyze``: Perspective API's wire format over the online service's moderation.

Served over HTTP by the online service (``online.perspective.http``), beside its gRPC port, so a
call is decided by the same rules, model and policy as ``CheckMessage`` and the stream. The
attribute scores come from a mapping kept as data (``attributes.toml``, read by
``online.perspective.mapping``); see docs/perspective.md.
"""
