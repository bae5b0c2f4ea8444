"""A throw-away certificate authority and server certificates for the local stack's TLS.

Made with the ``openssl`` command line (the ``cryptography`` package is not a dependency):
one CA per folder, and a server certificate signed by it whose subject alternative names cover
the given host names and IP addresses, so clients can verify the full chain *and* the host
(``sslmode=verify-full``). Private keys are written with mode 0600. Nothing here is fit for
anything but a local development cluster: the CA key sits next to the certificates.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stack.errors import CertificateError, ToolMissingError

__all__ = ["ServerCertificate", "ensure_server_certificate", "subject_alt_names"]

_TOOL_TIMEOUT_S = 60.0
_VALID_DAYS = 825
_KEY_ARGS = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    """Paths of the CA certificate (what clients trust) and the server's certificate and key."""

    ca_cert: Path
    cert: Path
    key: Path


def subject_alt_names(hosts: Sequence[str]) -> str:
    """``DNS:name`` / ``IP:address`` entries for openssl's ``subjectAltName`` extension."""
    if not hosts:
        raise CertificateError("a server certificate needs at least one host name or address")
    entries: list[str] = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            entries.append(f"DNS:{host}")
        else:
            entries.append(f"IP:{host}")
    return ",".join(entries)


def _openssl(*args: str) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise ToolMissingError("openssl not found; install it (apt-get install openssl)")
    result = subprocess.run(
        [tool, *args], capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")


def _make_ca(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "ca.crt", folder / "ca.key"
    if cert.is_file() and key.is_file():
        return cert, key
    _openssl(
        "req", "-x509", *_KEY_ARGS, "-keyout", str(key), "-out", str(cert),
        "-days", str(_VALID_DAYS), "-subj", "/CN=modstream local stack CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    key.chmod(0o600)
    return cert, key


def ensure_server_certificate(
    folder: Path, hosts: Sequence[str], name: str = "server"
) -> ServerCertificate:
    """The CA and ``<name>.crt``/``<name>.key`` in ``folder``, created when missing.

    An existing certificate is kept as it is; delete the folder to issue new ones.
    """
    folder.mkdir(parents=True, exist_ok=True)
    alt_names = subject_alt_names(hosts)
    ca_cert, ca_key = _make_ca(folder)
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    if cert.is_file() and key.is_file():
        return ServerCertificate(ca_cert, cert, key)
    request = folder / f"{name}.csr"
    extensions = folder / f"{name}.ext"
    extensions.write_text(
        "basicConstraints = critical,CA:FALSE\n"
        "keyUsage = critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
        f"subjectAltName = {alt_names}\n",
        encoding="utf-8",
    )
    _openssl(
        "req", "-new", *_KEY_ARGS, "-keyout", str(key), "-out", str(request),
        "-subj", f"/CN={hosts[0]}",
    )  # fmt: skip
    key.chmod(0o600)
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca_cert), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", str(_VALID_DAYS),
        "-extfile", str(extensions),
    )  # fmt: skip
    for leftover in (request, extensions):
        os.unlink(leftover)
    return ServerCertificate(ca_cert, cert, key)
