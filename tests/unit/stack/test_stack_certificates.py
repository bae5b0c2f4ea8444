"""The local stack's throw-away CA and server certificates (stack.certificates)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from stack.certificates import ensure_server_certificate, subject_alt_names
from stack.errors import CertificateError


def test_alt_names_tell_addresses_from_names() -> None:
    """IP addresses become IP: entries, everything else DNS: entries."""
    assert subject_alt_names(["localhost", "127.0.0.1", "::1"]) == (
        "DNS:localhost,IP:127.0.0.1,IP:::1"
    )


def test_alt_names_need_a_host() -> None:
    """A certificate for no host at all is refused with a typed error."""
    with pytest.raises(CertificateError):
        subject_alt_names([])


def test_certificate_verifies_against_its_ca_with_private_keys(tmp_path: Path) -> None:
    """The server certificate chains to the CA, names the hosts, and keys are mode 0600."""
    made = ensure_server_certificate(tmp_path, ["localhost", "127.0.0.1"])
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(made.ca_cert), str(made.cert)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    alt = subprocess.run(
        ["openssl", "x509", "-in", str(made.cert), "-noout", "-ext", "subjectAltName"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "DNS:localhost" in alt
    assert "IP Address:127.0.0.1" in alt
    for key in (made.key, tmp_path / "ca.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_existing_certificate_is_kept(tmp_path: Path) -> None:
    """A second call reuses the files instead of issuing a new certificate."""
    first = ensure_server_certificate(tmp_path, ["localhost"])
    before = first.cert.read_bytes()
    second = ensure_server_certificate(tmp_path, ["localhost"])
    assert second == first
    assert second.cert.read_bytes() == before
