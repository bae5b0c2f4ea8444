# The modstream service image (`docker compose` builds it; deploy/k8s runs it): the daemon
# (`modstream worker`, the default command), the online service (`online`, gRPC on 18070), the
# review service (`review serve`), the admin commands (`migrate`, `retention`, `rescore`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Dependencies first, in a layer of their own: the exact versions of requirements/runtime.lock
# (made by `make lock` with uv from pyproject.toml; every file's hash is checked), so a change
# to the source rebuilds only the layers below.
COPY requirements/runtime.lock /app/requirements/runtime.lock
RUN pip install --no-deps --require-hashes -r requirements/runtime.lock

# The build context is the checkout minus .dockerignore: the service packages (worker, online,
# review, admin) and what they share (engine, common, pipelines, modstream), never the development
# stack, the model tools, benchmarks or tests. `pip install --no-deps .` adds the project's own
# wheel only; the commands it offers are modstream.cli.PRODUCTION_COMMANDS (tests/packaging
# builds this wheel in a fresh venv and runs each one's --help). PYTHONPATH=/app makes the
# packages run from this folder, so project_root() finds migrations/ here.
COPY . /app
RUN pip install --no-deps . \
    && useradd --system --uid 10001 --no-create-home modstream
ENV PYTHONPATH=/app

USER 10001
EXPOSE 18080 18070 18071 18072 18090
# SIGTERM drains in-flight batches (see worker settings: batch.drain_timeout_s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["modstream"]
CMD ["worker"]
