"""The review queue: moderators claim escalations, decide them, and the decisions reach Kafka.

``modstream review serve`` runs the HTTP API (``/api``, OpenAPI at ``/api/openapi.json``) and the
server-rendered console (``/console``); ``modstream review add-user`` issues API tokens.
"""

from __future__ import annotations

from worker.review.strikes import active_strikes

__all__ = ["active_strikes"]
