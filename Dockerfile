# The modstream worker image (`docker compose` builds it; see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . /app
# `pip install .` brings the dependencies and the `modstream` command. PYTHONPATH=/app makes the
# packages run from this folder, so project_root() finds migrations/ and model_repository/ here.
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home modstream
ENV PYTHONPATH=/app

USER modstream
EXPOSE 18080
# SIGTERM drains in-flight batches (see worker settings: batch.drain_timeout_s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["modstream", "worker"]
