"""Throw-away certificates for the local stack's TLS (PostgreSQL, Kafka, Triton tests).

Made with the ``openssl`` command line (the ``cryptography`` package is not a dependency): a
private CA (``ca.pem``/``ca.key``) signs leaf certificates whose subject alternative names list
the host names and IP addresses clients connect to, so clients verify the chain *and* the host
(``sslmode=verify-full``, Kafka's hostname check). Keys are RSA 2048 in PKCS#8 PEM (what Kafka's
``PEM`` key store reads), written with mode 0600; an optional key password encrypts a key (it
reaches openssl through the environment, never the command line). Leaves are valid as server
and as client certificates. Nothing here is fit for anything but a local development stack: the
CA key sits next to the certificates.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stack.errors import CertificateError, ToolMissingError

__all__ = [
    "CertificateAuthority",
    "IssuedCertificate",
    "ServerCertificate",
    "ensure_server_certificate",
    "issue_certificate",
    "make_authority",
    "subject_alt_names",
]

_DAYS = "825"
_TIMEOUT_S = 60.0
_PASSWORD_ENV = "MODSTREAM_CERT_KEY_PASSWORD"  # noqa: S105 (a variable name, not a secret)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """The CA's certificate (the clients' trust anchor) and its signing key."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    """A leaf certificate and its private key, both PEM."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    """Paths of the CA certificate (what clients trust) and the server's certificate and key."""

    ca_cert: Path
    cert: Path
    key: Path


def subject_alt_names(hosts: Sequence[str]) -> str:
    """``DNS:name`` / ``IP:address`` entries for openssl's ``subjectAltName`` extension."""
    if not hosts:
        raise CertificateError("a certificate needs at least one host name or address")
    entries: list[str] = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            entries.append(f"DNS:{host}")
        else:
            entries.append(f"IP:{host}")
    return ",".join(entries)


def _openssl(args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise ToolMissingError("openssl not found on PATH; install it (apt-get install openssl)")
    result = subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    if result.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")


def _new_key(path: Path, password: str | None = None) -> None:
    args = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(path)]
    env: dict[str, str] = {}
    if password is not None:
        args += ["-aes256", "-pass", f"env:{_PASSWORD_ENV}"]
        env[_PASSWORD_ENV] = password
    _openssl(args, env)
    path.chmod(0o600)


def make_authority(
    directory: Path, common_name: str = "modstream-local-ca"
) -> CertificateAuthority:
    """A new self-signed CA in ``directory`` (``ca.pem``, ``ca.key``)."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = CertificateAuthority(cert=directory / "ca.pem", key=directory / "ca.key")
    _new_key(authority.key)
    _openssl(
        [
            "req", "-x509", "-new", "-key", str(authority.key), "-out", str(authority.cert),
            "-days", _DAYS, "-subj", f"/CN={common_name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ]
    )  # fmt: skip
    return authority


def issue_certificate(
    authority: CertificateAuthority,
    directory: Path,
    name: str,
    *,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    key_password: str | None = None,
) -> IssuedCertificate:
    """``<name>.pem``/``<name>.key`` signed by ``authority``, valid for ``hosts`` (IPs or DNS
    names) as a server and as a client; the key is encrypted when ``key_password`` is given."""
    alt_names = subject_alt_names(hosts)
    directory.mkdir(parents=True, exist_ok=True)
    issued = IssuedCertificate(cert=directory / f"{name}.pem", key=directory / f"{name}.key")
    request = directory / f"{name}.csr"
    extensions = directory / f"{name}.ext"
    _new_key(issued.key, key_password)
    key_pass = ["-passin", f"env:{_PASSWORD_ENV}"] if key_password is not None else []
    env = {_PASSWORD_ENV: key_password} if key_password is not None else None
    _openssl(
        ["req", "-new", "-key", str(issued.key), *key_pass, "-out", str(request),
         "-subj", f"/CN={hosts[0]}"],
        env,
    )  # fmt: skip
    extensions.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        f"subjectAltName={alt_names}\n",
        encoding="ascii",
    )
    _openssl(
        ["x509", "-req", "-in", str(request), "-CA", str(authority.cert),
         "-CAkey", str(authority.key), "-CAcreateserial", "-days", _DAYS,
         "-extfile", str(extensions), "-out", str(issued.cert)]
    )  # fmt: skip
    request.unlink()
    extensions.unlink()
    return issued


def ensure_server_certificate(
    folder: Path, hosts: Sequence[str], name: str = "server"
) -> ServerCertificate:
    """The CA and ``<name>.pem``/``<name>.key`` in ``folder``, created when missing.

    Existing files are kept as they are; delete the folder to issue new ones.
    """
    subject_alt_names(hosts)  # refuse an empty host list before touching the folder
    authority = CertificateAuthority(cert=folder / "ca.pem", key=folder / "ca.key")
    if not (authority.cert.is_file() and authority.key.is_file()):
        authority = make_authority(folder)
    leaf = IssuedCertificate(cert=folder / f"{name}.pem", key=folder / f"{name}.key")
    if not (leaf.cert.is_file() and leaf.key.is_file()):
        leaf = issue_certificate(authority, folder, name, hosts=hosts)
    return ServerCertificate(authority.cert, leaf.cert, leaf.key)
