"""Triton repository checks and server environment (stack.triton)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.settings import project_root
from stack.errors import NoModelsError
from stack.settings import StackSettings
from stack.triton import TritonDistribution, TritonServer, model_names, triton_environment

FIXTURE_REPOSITORY = project_root() / "tests" / "fixtures" / "model_repository"


def test_model_names_lists_folders_with_config(tmp_path: Path) -> None:
    """Only sub-folders holding config.pbtxt count as models; a missing folder has none."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.pbtxt").write_text("", encoding="utf-8")
    (tmp_path / "b").mkdir()
    assert model_names(tmp_path) == ["a"]
    assert model_names(tmp_path / "missing") == []
    assert model_names(FIXTURE_REPOSITORY) == ["moderation"]


def test_empty_repository_is_refused(tmp_path: Path) -> None:
    """check() raises NoModelsError naming the env override when the repository is empty."""
    server = TritonServer(StackSettings(state_dir=tmp_path, model_repository=tmp_path / "repo"))
    with pytest.raises(NoModelsError, match="MODSTREAM_STACK__MODEL_REPOSITORY"):
        server.check()


def test_environment_puts_venv_and_libraries_first(tmp_path: Path) -> None:
    """PATH starts with <prefix>/bin; LD_LIBRARY_PATH holds the wheel libs, LIBDIR, then the old."""
    dist = TritonDistribution(tmp_path / "site" / "pytriton")
    env = triton_environment(
        dist,
        {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/old", "PYTHONHOME": "/x"},
        tmp_path / "venv",
        "/py/lib",
    )
    assert env["PATH"].split(":") == [str(tmp_path / "venv" / "bin"), "/usr/bin"]
    assert env["LD_LIBRARY_PATH"].split(":") == [
        str(tmp_path / "site" / "nvidia_pytriton.libs"),
        "/py/lib",
        "/old",
    ]
    assert "PYTHONHOME" not in env


def test_command_uses_settings_ports_and_loads_every_model(tmp_path: Path) -> None:
    """The server command carries the configured ports, repository and explicit load of all."""
    settings = StackSettings(
        state_dir=tmp_path,
        model_repository=FIXTURE_REPOSITORY,
        triton_http_port=28100,
        triton_grpc_port=28101,
        triton_metrics_port=28102,
    )
    argv, env = TritonServer(settings).command()
    assert "--http-port=28100" in argv
    assert "--grpc-port=28101" in argv
    assert "--metrics-port=28102" in argv
    assert "--model-control-mode=explicit" in argv
    assert "--load-model=*" in argv
    assert f"--model-repository={FIXTURE_REPOSITORY}" in argv
    assert f"--backend-directory={tmp_path / 'triton' / 'backends'}" in argv
    assert env is not None
    assert "nvidia_pytriton.libs" in env["LD_LIBRARY_PATH"]


def test_relative_repository_falls_back_to_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative model_repository missing from the working folder resolves from the project."""
    monkeypatch.chdir(tmp_path)
    server = TritonServer(
        StackSettings(state_dir=tmp_path, model_repository=Path("tests/fixtures/model_repository"))
    )
    assert server.model_repository == FIXTURE_REPOSITORY
    server.check()  # finds the fixture model, so no NoModelsError


def test_a_server_on_another_repository_is_outdated(tmp_path: Path) -> None:
    """``up`` replaces a running Triton whose --model-repository differs from the settings (so a
    stack left serving the test fixture is switched to the real models), and keeps one that
    matches."""
    import subprocess
    import sys

    served = tmp_path / "served"
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", f"--model-repository={served}"]
    )
    try:
        same = TritonServer(StackSettings(state_dir=tmp_path, model_repository=served))
        other = TritonServer(StackSettings(state_dir=tmp_path, model_repository=tmp_path / "x"))
        assert not same.is_outdated(process.pid)
        assert other.is_outdated(process.pid)
    finally:
        process.kill()
        process.wait()


def test_the_server_binds_the_loopback_address_its_settings_name(tmp_path: Path) -> None:
    """With ``triton_host`` set, every listener binds that address and clients are pointed
    at it; several servers can then share one port number on different addresses."""
    settings = StackSettings(
        state_dir=tmp_path, model_repository=FIXTURE_REPOSITORY, triton_host="127.0.0.3"
    )
    server = TritonServer(settings)
    argv, _ = server.command()
    for listener in ("http", "grpc", "metrics"):
        assert f"--{listener}-address=127.0.0.3" in argv
    assert server.endpoint == f"127.0.0.3:{settings.triton_grpc_port}"
    assert server.http_url.startswith("http://127.0.0.3:")
    assert server.host == "127.0.0.3"


@pytest.mark.parametrize("host", ["10.0.0.7", "localhost", "::1", ""])
def test_a_host_that_is_not_an_ipv4_loopback_address_is_refused(host: str) -> None:
    """The local stack binds loopback addresses only: anything else is a settings error."""
    with pytest.raises(ValueError, match="triton_host"):
        StackSettings(triton_host=host)
