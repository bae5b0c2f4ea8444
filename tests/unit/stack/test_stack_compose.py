"""docker-compose.yml describes the same stack with the official images (not an acceptance test:
Docker is optional for modstream and the engine is absent on the development machines)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from common.settings import KafkaSettings, project_root

COMPOSE_FILE = project_root() / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed compose file (PyYAML comes with the dev tools; skip cleanly without it)."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read docker-compose.yml")
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return data


def _compose_plugin() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker client installed"
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        return "the docker client has no compose plugin (`docker compose version` fails)"
    return None


def test_services_use_official_images(compose: dict[str, Any]) -> None:
    """Kafka 4.x and PostgreSQL come from their official images, Triton from an image built on
    the official one; the worker is built from the project."""
    services = compose["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["postgres"]["image"].startswith("postgres:")
    triton_file = project_root() / services["triton"]["build"] / "Dockerfile"
    assert "FROM nvcr.io/nvidia/tritonserver:" in triton_file.read_text(encoding="utf-8")
    assert services["worker"]["build"] == "."
    assert "image" not in services["worker"]


def _third_party_imports(folder: Path) -> set[str]:
    """Top-level modules the files in ``folder`` import, less the standard library and what
    Triton's Python backend itself provides."""
    found: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"__future__", "triton_python_backend_utils"}


def test_triton_image_has_what_the_served_models_import() -> None:
    """Every package the Python-backend models import is installed in the compose Triton image
    (the official image has none of them)."""
    dockerfile = (project_root() / "stack" / "triton-image" / "Dockerfile").read_text(
        encoding="utf-8"
    )
    wanted = _third_party_imports(project_root() / "modelbuild" / "serving")
    pip_names = {"onnxruntime": "onnxruntime-gpu"}
    assert {"numpy", "onnxruntime", "tokenizers", "vaderSentiment"} <= wanted
    missing = [m for m in sorted(wanted) if f'"{pip_names.get(m, m)}' not in dockerfile]
    assert missing == []


def test_triton_reserves_a_gpu(compose: dict[str, Any]) -> None:
    """Triton asks for an NVIDIA GPU under deploy.resources.reservations.devices."""
    devices = compose["services"]["triton"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    """Every service that keeps running declares a healthcheck."""
    for name in ("kafka", "postgres", "triton", "worker"):
        assert compose["services"][name]["healthcheck"]["test"], name


def test_worker_env_points_at_service_names(compose: dict[str, Any]) -> None:
    """The worker's MODSTREAM_ variables name the compose services, not localhost."""
    env = compose["services"]["worker"]["environment"]
    assert env["MODSTREAM_KAFKA__BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert env["MODSTREAM_TRITON__GRPC_URL"] == "triton:8001"
    assert "@postgres:5432/" in env["MODSTREAM_POSTGRES__DSN"]


def test_topic_job_creates_the_settings_topics(compose: dict[str, Any]) -> None:
    """The topic job creates every topic named in KafkaSettings."""
    script = "\n".join(compose["services"]["kafka-topics"]["command"])
    kafka = KafkaSettings()
    for topic in (kafka.input_topic, kafka.dlq_topic, kafka.verdict_topic, kafka.decision_topic):
        assert f"{topic}:" in script


def test_dockerfile_runs_the_worker() -> None:
    """The worker image is python:3.11-slim, installs the project and runs `modstream worker`."""
    dockerfile = (project_root() / "Dockerfile").read_text(encoding="utf-8")
    assert "FROM python:3.11-slim" in dockerfile
    assert "pip install ." in dockerfile
    assert 'ENTRYPOINT ["modstream", "worker"]' in dockerfile


def test_docker_compose_config_validates(tmp_path: Path) -> None:
    """`docker compose config` accepts the file (needs only the client and its compose plugin)."""
    reason = _compose_plugin()
    if reason is not None:
        pytest.skip(reason)
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=project_root(),
    )
    assert result.returncode == 0, result.stderr


def test_stateful_services_keep_their_data_on_volumes(compose: dict[str, Any]) -> None:
    """Kafka's log and PostgreSQL's data survive `down`/`up`: both sit on named volumes, and
    Kafka writes its log where the volume is mounted (offsets in PostgreSQL stay valid)."""
    kafka = compose["services"]["kafka"]
    log_dir = kafka["environment"]["KAFKA_LOG_DIRS"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in kafka["volumes"]}
    assert mounts.get(log_dir) in compose["volumes"]
    postgres_mounts = [m.split(":")[0] for m in compose["services"]["postgres"]["volumes"]]
    assert all(name in compose["volumes"] for name in postgres_mounts)
