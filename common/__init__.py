"""What every modstream program shares: the settings base, logging, database helpers.

Small on purpose: the daemon (``worker``), the review service (``review``), the development
stack (``stack``), the admin commands (``admin``) and the model tools (``modelbuild``) import
it; it imports none of them, only ``pipelines``.
"""
