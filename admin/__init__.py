"""Administration commands: ``modstream migrate`` and ``modstream retention`` (the database),
``modstream models push`` and ``pull`` (the model repository in object storage)."""
