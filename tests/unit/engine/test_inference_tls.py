"""Tests for the Triton gRPC TLS option: settings validation and the client's TLS arguments."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pydantic
import pytest

from engine.settings import TritonSettings
from engine.triton import TritonModerationClient, client_options
from worker.settings import WorkerSettings


class FakeFactory:
    """Records the keyword arguments the client is built with; returns a do-nothing client."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **options: Any) -> FakeFactory:
        self.calls.append(options)
        return self

    async def close(self) -> None:
        return None


@pytest.fixture
def pem_files(tmp_path: Path) -> dict[str, Path]:
    """Three placeholder PEM files: a CA bundle, a client key and its chain."""
    paths = {name: tmp_path / f"{name}.pem" for name in ("ca", "key", "chain")}
    for path in paths.values():
        path.write_text("-----BEGIN PLACEHOLDER-----\n", encoding="utf-8")
    return paths


async def test_plaintext_by_default() -> None:
    """Without ssl the client gets no TLS arguments (an insecure channel, as before)."""
    factory = FakeFactory()
    client = TritonModerationClient(TritonSettings(), client_factory=factory)
    await client.start(wait_ready=False)
    await client.stop()
    assert len(factory.calls) == 1
    assert factory.calls[0]["url"] == "127.0.0.1:18001"
    assert "ssl" not in factory.calls[0]


async def test_ssl_passes_every_file_to_the_client(pem_files: dict[str, Path]) -> None:
    """ssl with a CA and a client key pair reaches InferenceServerClient as file paths."""
    settings = TritonSettings(
        ssl=True,
        root_certificates=pem_files["ca"],
        private_key=pem_files["key"],
        certificate_chain=pem_files["chain"],
    )
    factory = FakeFactory()
    client = TritonModerationClient(settings, client_factory=factory)
    await client.start(wait_ready=False)
    await client.stop()
    call = factory.calls[0]
    assert call["ssl"] is True
    assert call["root_certificates"] == str(pem_files["ca"])
    assert call["private_key"] == str(pem_files["key"])
    assert call["certificate_chain"] == str(pem_files["chain"])


def test_ssl_without_files_uses_system_roots() -> None:
    """ssl alone asks for TLS and leaves the roots to gRPC's defaults."""
    options = client_options(TritonSettings(ssl=True))
    assert options["ssl"] is True
    assert options["root_certificates"] is None
    assert options["private_key"] is None


def test_missing_file_is_refused_at_load(tmp_path: Path) -> None:
    """A certificate path that does not exist fails settings validation, naming the field."""
    with pytest.raises(pydantic.ValidationError, match="root_certificates"):
        TritonSettings(ssl=True, root_certificates=tmp_path / "absent.pem")


def test_files_without_ssl_are_refused(pem_files: dict[str, Path]) -> None:
    """Certificate files with ssl off are a misconfiguration, not a silent plaintext channel."""
    with pytest.raises(pydantic.ValidationError, match="ssl is false"):
        TritonSettings(root_certificates=pem_files["ca"])


def test_half_a_client_key_pair_is_refused(pem_files: dict[str, Path]) -> None:
    """A client key without its certificate chain (or the reverse) is refused."""
    with pytest.raises(pydantic.ValidationError, match="go together"):
        TritonSettings(ssl=True, private_key=pem_files["key"])
    with pytest.raises(pydantic.ValidationError, match="go together"):
        TritonSettings(ssl=True, certificate_chain=pem_files["chain"])


def test_environment_sets_tls(monkeypatch: pytest.MonkeyPatch, pem_files: dict[str, Path]) -> None:
    """MODSTREAM_TRITON__SSL and __ROOT_CERTIFICATES configure TLS from the environment."""
    for name in list(os.environ):
        if name.startswith("MODSTREAM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MODSTREAM_TRITON__SSL", "true")
    monkeypatch.setenv("MODSTREAM_TRITON__ROOT_CERTIFICATES", str(pem_files["ca"]))
    triton = WorkerSettings().triton
    assert triton.ssl is True
    assert triton.root_certificates == pem_files["ca"]


def test_a_replica_found_by_dns_is_verified_against_the_dns_name() -> None:
    """With ``grpc_dns`` a replica is dialled by address, so TLS checks the certificate
    against the Service's name (``grpc.ssl_target_name_override``); without TLS or without
    DNS no override is set."""
    settings = TritonSettings(ssl=True, grpc_dns="triton-replicas:8001")
    options = client_options(settings, "10.0.0.5:8001")
    assert options["url"] == "10.0.0.5:8001"
    assert ("grpc.ssl_target_name_override", "triton-replicas") in options["channel_args"]
    for plain in (TritonSettings(grpc_dns="triton-replicas:8001"), TritonSettings(ssl=True)):
        names = [name for name, _ in client_options(plain, "10.0.0.5:8001")["channel_args"]]
        assert "grpc.ssl_target_name_override" not in names
