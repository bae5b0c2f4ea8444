"""deploy/k8s: both overlays render with kustomize, every object passes the vendored Kubernetes
and KEDA schemas, and the manifests keep their promises (deploy/k8s/README.md): probes, drain
time, non-root, read-only root, resources, secrets by reference, one database role per service,
rules and the policy file hot-reloaded from ConfigMaps, disruption budgets, network exposure;
workers never above the partition count, the Triton HPA on the adapter's metric; clients reaching
every Triton pod through a headless Service, and the model version pinned, its change a rollout."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

from admin.model_store import version_name
from admin.models_command import ModelStoreSettings
from common.settings import ServiceSettings, project_root
from online.settings import OnlineSettings
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import parse_policy
from review.settings import ReviewServiceSettings
from tests.k8s_manifests import (
    K8S,
    Manifest,
    UnpinnedModelVersion,
    render,
    render_directory,
    schema_errors,
)
from worker.settings import WorkerSettings

OVERLAYS = ("cpu", "gpu")
PROGRAMS: dict[str, type[BaseSettings]] = {
    "worker": WorkerSettings,
    "online": OnlineSettings,
    "review": ReviewServiceSettings,
    "migrate": ServiceSettings,
    "retention": ServiceSettings,
}
"""The first argument of a modstream container and the settings its program loads."""
SHUTDOWN_STEPS_S = 5.0
"""The worker's bounded stop steps after the drain (about 4 s: worker/app.py)."""


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def objects(overlay: str) -> list[Manifest]:
    return render(overlay)


def _one(objects: list[Manifest], kind: str, name: str) -> Manifest:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def _pod_specs(objects: list[Manifest]) -> Iterator[tuple[str, dict[str, Any]]]:
    for o in objects:
        if o["kind"] in ("Deployment", "Job"):
            yield o["metadata"]["name"], o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            yield o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def _modstream(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The container that runs a modstream program, if the pod has one."""
    for container in spec["containers"]:
        if container["image"].startswith("modstream:"):
            return container
    return None


def _config(objects: list[Manifest]) -> dict[str, str]:
    return dict(_one(objects, "ConfigMap", "modstream-config")["data"])


def _environment(objects: list[Manifest], container: dict[str, Any]) -> dict[str, str]:
    """The container's MODSTREAM_* environment, each Secret reference as ``<secret:NAME>``."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        name = source["configMapRef"]["name"]
        env.update(_one(objects, "ConfigMap", name)["data"])
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = f"<secret:{ref['name']}>"
    return env


# --- rendering and schemas -------------------------------------------------------------


def test_the_overlay_renders_and_every_object_passes_its_schema(objects: list[Manifest]) -> None:
    """kustomize renders the overlay, and the Kubernetes (strict) or KEDA schema of each
    object's kind accepts it; a kind without a vendored schema is an error, not a pass."""
    assert len(objects) > 20
    failures = {
        f"{o['kind']}/{o['metadata']['name']}": errors
        for o in objects
        if (errors := schema_errors(o))
    }
    assert failures == {}


def test_every_workload_point_1_lists_is_there(objects: list[Manifest]) -> None:
    """Deployments with Services for review, online and Triton; the worker without one; the
    migrations Job, the retention CronJob, the rules ConfigMap, a PDB per Deployment."""
    deployments = {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"}
    assert deployments == {"modstream-worker", "modstream-review", "modstream-online", "triton"}
    services = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    assert services == {"modstream-review", "modstream-online", "triton", "triton-replicas"}
    job = _one(objects, "Job", "modstream-migrate")
    assert _modstream(job["spec"]["template"]["spec"])["args"] == ["migrate"]  # type: ignore[index]
    cron = _one(objects, "CronJob", "modstream-retention")
    cron_spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert _modstream(cron_spec)["args"] == ["retention"]  # type: ignore[index]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    budgets = {
        tuple(sorted(o["spec"]["selector"]["matchLabels"].items()))
        for o in objects
        if o["kind"] == "PodDisruptionBudget"
    }
    for name in deployments:
        selector = _one(objects, "Deployment", name)["spec"]["selector"]["matchLabels"]
        assert tuple(sorted(selector.items())) in budgets, f"no PodDisruptionBudget for {name}"


def test_services_stay_inside_the_cluster_and_select_their_pods(objects: list[Manifest]) -> None:
    """No Service is a NodePort or LoadBalancer (exposure is the Ingress's business), and each
    selects the pods of one Deployment on ports those pods declare."""
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    for service in (o for o in objects if o["kind"] == "Service"):
        assert service["spec"].get("type", "ClusterIP") == "ClusterIP"
        selector = service["spec"]["selector"]
        targets = [
            d
            for d in deployments
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(targets) == 1, service["metadata"]["name"]
        declared = {
            p["name"]
            for c in targets[0]["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= declared


# --- the worker ------------------------------------------------------------------------


def _worker(objects: list[Manifest]) -> tuple[Manifest, dict[str, Any]]:
    deployment = _one(objects, "Deployment", "modstream-worker")
    container = _modstream(deployment["spec"]["template"]["spec"])
    assert container is not None
    return deployment, container


def test_the_worker_probes_healthz_and_readyz_on_its_http_port(objects: list[Manifest]) -> None:
    """Liveness on /healthz, readiness on /readyz, both on the port the worker's HTTP settings
    bind; start-up may take the model's whole ready timeout before /healthz answers."""
    _, container = _worker(objects)
    env = _environment(objects, container)
    port = int(env["MODSTREAM_HTTP__PORT"])
    assert env["MODSTREAM_HTTP__HOST"] == "0.0.0.0"  # noqa: S104 (a pod's own interface)
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert named.get(get["port"], get["port"]) == port
    startup = container["startupProbe"]
    budget_s = startup["periodSeconds"] * startup["failureThreshold"]
    ready_timeout_s = float(
        env.get("MODSTREAM_TRITON__READY_TIMEOUT_S", WorkerSettings().triton.ready_timeout_s)
    )
    assert budget_s > ready_timeout_s


def test_termination_grace_outlasts_the_drain(objects: list[Manifest]) -> None:
    """terminationGracePeriodSeconds exceeds batch.drain_timeout_s plus the bounded shutdown
    steps, so the kubelet never SIGKILLs a worker that is still draining."""
    deployment, container = _worker(objects)
    env = _environment(objects, container)
    drain_s = float(
        env.get("MODSTREAM_BATCH__DRAIN_TIMEOUT_S", WorkerSettings().batch.drain_timeout_s)
    )
    grace_s = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace_s > drain_s + SHUTDOWN_STEPS_S


# --- every pod -------------------------------------------------------------------------


def test_every_container_is_non_root_read_only_and_bounded(objects: list[Manifest]) -> None:
    """Each container, init containers included: runs as a non-root user, read-only root
    filesystem, no privilege escalation, every capability dropped, RuntimeDefault seccomp,
    CPU and memory requests and limits; no pod gets a service-account token."""
    seen = 0
    for name, spec in _pod_specs(objects):
        pod = spec.get("securityContext", {})
        assert spec.get("automountServiceAccountToken") is False, name
        assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        for container in _containers(spec):
            seen += 1
            where = f"{name}/{container['name']}"
            ctx = container.get("securityContext", {})
            assert ctx.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, where
            assert ctx.get("runAsUser", pod.get("runAsUser", 0)) != 0, where
            assert ctx.get("readOnlyRootFilesystem") is True, where
            assert ctx.get("allowPrivilegeEscalation") is False, where
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"], where
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= resources.get(bound, {}).keys(), (where, bound)
    assert seen >= 7


def test_secrets_are_referenced_never_committed(objects: list[Manifest]) -> None:
    """No Secret is rendered (its values would be in git); every DSN comes from a
    secretKeyRef, and no value in the manifests carries a password in a URL."""
    assert not [o for o in objects if o["kind"] == "Secret"]
    text = yaml.safe_dump_all(objects)
    assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", text), "a credential in a URL"
    for name, spec in _pod_specs(objects):
        container = _modstream(spec)
        if container is None:
            continue
        dsn = _environment(objects, container).get("MODSTREAM_POSTGRES__DSN", "")
        assert dsn.startswith("<secret:"), f"{name}: the DSN is not a Secret reference"


def test_each_service_connects_with_its_own_database_role(objects: list[Manifest]) -> None:
    """The worker, the review service, the online service and the migrator each read their
    DSN from a Secret of their own (logins in their own group roles, docs/security.md);
    retention runs as the migrator, which owns the partitions it drops."""
    secrets: dict[str, str] = {}
    for name, spec in _pod_specs(objects):
        container = _modstream(spec)
        if container is not None:
            secrets[name] = _environment(objects, container)["MODSTREAM_POSTGRES__DSN"]
    assert secrets == {
        "modstream-worker": "<secret:modstream-db-worker>",
        "modstream-review": "<secret:modstream-db-review>",
        "modstream-online": "<secret:modstream-db-online>",
        "modstream-migrate": "<secret:modstream-db-migrator>",
        "modstream-retention": "<secret:modstream-db-migrator>",
    }


def test_each_program_accepts_its_environment(
    objects: list[Manifest], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each modstream container's settings load from exactly the environment the manifests
    give it (Secrets stand in as a DSN), and every variable set on a container names a real
    setting of its program: a misspelt one would be ignored at run time."""
    dsn = "postgresql://someone@db.example/modstream"
    for name, spec in _pod_specs(objects):
        container = _modstream(spec)
        if container is None:
            continue
        settings_class = PROGRAMS[container["args"][0]]
        env = _environment(objects, container)
        for key in list(os.environ):
            if key.startswith("MODSTREAM_"):
                monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, dsn if value.startswith("<secret:") else value)
        settings_class()  # raises on a value its program refuses
        own = {item["name"] for item in container.get("env", [])}
        for key in own:
            assert _names_a_setting(settings_class, key), f"{name}: {key}"


def _names_a_setting(settings_class: type[BaseSettings], key: str) -> bool:
    section, _, field = key.removeprefix("MODSTREAM_").lower().partition("__")
    fields = settings_class.model_fields
    if not field:
        return section in fields
    annotation = fields[section].annotation if section in fields else None
    return annotation is not None and field in getattr(annotation, "model_fields", {})


def test_the_shared_config_names_only_real_settings(objects: list[Manifest]) -> None:
    """Every key of modstream-config is a setting of at least one program that reads it."""
    for key in _config(objects):
        assert any(_names_a_setting(cls, key) for cls in PROGRAMS.values()), key


# --- rules -----------------------------------------------------------------------------


def test_the_rules_configmap_is_the_shipped_set_mounted_for_hot_reload(
    objects: list[Manifest],
) -> None:
    """modstream-rules holds pipelines/rulesets/default.toml as it is, under a stable name;
    the worker and the online service mount it whole (a subPath mount is never updated) at
    the folder of rules.path, and watch it (reload interval above zero)."""
    rules = _one(objects, "ConfigMap", "modstream-rules")
    shipped = (project_root() / "pipelines" / "rulesets" / "default.toml").read_text()
    assert rules["data"] == {"rules.toml": shipped}
    path = Path(_config(objects)["MODSTREAM_RULES__PATH"])
    for name in ("modstream-worker", "modstream-online"):
        spec = _one(objects, "Deployment", name)["spec"]["template"]["spec"]
        container = _modstream(spec)
        assert container is not None
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = [
            m
            for m in container["volumeMounts"]
            if volumes[m["name"]].get("configMap", {}).get("name") == "modstream-rules"
        ]
        assert len(mounts) == 1, name
        assert "subPath" not in mounts[0]
        assert Path(mounts[0]["mountPath"]) == path.parent
        assert path.name == "rules.toml"
        env = _environment(objects, container)
        assert float(env.get("MODSTREAM_RULES__RELOAD_INTERVAL_S", 2.0)) > 0


def test_the_policy_configmap_is_mounted_beside_the_rules_for_hot_reload(
    objects: list[Manifest],
) -> None:
    """modstream-policy holds deploy/k8s/base/policy.toml under a stable name, a file the
    services load (as shipped, it changes no threshold); the worker and the online service mount
    it whole at the folder of policy_file.path, beside the rules, and watch it."""
    policy = _one(objects, "ConfigMap", "modstream-policy")
    shipped = (K8S / "base" / "policy.toml").read_text(encoding="utf-8")
    assert policy["data"] == {"policy.toml": shipped}
    assert parse_policy(shipped, PolicyThresholds()) == PolicyThresholds()
    config = _config(objects)
    path = Path(config["MODSTREAM_POLICY_FILE__PATH"])
    assert path.name == "policy.toml"
    assert path.parent.parent == Path(config["MODSTREAM_RULES__PATH"]).parent.parent
    for name in ("modstream-worker", "modstream-online"):
        spec = _one(objects, "Deployment", name)["spec"]["template"]["spec"]
        container = _modstream(spec)
        assert container is not None
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = [
            m
            for m in container["volumeMounts"]
            if volumes[m["name"]].get("configMap", {}).get("name") == "modstream-policy"
        ]
        assert len(mounts) == 1, name
        assert "subPath" not in mounts[0]
        assert mounts[0].get("readOnly") is True
        assert Path(mounts[0]["mountPath"]) == path.parent
        env = _environment(objects, container)
        assert float(env.get("MODSTREAM_POLICY_FILE__RELOAD_INTERVAL_S", 2.0)) > 0


# --- Triton ----------------------------------------------------------------------------


def _triton(objects: list[Manifest]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = _one(objects, "Deployment", "triton")["spec"]["template"]["spec"]
    (server,) = [c for c in spec["containers"] if c["name"] == "triton"]
    return spec, server


def test_triton_serves_the_repository_its_init_step_pulls(objects: list[Manifest]) -> None:
    """An init container writes the model repository into the volume Triton serves read-only
    (--model-repository, the pull's ``current`` in it), and Triton is probed on its ready and
    live endpoints."""
    spec, server = _triton(objects)
    (repository,) = [
        a.split("=", 1)[1] for a in server["args"] if a.startswith("--model-repository=")
    ]
    (served,) = [
        m for m in server["volumeMounts"] if repository.startswith(m["mountPath"].rstrip("/") + "/")
    ]
    assert served.get("readOnly") is True
    (pull,) = spec["initContainers"]
    written = {m["name"]: m for m in pull["volumeMounts"]}
    assert written[served["name"]].get("readOnly") is not True
    assert server["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert server["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"


def test_the_init_step_is_modstream_models_pull_into_what_triton_serves(
    objects: list[Manifest],
) -> None:
    """``models-pull`` runs ``modstream models pull`` from the service image into the served
    volume; Triton reads the pull's ``current`` link there; the location and version come from
    ConfigMap modstream-models, the object-store keys from an optional Secret (never a value);
    the variables it sets are settings ``modstream models pull`` reads."""
    spec, server = _triton(objects)
    (pull,) = spec["initContainers"]
    assert pull["image"].startswith("modstream:")
    assert pull["args"][:3] == ["models", "pull", "$(MODELS_LOCATION)"]
    into = next(a.split("=", 1)[1] for a in pull["args"] if a.startswith("--into="))
    assert f"--model-repository={into}/current" in server["args"]
    assert "--version=$(MODELS_VERSION)" in pull["args"]
    config = _models_config(objects)["data"]
    assert config["MODELS_LOCATION"].startswith("s3://")
    assert "MODELS_VERSION" in config
    for item in pull["env"]:
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["optional"]) == ("modstream-object-store", True)
    keys = [k for k in config if k.startswith("MODSTREAM_")] + [
        i["name"] for i in pull["env"] if i["name"].startswith("MODSTREAM_")
    ]
    assert keys
    for key in keys:
        assert _names_a_setting(ModelStoreSettings, key), key


def _models_config(objects: list[Manifest]) -> Manifest:
    """The ConfigMap the model pull reads (its generated, hash-suffixed name)."""
    spec, _ = _triton(objects)
    (pull,) = spec["initContainers"]
    (source,) = pull["envFrom"]
    return _one(objects, "ConfigMap", source["configMapRef"]["name"])


def test_the_model_version_is_pinned_in_a_generated_configmap(objects: list[Manifest]) -> None:
    """Every Triton pod, one the HPA adds included, pulls the same named version: MODELS_VERSION
    is a version name (never empty: not whatever LATEST names when the pod starts), and the
    ConfigMap is generated with a content hash in its name, so a new version is a new pod
    template, that is a rollout."""
    config = _models_config(objects)
    assert version_name(config["data"]["MODELS_VERSION"])
    name = config["metadata"]["name"]
    assert name.startswith("modstream-models-")
    assert name != "modstream-models"


def _overlay_over(tmp_path: Path, overlay: str, version: str) -> Path:
    """A kustomization in ``tmp_path`` over ``overlay`` that sets MODELS_VERSION, as a
    release's overlay does (kustomize wants the path relative)."""
    base = os.path.relpath(K8S / "overlays" / overlay, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [base],
                "configMapGenerator": [
                    {
                        "name": "modstream-models",
                        "behavior": "merge",
                        "literals": [f"MODELS_VERSION={version}"],
                    }
                ],
            }
        )
    )
    return tmp_path


def test_a_new_model_version_rolls_triton_out(overlay: str, tmp_path: Path) -> None:
    """An overlay that changes MODELS_VERSION renders a differently named ConfigMap, and the
    Triton pod template points at it: applying it replaces the pods, version by version."""
    objects = render_directory(_overlay_over(tmp_path, overlay, "2027.01.0"))
    config = _models_config(objects)
    assert config["data"]["MODELS_VERSION"] == "2027.01.0"
    assert config["metadata"]["name"] != _models_config(render(overlay))["metadata"]["name"]


@pytest.mark.parametrize("version", ["", "$(LATEST)"])
def test_an_unpinned_model_version_is_refused_at_render_time(
    overlay: str, tmp_path: Path, version: str
) -> None:
    """A rendering whose model pull gets an empty (or malformed) version is refused, naming
    the ConfigMap; ``modstream models pull`` refuses an empty ``--version`` as well."""
    with pytest.raises(UnpinnedModelVersion, match=r"modstream-models-.*MODELS_VERSION"):
        render_directory(_overlay_over(tmp_path, overlay, version))


def test_clients_reach_every_triton_pod_through_a_headless_service(
    objects: list[Manifest],
) -> None:
    """The worker and the online service get ``triton.grpc_dns`` (no single URL): a Service
    without a cluster IP, selecting the Triton pods, on the port that targets their gRPC
    port, so the name resolves to every ready pod and each client keeps a channel per pod."""
    _, server = _triton(objects)
    for name in ("modstream-worker", "modstream-online"):
        container = _modstream(_one(objects, "Deployment", name)["spec"]["template"]["spec"])
        assert container is not None
        env = _environment(objects, container)
        assert "MODSTREAM_TRITON__GRPC_URL" not in env, name
        assert "MODSTREAM_TRITON__GRPC_URLS" not in env, name
        host, _, port = env["MODSTREAM_TRITON__GRPC_DNS"].partition(":")
        service = _one(objects, "Service", host)
        assert service["spec"]["clusterIP"] == "None"
        assert not service["spec"].get("publishNotReadyAddresses", False)
        labels = _one(objects, "Deployment", "triton")["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items()
        (service_port,) = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
        grpc_ports = {p["name"]: p["containerPort"] for p in server["ports"]}
        assert service_port["targetPort"] in ("grpc", grpc_ports["grpc"])


CLUSTER_DNS_TTL_S = 5.0
"""How long CoreDNS's kubernetes plugin lets an answer be cached (its default ``ttl``)."""


def test_a_leaving_triton_pod_serves_until_every_client_has_looked_again(
    objects: list[Manifest],
) -> None:
    """Triton's preStop pause outlasts a client's lookup interval plus the cluster DNS's TTL,
    so every client has dropped the pod before it stops taking calls; the grace period
    outlasts the pause and Triton's own exit timeout, so nothing is cut short."""
    pod, server = _triton(objects)
    command = server["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pause_s = float(command[1])
    env = _config(objects)
    refresh_s = float(
        env.get("MODSTREAM_TRITON__DNS_REFRESH_S", WorkerSettings().triton.dns_refresh_s)
    )
    assert pause_s > refresh_s + CLUSTER_DNS_TTL_S
    (exit_timeout,) = [a for a in server["args"] if a.startswith("--exit-timeout-secs=")]
    exit_s = float(exit_timeout.split("=", 1)[1])
    assert pod["terminationGracePeriodSeconds"] > pause_s + exit_s


def test_only_the_gpu_overlay_serves_the_gpu_configs(overlay: str, objects: list[Manifest]) -> None:
    """gpu: Triton runs with ``--model-config-name=gpu`` (each model's configs/gpu.pbtxt, which
    the repository ships for every model it names); cpu: the default config.pbtxt."""
    _, server = _triton(objects)
    configs = [a for a in server["args"] if a.startswith("--model-config-name")]
    if overlay == "gpu":
        assert configs == ["--model-config-name=gpu"]
        assert list((project_root() / "model_repository").glob("*/configs/gpu.pbtxt"))
    else:
        assert configs == []


def test_only_the_gpu_overlay_asks_for_a_gpu(overlay: str, objects: list[Manifest]) -> None:
    """gpu: one nvidia.com/gpu requested and limited per Triton replica; cpu: none anywhere."""
    _, server = _triton(objects)
    resources = server["resources"]
    if overlay == "gpu":
        assert resources["limits"]["nvidia.com/gpu"] == 1
        assert resources["requests"]["nvidia.com/gpu"] == 1
    else:
        assert "nvidia.com/gpu" not in yaml.safe_dump_all(objects)


# --- network ---------------------------------------------------------------------------

_PUBLIC = {"modstream-review": {18090}, "modstream-online": {18070, 18072}}
"""The pods and ports anyone outside the namespace may reach."""
_METRICS = {"modstream-worker": 18080, "modstream-online": 18071, "triton": 8002}


def test_only_review_and_online_are_reachable_from_outside_the_namespace(
    objects: list[Manifest],
) -> None:
    """Ingress is denied by default; a rule open to other namespaces (no ``from``, or a
    namespace selector or address block) reaches only the review and online service ports,
    or a metrics port from the monitoring namespace alone; every pod is covered."""
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    default = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(default) == 1
    assert default[0]["spec"]["policyTypes"] == ["Ingress"]
    assert not default[0]["spec"].get("ingress")
    for policy in policies:
        target = policy["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
        for rule in policy["spec"].get("ingress", []):
            ports = {p["port"] for p in rule.get("ports", [])}
            assert ports, f"{policy['metadata']['name']}: a rule open on every port"
            peers = rule.get("from")
            if peers is None:  # anyone, anywhere
                assert ports <= _PUBLIC.get(target, set()), policy["metadata"]["name"]
                continue
            for peer in peers:
                if "ipBlock" in peer:
                    raise AssertionError(f"{policy['metadata']['name']}: an address block")
                if "namespaceSelector" in peer:
                    assert peer["namespaceSelector"] == {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                    assert ports == {_METRICS[target]}, policy["metadata"]["name"]
    for name in ("modstream-worker", "modstream-review", "modstream-online", "triton"):
        labels = _one(objects, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == name
    assert set(_PUBLIC) | set(_METRICS) >= {
        p["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
        for p in policies
    } - {None}


# --- autoscaling -----------------------------------------------------------------------


def test_keda_scales_the_worker_on_lag_never_past_the_partition_count(
    objects: list[Manifest],
) -> None:
    """The ScaledObject targets the worker Deployment (which leaves replicas to it), reads the
    lag of the same group, topic and brokers the workers use, never asks for more replicas
    than the input topic has partitions, and never adds idle consumers."""
    scaled = _one(objects, "ScaledObject", "modstream-worker")
    deployment, _ = _worker(objects)
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]
    config = _config(objects)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["topic"] == config["MODSTREAM_KAFKA__INPUT_TOPIC"]
    assert meta["consumerGroup"] == config["MODSTREAM_KAFKA__GROUP_ID"]
    assert meta["bootstrapServers"] == config["MODSTREAM_KAFKA__BOOTSTRAP_SERVERS"]
    assert meta["allowIdleConsumers"] == "false"
    partitions = int(scaled["metadata"]["annotations"]["modstream.io/input-topic-partitions"])
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    assert scaled["spec"]["maxReplicaCount"] <= partitions
    assert int(meta["lagThreshold"]) > 0


def test_the_lag_threshold_is_the_one_the_readme_derives(
    overlay: str, objects: list[Manifest]
) -> None:
    """Each overlay's lagThreshold is the figure deploy/k8s/README.md derives from a measured
    per-worker rate (its table names the overlay, the rate and the threshold)."""
    scaled = _one(objects, "ScaledObject", "modstream-worker")
    threshold = int(scaled["spec"]["triggers"][0]["metadata"]["lagThreshold"])
    readme = (K8S / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith(f"| `{overlay}` |"))
    assert f"{threshold:,}" in row, row


def test_triton_scales_on_the_adapters_queue_time_metric(objects: list[Manifest]) -> None:
    """The HPA targets the Triton Deployment (which leaves replicas to it) with the per-pod
    metric the prometheus-adapter rule names."""
    hpa = _one(objects, "HorizontalPodAutoscaler", "triton")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "triton"
    assert "replicas" not in _one(objects, "Deployment", "triton")["spec"]
    adapter = yaml.safe_load(
        (K8S / "base" / "monitoring" / "prometheus-adapter-rules.yaml").read_text()
    )
    names = {rule["name"]["as"] for rule in adapter["rules"]}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] in names
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def test_the_vendored_schemas_are_the_recorded_files() -> None:
    """Every file under deploy/schemas matches its line in SHA256SUMS, and every schema the
    validation reads is listed there: a schema edited by hand fails here."""
    import hashlib

    from tests.k8s_manifests import SCHEMAS

    recorded = {}
    for line in (SCHEMAS / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        recorded[name] = digest
    present = {
        str(p.relative_to(SCHEMAS))
        for p in SCHEMAS.rglob("*")
        if p.is_file() and p.name not in ("SHA256SUMS", "README.md")
    }
    assert present == set(recorded)
    for name, digest in recorded.items():
        assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == digest, name


def test_tenant_folders_are_mounted_where_the_config_points(objects: list[Manifest]) -> None:
    """The worker and the online service mount the optional tenant rule and policy ConfigMaps
    at the folders modstream-config names, so tenants need no new manifests."""
    (config,) = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "modstream-config"
    ]
    folders = {
        config["data"]["MODSTREAM_RULES__TENANTS_DIR"]: "modstream-tenant-rules",
        config["data"]["MODSTREAM_POLICY_FILE__TENANTS_DIR"]: "modstream-tenant-policies",
    }
    for name in ("modstream-worker", "modstream-online"):
        (deployment,) = [
            o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name
        ]
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for c in pod["containers"] for m in c["volumeMounts"]}
        for folder, config_map in folders.items():
            mount = mounts[folder]
            assert mount["readOnly"] is True
            source = volumes[mount["name"]]["configMap"]
            assert source == {"name": config_map, "optional": True}, name
