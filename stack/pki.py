"""Throw-away certificates for the local stack's TLS listeners, made with the ``openssl`` CLI.

A private CA (``ca.pem``/``ca.key``) signs leaf certificates whose subjectAltName lists the
loopback names clients connect to. Keys are RSA 2048 in PKCS#8 PEM (what Kafka's ``PEM`` key
store reads), written with mode 0600; an optional key password encrypts the key (it reaches
openssl through the environment, never the command line). For development and tests only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stack.errors import ServiceStartError, ToolMissingError

__all__ = ["CertificateAuthority", "IssuedCertificate", "issue_certificate", "make_authority"]

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


def _openssl(args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise ToolMissingError("openssl not found on PATH (needed for the TLS listener)")
    result = subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    if result.returncode != 0:
        raise ServiceStartError(f"openssl {args[0]} failed:\n{result.stderr[-2000:]}")


def _private(path: Path) -> None:
    path.chmod(0o600)


def _new_key(path: Path, password: str | None = None) -> None:
    args = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(path)]
    env: dict[str, str] = {}
    if password is not None:
        args += ["-aes256", "-pass", f"env:{_PASSWORD_ENV}"]
        env[_PASSWORD_ENV] = password
    _openssl(args, env)
    _private(path)


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
    directory.mkdir(parents=True, exist_ok=True)
    issued = IssuedCertificate(cert=directory / f"{name}.pem", key=directory / f"{name}.key")
    request = directory / f"{name}.csr"
    extensions = directory / f"{name}.ext"
    _new_key(issued.key, key_password)
    key_pass = ["-passin", f"env:{_PASSWORD_ENV}"] if key_password is not None else []
    env = {_PASSWORD_ENV: key_password} if key_password is not None else None
    _openssl(
        ["req", "-new", "-key", str(issued.key), *key_pass, "-out", str(request),
         "-subj", f"/CN={hosts[0] if hosts else name}"],
        env,
    )  # fmt: skip
    alt_names = ",".join(
        f"IP:{host}" if host.replace(".", "").isdigit() or ":" in host else f"DNS:{host}"
        for host in hosts
    )
    extensions.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        + (f"subjectAltName={alt_names}\n" if alt_names else ""),
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
