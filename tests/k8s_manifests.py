"""Render ``deploy/k8s`` overlays and validate the objects offline against vendored schemas.

Rendering is ``kubectl kustomize`` (kubectl carries kustomize), or, on a machine without
kubectl, the ``kustomize`` binary that ``scripts/bootstrap.sh`` installs into the virtual
environment. A rendering whose Triton pods would pull no pinned model version (``MODELS_VERSION``
empty or not a version name) is refused with :class:`UnpinnedModelVersion`: every pod, the
ones an autoscaler adds included, must serve the version the release names.

Validation uses the schemas under ``deploy/schemas`` (their sources are stated in
its README): the Kubernetes ones are the strict variant (an unknown field is an error, as with
``kubectl apply --validate=strict``); KEDA's CRD schema is made strict the same way, except
where the CRD itself preserves unknown fields.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource

from admin.model_store import ModelStoreError, version_name
from common.settings import project_root

__all__ = [
    "K8S",
    "SCHEMAS",
    "Manifest",
    "UnpinnedModelVersion",
    "render",
    "render_directory",
    "schema_errors",
]

K8S = project_root() / "deploy" / "k8s"
SCHEMAS = project_root() / "deploy" / "schemas"
KUBERNETES_SCHEMAS = SCHEMAS / "kubernetes-v1.33.0-strict"
KEDA_SCHEMAS = SCHEMAS / "keda-v2.20.2"

Manifest = dict[str, Any]
"""One rendered Kubernetes object."""


def _renderer(directory: Path) -> list[str]:
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        return [kubectl, "kustomize", str(directory)]
    kustomize = Path(sys.prefix) / "bin" / "kustomize"
    if kustomize.is_file():
        return [str(kustomize), "build", str(directory)]
    raise RuntimeError(
        "neither kubectl nor kustomize is installed: scripts/bootstrap.sh installs kustomize"
    )


@cache
def _rendered(directory: Path) -> str:
    done = subprocess.run(
        _renderer(directory), capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"kustomize failed for {directory}: {done.stderr.strip()}")
    return done.stdout


class UnpinnedModelVersion(ValueError):
    """A rendered ConfigMap gives the model pull an empty or malformed ``MODELS_VERSION``."""


def _check_pinned(objects: list[Manifest]) -> None:
    for o in objects:
        if o.get("kind") != "ConfigMap" or "MODELS_VERSION" not in o.get("data", {}):
            continue
        try:
            version_name(str(o["data"]["MODELS_VERSION"]))
        except ModelStoreError as exc:
            raise UnpinnedModelVersion(
                f"ConfigMap {o['metadata']['name']}: MODELS_VERSION must pin a version ({exc})"
            ) from exc


def render_directory(directory: Path) -> list[Manifest]:
    """Every object the kustomization in ``directory`` renders (a fresh copy each call);
    :class:`UnpinnedModelVersion` when the model pull would not get a pinned version."""
    objects = [doc for doc in yaml.safe_load_all(_rendered(directory)) if doc]
    _check_pinned(objects)
    return objects


def render(overlay: str) -> list[Manifest]:
    """Every object ``deploy/k8s/overlays/<overlay>`` renders (see :func:`render_directory`)."""
    return render_directory(K8S / "overlays" / overlay)


def _kubernetes_file(api_version: str, kind: str) -> Path:
    group, _, version = api_version.rpartition("/")
    parts = [kind.lower()]
    if group:
        parts.append(group.split(".")[0])
    parts.append(version)
    return KUBERNETES_SCHEMAS / ("-".join(parts) + ".json")


@cache
def _kubernetes_registry() -> Registry:
    definitions = json.loads((KUBERNETES_SCHEMAS / "_definitions.json").read_text())
    return Resource.from_contents(definitions) @ Registry()


def _strict(schema: Any) -> Any:
    """An OpenAPI v3 CRD schema where objects with declared properties refuse other keys."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(KEDA_SCHEMAS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group = crd["spec"]["group"]
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            found[(f"{group}/{version['name']}", kind)] = _strict(schema)
    return found


def schema_errors(manifest: Manifest) -> list[str]:
    """What the vendored schema of the object's kind refuses (empty when it is valid)."""
    api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    crd = _crd_schemas().get((api_version, kind))
    if crd is not None:
        validator: Any = jsonschema.Draft7Validator(crd)
    else:
        path = _kubernetes_file(api_version, kind)
        if not path.is_file():
            return [f"no vendored schema for {api_version} {kind} ({path.name})"]
        schema = json.loads(path.read_text())
        validator = jsonschema.Draft202012Validator(schema, registry=_kubernetes_registry())
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '.'}: {error.message}"
        for error in validator.iter_errors(manifest)
    ]
