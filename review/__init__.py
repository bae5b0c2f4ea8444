"""The review service: moderators claim escalations, decide them, and the decisions reach Kafka.

``modstream review serve`` runs the HTTP API (``/api``, OpenAPI at ``/api/openapi.json``) and the
server-rendered console (``/console``); ``modstream review add-user`` issues API tokens. It
imports ``common`` and ``pipelines`` only, never the daemon (``worker``).
"""
