# The modstream worker image (`docker compose` builds it; see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . /app
# The build context is the checkout minus .dockerignore: the daemon (worker), the online service
# (online, gRPC on 18070), the review service (review), the admin commands (admin) and what
# they share (common, pipelines, modstream), never the development stack, the model tools,
# benchmarks or tests. `pip install .` builds the wheel of exactly those packages with the
# runtime dependencies only (no dev or models extras); the commands it offers are
# modstream.cli.PRODUCTION_COMMANDS (tests/packaging builds this wheel in a fresh venv and runs
# each one's --help). PYTHONPATH=/app makes the packages run from this folder, so
# project_root() finds migrations/ here.
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home modstream
ENV PYTHONPATH=/app

USER modstream
EXPOSE 18080 18070
# SIGTERM drains in-flight batches (see worker settings: batch.drain_timeout_s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["modstream", "worker"]
