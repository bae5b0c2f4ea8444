"""The worker's Triton client over gRPC TLS, against a ``tritonserver`` of the test's own.

The server serves the fixture model repository on free ports with ``--grpc-use-ssl`` and a
certificate from a throw-away CA (``stack.certificates``); it is stopped when the module ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from common.settings import project_root
from engine.inference import InferenceUnavailable
from engine.settings import TritonSettings
from engine.triton import TritonModerationClient
from stack.certificates import ServerCertificate, ensure_server_certificate
from stack.settings import StackSettings
from stack.triton import TritonServer
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

REPOSITORY = project_root() / "tests" / "fixtures" / "model_repository"


class TlsTriton(TritonServer):
    """The stack's Triton with gRPC served over TLS only."""

    def __init__(self, settings: StackSettings, certificate: ServerCertificate) -> None:
        super().__init__(settings)
        self.certificate = certificate

    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        argv, env = super().command()
        c = self.certificate
        tls = [
            "--grpc-use-ssl=true",
            f"--grpc-server-cert={c.cert}",
            f"--grpc-server-key={c.key}",
            f"--grpc-root-cert={c.ca_cert}",
        ]
        return [*argv, *tls], env


@pytest.fixture(scope="module")
def server() -> Iterator[TlsTriton]:
    """A TLS tritonserver over the fixture repository, stopped and removed afterwards."""
    state_dir = Path(tempfile.mkdtemp(prefix="modstream-tritontls-it-"))
    http, grpc, metrics = free_ports(3)
    certificate = ensure_server_certificate(state_dir / "tls", ["localhost", "127.0.0.1"])
    triton = TlsTriton(
        StackSettings(
            state_dir=state_dir,
            model_repository=REPOSITORY,
            triton_http_port=http,
            triton_grpc_port=grpc,
            triton_metrics_port=metrics,
        ),
        certificate,
    )
    try:
        triton.start()
        yield triton
    finally:
        triton.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def _settings(server: TlsTriton, **tls: object) -> TritonSettings:
    return TritonSettings.model_validate(
        {"grpc_url": server.endpoint, "ready_timeout_s": 3.0, "max_attempts": 1, **tls}
    )


async def test_tls_client_scores_texts(server: TlsTriton) -> None:
    """With ssl and the CA, the client verifies the server, waits ready and gets scores."""
    settings = _settings(server, ssl=True, root_certificates=server.certificate.ca_cert)
    async with TritonModerationClient(settings) as client:
        result = await client.infer(["hello there", "you are awful"])
    assert len(result.scores) == 2
    assert result.model_name == "moderation"


async def test_plaintext_client_cannot_talk_to_a_tls_server(server: TlsTriton) -> None:
    """Without ssl the client never becomes ready and inference is unavailable."""
    client = TritonModerationClient(_settings(server))
    await client.start(wait_ready=False)
    try:
        assert not await client.is_ready()
        with pytest.raises(InferenceUnavailable):
            await client.infer(["hello"])
    finally:
        await client.stop()


async def test_client_trusting_another_ca_is_refused(server: TlsTriton, tmp_path: Path) -> None:
    """A client whose root certificates did not sign the server's certificate cannot connect."""
    other = ensure_server_certificate(tmp_path / "other", ["localhost"])
    client = TritonModerationClient(_settings(server, ssl=True, root_certificates=other.ca_cert))
    await client.start(wait_ready=False)
    try:
        assert not await client.is_ready()
        with pytest.raises(InferenceUnavailable):
            await client.infer(["hello"])
    finally:
        await client.stop()
