"""``modstream models push / pull`` against a real S3-API server and a real Triton.

The S3 server is moto's (``moto_server``, a package of the dev extra) in its own process on a
free port; the commands run as the CLI runs them (``python -m modstream.cli``), boto3 speaking
HTTP to it. A private ``tritonserver`` serves ``<into>/current`` with explicit model control.
Two repository versions of the fixture model tell what is served: ``a`` is the fixture as it is
(versions 1 and 2, the latest 2 by default: ``dumb`` offensive), ``b`` serves version 1 alone
(``scum`` offensive) and carries a 4 MiB weights file, so a pull can be stopped half-way.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from common.settings import project_root
from pipelines.scores import MODEL_INPUT
from stack import TritonServer, private_triton
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

FIXTURE = project_root() / "tests" / "fixtures" / "model_repository"
BUCKET = "modstream-models"
LOCATION = f"s3://{BUCKET}/moderation/releases"
_OFFENSIVE = 1


@pytest.fixture(scope="module")
def s3_port() -> Iterator[int]:
    """moto's S3 server on a free loopback port, with the bucket created."""
    (port,) = free_ports(1)
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        _s3(port).create_bucket(Bucket=BUCKET)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _s3(port: int) -> object:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def _env(port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MODSTREAM_OBJECT_STORE__ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "MODSTREAM_OBJECT_STORE__REGION": "us-east-1",
            "MODSTREAM_OBJECT_STORE__ACCESS_KEY_ID": "test",
            "MODSTREAM_OBJECT_STORE__SECRET_ACCESS_KEY": "test",
            "MODSTREAM_OBJECT_STORE__ADDRESSING_STYLE": "path",
        }
    )
    return env


def _models(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modstream.cli", "models", *args],
        env=_env(port),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def versions(s3_port: int, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Versions ``a`` and ``b`` pushed (``b`` last, so it is what LATEST names)."""
    root = tmp_path_factory.mktemp("repositories")
    a = root / "a"
    shutil.copytree(FIXTURE, a, symlinks=True)
    b = root / "b"
    shutil.copytree(FIXTURE, b, symlinks=True)
    config = b / "moderation" / "config.pbtxt"
    config.write_text(
        config.read_text().replace("versions: [ 1, 2 ]", "versions: [ 1 ]"), encoding="utf-8"
    )
    (b / "moderation" / "1" / "weights.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    for name, folder in (("a", a), ("b", b)):
        done = _models(s3_port, "push", LOCATION, "--repository", str(folder), "--version", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{LOCATION}/{name}"
    return {"a": str(a), "b": str(b)}


@pytest.fixture(scope="module")
def served(
    s3_port: int, versions: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, TritonServer]]:
    """Version ``a`` pulled into a folder, and a private Triton serving its ``current``."""
    into = tmp_path_factory.mktemp("served")
    done = _models(s3_port, "pull", LOCATION, "--into", str(into), "--version", "a")
    assert done.returncode == 0, done.stderr
    with private_triton(into / "current", tmp_path_factory.mktemp("triton"), free_ports(3)) as t:
        yield into, t


def _toxicity(server: TritonServer, texts: list[str]) -> list[int]:
    client = grpcclient.InferenceServerClient(server.endpoint)
    try:
        data = np.array([[t.encode()] for t in texts], dtype=object)
        tensor = grpcclient.InferInput(MODEL_INPUT, list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        rows = client.infer("moderation", [tensor]).as_numpy("TOXICITY")
    finally:
        client.close()
    return [int(r.argmax()) for r in rows]


def _serving(into: Path) -> str:
    return Path(os.readlink(into / "current")).name


def _back_to_a(port: int, into: Path, server: TritonServer) -> None:
    done = _models(port, "pull", LOCATION, "--into", str(into), "--version", "a",
                   "--triton-url", server.http_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _serving(into) == "a"
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [_OFFENSIVE, 0]


def test_a_pull_serves_the_version_and_triton_loads_the_next_one(
    s3_port: int, served: tuple[Path, TritonServer]
) -> None:
    """``current`` names ``versions/a`` with the fixture's link kept as a link; a pull of
    LATEST (``b``) with Triton's URL swaps ``current`` and Triton answers as ``b`` (version 1
    alone); pulling ``a`` again rolls back without downloading anything."""
    into, server = served
    _back_to_a(s3_port, into, server)
    link = into / "current" / "moderation" / "2" / "model.py"
    assert link.is_symlink()
    assert os.readlink(link) == "../1/model.py"
    done = _models(s3_port, "pull", LOCATION, "--into", str(into), "--triton-url", server.http_url)
    assert done.returncode == 0, done.stderr
    assert _serving(into) == "b"
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [0, _OFFENSIVE]
    back = _models(s3_port, "pull", LOCATION, "--into", str(into), "--version", "a",
                   "--triton-url", server.http_url)  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert "already on disk" in back.stdout
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [_OFFENSIVE, 0]
    assert sorted(p.name for p in (into / "versions").iterdir()) == ["a", "b"]


def test_a_corrupted_file_is_refused_by_its_checksum(
    s3_port: int, versions: dict[str, str], served: tuple[Path, TritonServer]
) -> None:
    """An object changed in the bucket after the push: the pull stops on its SHA-256, exits
    1 naming the file, leaves no partial folder, and ``a`` is still what is served."""
    into, server = served
    _back_to_a(s3_port, into, server)
    s3 = _s3(s3_port)
    key = "moderation/releases/b/repository/moderation/1/model.py"
    original = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[attr-defined]
    s3.put_object(Bucket=BUCKET, Key=key, Body=original.replace(b"scum", b"scam"))  # type: ignore[attr-defined]
    try:
        done = _models(s3_port, "pull", LOCATION, "--into", str(into), "--version", "b",
                       "--triton-url", server.http_url)  # fmt: skip
    finally:
        s3.put_object(Bucket=BUCKET, Key=key, Body=original)  # type: ignore[attr-defined]
    assert done.returncode == 1
    assert "moderation/1/model.py" in done.stderr
    assert "SHA-256" in done.stderr
    assert _serving(into) == "a"
    assert not list(into.glob(".partial-*"))
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [_OFFENSIVE, 0]


class StallingProxy:
    """A TCP proxy to the S3 server that stops passing the server's bytes on after
    ``after_bytes`` (all connections together): a download that hangs half-way."""

    def __init__(self, upstream: int, after_bytes: int) -> None:
        self._upstream = upstream
        self._left = after_bytes
        self._lock = threading.Lock()
        self.stalled = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._upstream))
            self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:
                    with self._lock:
                        allowed = max(0, min(len(data), self._left))
                        self._left -= allowed
                    if allowed < len(data):
                        sink.sendall(data[:allowed])
                        self.stalled.set()
                        return  # hold the connection open, send nothing more
                sink.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


def test_an_interrupted_pull_leaves_the_old_repository_serving(
    s3_port: int, versions: dict[str, str], served: tuple[Path, TritonServer]
) -> None:
    """A pull of ``b`` killed (SIGKILL) while its download hangs half-way: ``current`` still
    names ``a`` and Triton answers as ``a``; what was written lies in a partial folder that is
    never served, and the next pull removes it and completes."""
    into, server = served
    _back_to_a(s3_port, into, server)
    proxy = StallingProxy(s3_port, after_bytes=1024 * 1024)
    try:
        pulling = subprocess.Popen(
            [sys.executable, "-m", "modstream.cli", "models", "pull", LOCATION,
             "--into", str(into), "--version", "b", "--triton-url", server.http_url],
            env=_env(proxy.port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert proxy.stalled.wait(120), "the pull never reached the stall"
            deadline = time.monotonic() + 30
            while not list(into.glob(".partial-b-*")) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pulling.poll() is None, "the pull ended before it was interrupted"
        finally:
            pulling.send_signal(signal.SIGKILL)
            pulling.wait(timeout=30)
    finally:
        proxy.close()
    assert pulling.returncode == -signal.SIGKILL
    (partial,) = into.glob(".partial-b-*")
    assert any(p.is_file() for p in partial.rglob("*"))
    assert _serving(into) == "a"
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [_OFFENSIVE, 0]
    done = _models(s3_port, "pull", LOCATION, "--into", str(into), "--version", "b",
                   "--triton-url", server.http_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not partial.exists()
    assert _serving(into) == "b"
    assert _toxicity(server, ["you are dumb", "you are scum"]) == [0, _OFFENSIVE]
