"""Build, train and evaluate the models that model_repository/ serves (see ``modstream models``)."""
