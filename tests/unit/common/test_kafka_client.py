"""KafkaSettings security validation and its one mapping to aiokafka client arguments."""

from __future__ import annotations

import socket
import ssl
import sys
import types
from typing import Any

import pytest
from aiokafka.abc import AbstractTokenProvider
from pydantic import SecretStr, ValidationError

from common.kafka_access import bootstrap_addresses, verify_kafka_access
from common.kafka_client import (
    KafkaClientConfigError,
    kafka_client_kwargs,
    kafka_security_kwargs,
    load_token_provider,
)
from common.settings import KafkaSettings, ServiceSettings
from stack.certificates import (
    CertificateAuthority,
    IssuedCertificate,
    issue_certificate,
    make_authority,
)

_PASSWORD = "s3cret-Pa55word"
_KEY_PASSWORD = "k3y-Pa55word"


class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    async def token(self) -> str:
        return "token"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, IssuedCertificate]:
    """A CA and a client certificate whose key is encrypted with ``_KEY_PASSWORD``."""
    directory = tmp_path_factory.mktemp("pki")
    authority = make_authority(directory)
    client = issue_certificate(authority, directory, "client", key_password=_KEY_PASSWORD)
    return authority, client


@pytest.fixture
def oauth_module(monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable module ``fake_oauth`` holding a provider class, an instance and junk."""
    module = types.ModuleType("fake_oauth")
    module.Provider = _TokenProvider  # type: ignore[attr-defined]
    module.instance = _TokenProvider()  # type: ignore[attr-defined]
    module.junk = 42  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_oauth", module)
    return "fake_oauth"


def _sasl(protocol: str, mechanism: str, **extra: Any) -> KafkaSettings:
    return KafkaSettings(
        bootstrap_servers="broker-1:9096,broker-2:9096",
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username="svc-moderation",
        sasl_password=SecretStr(_PASSWORD),
        **extra,
    )


def test_default_is_plaintext_without_tls_or_sasl() -> None:
    """Default settings map to a bare PLAINTEXT client: no TLS context, no SASL arguments."""
    kwargs = kafka_client_kwargs(KafkaSettings())
    assert dict(kwargs) == {
        "bootstrap_servers": "127.0.0.1:19092",
        "security_protocol": "PLAINTEXT",
    }


def test_bare_address_means_plaintext() -> None:
    """A bootstrap string (the stack's own plaintext listener) maps to bootstrap_servers only."""
    assert dict(kafka_client_kwargs("127.0.0.1:1")) == {"bootstrap_servers": "127.0.0.1:1"}


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_password_mechanisms(protocol: str, mechanism: str) -> None:
    """PLAIN/SCRAM over either SASL protocol pass mechanism, user and password; TLS iff SSL."""
    kwargs = kafka_client_kwargs(_sasl(protocol, mechanism))
    assert kwargs["bootstrap_servers"] == "broker-1:9096,broker-2:9096"
    assert kwargs["security_protocol"] == protocol
    assert kwargs["sasl_mechanism"] == mechanism
    assert kwargs["sasl_plain_username"] == "svc-moderation"
    assert kwargs["sasl_plain_password"] == _PASSWORD
    assert "sasl_oauth_token_provider" not in kwargs
    assert ("ssl_context" in kwargs) is (protocol == "SASL_SSL")


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("attribute", ["Provider", "instance"])
def test_oauthbearer_loads_the_token_provider(
    oauth_module: str, protocol: str, attribute: str
) -> None:
    """OAUTHBEARER passes a provider loaded from the import path (class or instance), no
    username or password."""
    settings = KafkaSettings(
        security_protocol=protocol,
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=f"{oauth_module}:{attribute}",
    )
    kwargs = kafka_security_kwargs(settings)
    assert kwargs["sasl_mechanism"] == "OAUTHBEARER"
    assert isinstance(kwargs["sasl_oauth_token_provider"], _TokenProvider)
    assert "sasl_plain_password" not in kwargs
    assert "sasl_plain_username" not in kwargs
    assert ("ssl_context" in kwargs) is (protocol == "SASL_SSL")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_module_xyz:Provider", "cannot import"),
        ("fake_oauth:missing", "has no 'missing'"),
        ("fake_oauth:junk", "neither an aiokafka AbstractTokenProvider"),
    ],
)
def test_token_provider_errors_are_clear(oauth_module: str, path: str, message: str) -> None:
    """A token provider path that cannot be loaded raises KafkaClientConfigError saying why."""
    with pytest.raises(KafkaClientConfigError, match=message):
        load_token_provider(path)


def test_ssl_with_ca_verifies_broker_and_host(
    pki: tuple[CertificateAuthority, IssuedCertificate],
) -> None:
    """SSL builds a context that requires a broker certificate and checks the host name."""
    authority, _ = pki
    kwargs = kafka_security_kwargs(
        KafkaSettings(security_protocol="SSL", ssl_cafile=authority.cert)
    )
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert "sasl_mechanism" not in kwargs
    assert any("modstream-local-ca" in str(ca) for ca in context.get_ca_certs())


def test_ssl_check_hostname_can_be_turned_off(
    pki: tuple[CertificateAuthority, IssuedCertificate],
) -> None:
    """ssl_check_hostname=False disables only the name check; the certificate is still verified."""
    authority, _ = pki
    settings = KafkaSettings(
        security_protocol="SSL", ssl_cafile=authority.cert, ssl_check_hostname=False
    )
    context = kafka_security_kwargs(settings)["ssl_context"]
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_mtls_loads_an_encrypted_client_key(
    pki: tuple[CertificateAuthority, IssuedCertificate],
) -> None:
    """mTLS with an encrypted key loads when ssl_key_password is right."""
    authority, client = pki
    settings = KafkaSettings(
        security_protocol="SSL",
        ssl_cafile=authority.cert,
        ssl_certfile=client.cert,
        ssl_keyfile=client.key,
        ssl_key_password=SecretStr(_KEY_PASSWORD),
    )
    assert isinstance(kafka_security_kwargs(settings)["ssl_context"], ssl.SSLContext)


def test_mtls_wrong_key_password_is_a_typed_error_without_the_secret(
    pki: tuple[CertificateAuthority, IssuedCertificate],
) -> None:
    """A wrong key password raises KafkaClientConfigError whose message omits the password."""
    authority, client = pki
    settings = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password=SecretStr(_PASSWORD),
        ssl_cafile=authority.cert,
        ssl_certfile=client.cert,
        ssl_keyfile=client.key,
        ssl_key_password=SecretStr("not-the-key-password"),
    )
    with pytest.raises(KafkaClientConfigError, match="client certificate") as caught:
        kafka_security_kwargs(settings)
    assert "not-the-key-password" not in str(caught.value)
    assert _PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"security_protocol": "SASL_SSL"}, "SASL_SSL needs sasl_mechanism"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"},
            "SCRAM-SHA-512 needs sasl_username",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "PLAIN",
                "sasl_username": "u",
            },
            "PLAIN needs sasl_password",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
            "OAUTHBEARER needs sasl_oauth_token_provider",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": "not an import path",
            },
            "package.module:attribute",
        ),
        ({"sasl_mechanism": "PLAIN"}, "sasl_mechanism is set but security_protocol PLAINTEXT"),
        ({"ssl_cafile": "/etc/hostname"}, "ssl_cafile is set but security_protocol PLAINTEXT"),
        (
            {"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"},
            "ssl_cafile /nonexistent/ca.pem does not exist",
        ),
        (
            {"security_protocol": "SSL", "ssl_keyfile": "/etc/hostname"},
            "ssl_keyfile is set without ssl_certfile",
        ),
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
    ],
)
def test_inconsistent_security_settings_are_rejected(fields: dict[str, Any], message: str) -> None:
    """Each inconsistent combination fails at load time with a message naming the problem."""
    with pytest.raises(ValidationError, match=message):
        KafkaSettings(**fields)


def test_secrets_never_in_reprs_or_validation_errors() -> None:
    """The SASL password shows in no repr of the settings or kwargs, nor in a validation error."""
    settings = _sasl("SASL_SSL", "SCRAM-SHA-512")
    kwargs = kafka_client_kwargs(settings)
    assert kwargs["sasl_plain_password"] == _PASSWORD
    for text in (repr(settings), str(settings), repr(kwargs), str(kwargs), f"{kwargs}"):
        assert _PASSWORD not in text
    with pytest.raises(ValidationError) as caught:
        KafkaSettings(
            security_protocol="SASL_SSL",
            sasl_password=SecretStr(_PASSWORD),
            sasl_username="u",
        )
    assert _PASSWORD not in str(caught.value)
    with pytest.raises(ValidationError) as raw:
        KafkaSettings.model_validate(
            {"sasl_password": "pw7", "security_protocol": "SASL_SSL", "sasl_username": "u"}
        )
    assert "pw7" not in str(raw.value)


def test_security_settings_load_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, pki: tuple[CertificateAuthority, IssuedCertificate]
) -> None:
    """MODSTREAM_KAFKA__* variables configure SASL_SSL SCRAM with a CA file."""
    authority, _ = pki
    env = {
        "MODSTREAM_KAFKA__BOOTSTRAP_SERVERS": "kafka.example:9096",
        "MODSTREAM_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "MODSTREAM_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "MODSTREAM_KAFKA__SASL_USERNAME": "svc",
        "MODSTREAM_KAFKA__SASL_PASSWORD": _PASSWORD,
        "MODSTREAM_KAFKA__SSL_CAFILE": str(authority.cert),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    kafka = ServiceSettings().kafka
    assert kafka.security_protocol == "SASL_SSL"
    assert kafka.sasl_password is not None
    assert kafka.sasl_password.get_secret_value() == _PASSWORD
    assert kafka.ssl_cafile == authority.cert
    assert _PASSWORD not in repr(ServiceSettings())


def test_bootstrap_addresses_parse_lists_and_ipv6() -> None:
    """Comma-separated host:port entries (and [v6]:port) become (host, port) pairs."""
    assert bootstrap_addresses(" a:1, [::1]:9093 ,b") == [("a", 1), ("::1", 9093), ("b", 9092)]


async def test_access_check_skips_plaintext_and_tolerates_unreachable_brokers() -> None:
    """The start-up check does nothing for PLAINTEXT and does not fail on an unreachable broker
    (that is the clients' retry's job), only on refused credentials or TLS."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    await verify_kafka_access(KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}"))
    settings = _sasl("SASL_PLAINTEXT", "SCRAM-SHA-512").model_copy(
        update={"bootstrap_servers": f"127.0.0.1:{port}"}
    )
    await verify_kafka_access(settings, timeout_ms=1_000)
