"""Database administration commands: ``modstream migrate`` and ``modstream retention``."""
