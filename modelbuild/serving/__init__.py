"""Python-backend model sources; the build copies each into model_repository/ as model.py."""
