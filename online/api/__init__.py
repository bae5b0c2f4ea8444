"""The online service's gRPC contract: ``moderation.proto`` and its generated Python modules."""

__all__: list[str] = []
