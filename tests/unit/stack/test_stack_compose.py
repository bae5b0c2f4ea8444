"""docker-compose.yml describes the same stack with the official images (not an acceptance test:
Docker is optional for modstream and the engine is absent on the development machines)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from common.settings import KafkaSettings, project_root
from modstream.cli import PRODUCTION_COMMANDS

COMPOSE_FILE = project_root() / "docker-compose.yml"
COMPOSE_SCHEMA = project_root() / "deploy" / "schemas" / "compose-spec" / "compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The compose file as the compose tools read it (YAML, anchors and merge keys resolved)."""
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return data


def test_the_file_is_valid_under_the_compose_specification_schema(compose: dict[str, Any]) -> None:
    """The Compose Specification's own JSON Schema (vendored, deploy/schemas/README.md) accepts
    the file, as `docker compose config` would; a misspelt key or a wrong type fails."""
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    errors = [
        f"{e.json_path}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(compose)
    ]
    assert errors == []
    broken = {**compose, "services": {**compose["services"], "worker": {"imag": "x"}}}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def _active(compose: dict[str, Any], profile: str) -> dict[str, dict[str, Any]]:
    """The services `docker compose --profile PROFILE up` starts."""
    return {
        name: service
        for name, service in compose["services"].items()
        if not service.get("profiles") or profile in service["profiles"]
    }


def _names(service_name: str, service: dict[str, Any]) -> set[str]:
    """The host names a service answers to on the default network."""
    networks = service.get("networks", {})
    aliases = networks.get("default", {}).get("aliases", []) if isinstance(networks, dict) else []
    return {service_name, *aliases}


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_each_profile_runs_one_triton_that_the_services_reach(
    compose: dict[str, Any], profile: str
) -> None:
    """Under either profile exactly one Triton runs, answers to the host name the services
    use, and every dependency a started service has is either started too or optional."""
    active = _active(compose, profile)
    tritons = [name for name, svc in active.items() if "tritonserver" in svc.get("command", [])]
    assert len(tritons) == 1, tritons
    (triton,) = tritons
    host = compose["x-modstream-env"]["MODSTREAM_TRITON__GRPC_URL"].partition(":")[0]
    assert host in _names(triton, active[triton])
    for name, service in active.items():
        for needed, how in service.get("depends_on", {}).items():
            assert needed in active or how.get("required") is False, (name, needed)
    gpu = "deploy" in active[triton]
    assert gpu == (profile == "gpu")


def test_the_gpu_triton_reserves_a_gpu_and_both_serve_the_same_repository(
    compose: dict[str, Any],
) -> None:
    """The gpu profile's Triton asks for an NVIDIA GPU; the cpu one asks for none and serves
    the same model repository with the same command, less the GPU configs' selection
    (``--model-config-name=gpu``: model_repository/*/configs/gpu.pbtxt)."""
    gpu, cpu = compose["services"]["triton"], compose["services"]["triton-cpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert "deploy" not in cpu
    assert cpu["volumes"] == gpu["volumes"] == ["./model_repository:/models:ro"]
    assert [*cpu["command"], "--model-config-name=gpu"] == gpu["command"]


_LOGINS = {
    "migrate": "modstream_migrator",
    "worker": "modstream_worker_login",
    "review": "modstream_review_login",
    "online": "modstream_online_login",
}


def test_each_program_connects_as_its_own_login_never_the_superuser(
    compose: dict[str, Any],
) -> None:
    """migrate, worker, review and online each run their own command from the project's
    image and connect as their own login (created by deploy/compose/postgres-roles.sh in its
    group role); no DSN names the PostgreSQL superuser."""
    services = compose["services"]
    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    roles_script = (project_root() / "deploy" / "compose" / "postgres-roles.sh").read_text()
    for name, login in _LOGINS.items():
        service = services[name]
        assert service["build"] == "."
        assert service["command"][0] in PRODUCTION_COMMANDS
        dsn = service["environment"]["MODSTREAM_POSTGRES__DSN"]
        assert dsn.startswith(f"postgresql://{login}:"), name
        assert f"//{superuser}:" not in dsn
        assert f"CREATE ROLE {login} LOGIN" in roles_script
    mounted = [v for v in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in v]
    assert mounted == [
        "./deploy/compose/postgres-roles.sh:/docker-entrypoint-initdb.d/10-modstream-roles.sh:ro"
    ]


def test_the_review_and_online_services_are_there_with_their_ports(
    compose: dict[str, Any],
) -> None:
    """The review console/API and the online gRPC service run beside the worker, each
    publishing the port its settings bind and checked on its /readyz."""
    review, online = compose["services"]["review"], compose["services"]["online"]
    assert review["command"] == ["review", "serve"]
    assert review["environment"]["MODSTREAM_REVIEW__PORT"] == "18090"
    assert "18090:18090" in review["ports"]
    assert online["command"] == ["online"]
    assert {"18070:18070", "18071:18071"} <= set(online["ports"])
    for service, port in ((review, 18090), (online, 18071), (compose["services"]["worker"], 18080)):
        assert f"127.0.0.1:{port}/readyz" in " ".join(service["healthcheck"]["test"])


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
    assert services["triton-cpu"]["build"] == services["triton"]["build"]
    assert services["worker"]["build"] == "."


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


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    """Every service that keeps running declares a healthcheck."""
    for name in ("kafka", "postgres", "triton", "triton-cpu", "worker", "review", "online"):
        assert compose["services"][name]["healthcheck"]["test"], name


def test_worker_env_points_at_service_names(compose: dict[str, Any]) -> None:
    """The services' MODSTREAM_ variables name the compose services, not localhost."""
    for name in ("worker", "review", "online"):
        env = compose["services"][name]["environment"]
        assert env["MODSTREAM_KAFKA__BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert env["MODSTREAM_TRITON__GRPC_URL"] == "triton:8001"
        assert "@postgres:5432/" in env["MODSTREAM_POSTGRES__DSN"]


def test_topic_job_creates_the_settings_topics(compose: dict[str, Any]) -> None:
    """The topic job creates every topic named in KafkaSettings."""
    script = "\n".join(compose["services"]["kafka-topics"]["command"])
    kafka = KafkaSettings()
    for topic in (
        kafka.input_topic,
        kafka.dlq_topic,
        kafka.verdict_topic,
        kafka.decision_topic,
        kafka.appeal_topic,
        kafka.appeal_dlq_topic,
    ):
        assert f"{topic}:" in script


def test_dockerfile_installs_the_lock_before_the_source_and_runs_the_worker() -> None:
    """The image is python:3.11-slim; the locked runtime dependencies are installed (hashes
    checked) in a layer before the source is copied, then the project itself without
    dependencies; `modstream` is the entry point and `worker` the default command."""
    lines = [
        line.strip()
        for line in (project_root() / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert "FROM python:3.11-slim" in lines

    def index(fragment: str) -> int:
        return next(i for i, line in enumerate(lines) if fragment in line)

    lock = index("pip install --no-deps --require-hashes -r requirements/runtime.lock")
    assert index("COPY requirements/runtime.lock") < lock < index("COPY . /app")
    assert index("COPY . /app") < index("pip install --no-deps .")
    assert 'ENTRYPOINT ["modstream"]' in lines
    assert 'CMD ["worker"]' in lines


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
    postgres_mounts = {
        m.split(":")[1]: m.split(":")[0] for m in compose["services"]["postgres"]["volumes"]
    }
    assert postgres_mounts["/var/lib/postgresql/data"] in compose["volumes"]
