"""The ``modstream`` command: one CLI over every program (see ``modstream.cli``)."""
