"""A start-up check that the Kafka credentials and TLS trust work, before any client retries.

aiokafka reports a refused login or an untrusted broker certificate only as "Unable to bootstrap"
(and a running client retries for ever). :func:`verify_kafka_access` opens one connection per
bootstrap address with the configured security and turns those two failures into typed errors,
so a program can log one clear event and exit instead. A broker that is merely unreachable is not
an error here: the clients' own retry handles that, as without security.
"""

from __future__ import annotations

import ssl
from typing import ClassVar

from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    AuthenticationMethodNotSupported,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from common.errors import CommonError
from common.kafka_client import kafka_security_kwargs
from common.settings import KafkaSettings

__all__ = [
    "KafkaAccessError",
    "KafkaAuthenticationError",
    "KafkaTlsError",
    "bootstrap_addresses",
    "verify_kafka_access",
]

_AUTH_ERRORS = (
    AuthenticationFailedError,
    AuthenticationMethodNotSupported,
    IllegalSaslStateError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)


class KafkaAccessError(CommonError):
    """The brokers answered but refused this client; retrying cannot help (fatal at start-up)."""

    event: ClassVar[str] = "kafka_access_failed"

    def __init__(self, message: str, *, broker: str, reason: str) -> None:
        super().__init__(message)
        self.broker = broker
        self.reason = reason


class KafkaAuthenticationError(KafkaAccessError):
    """SASL authentication was refused (wrong user or password, mechanism not enabled)."""

    event: ClassVar[str] = "kafka_authentication_failed"


class KafkaTlsError(KafkaAccessError):
    """The TLS handshake failed (broker certificate not trusted, host name mismatch)."""

    event: ClassVar[str] = "kafka_tls_failed"


def bootstrap_addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``host:port`` entries of a comma-separated bootstrap list (``[v6]:port`` allowed)."""
    addresses: list[tuple[str, int]] = []
    for entry in bootstrap_servers.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit():
            host, port = entry, "9092"
        addresses.append((host.strip("[]"), int(port)))
    return addresses


async def verify_kafka_access(kafka: KafkaSettings, *, timeout_ms: int = 10_000) -> None:
    """Log in to the first reachable bootstrap broker once; raise a :class:`KafkaAccessError`
    when it refuses the credentials or the TLS handshake fails. PLAINTEXT needs no check."""
    if kafka.security_protocol == "PLAINTEXT":
        return
    security = kafka_security_kwargs(kafka)
    mechanism = kafka.sasl_mechanism or "-"
    for host, port in bootstrap_addresses(kafka.bootstrap_servers):
        broker = f"{host}:{port}"
        try:
            conn = await create_conn(
                host,
                port,
                client_id="modstream-access-check",
                request_timeout_ms=timeout_ms,
                **security,
            )
        except _AUTH_ERRORS as exc:
            raise KafkaAuthenticationError(
                f"Kafka broker {broker} refused {kafka.security_protocol}/{mechanism} "
                f"authentication for user {kafka.sasl_username!r}: {type(exc).__name__}",
                broker=broker,
                reason=type(exc).__name__,
            ) from exc
        except ssl.SSLError as exc:
            raise KafkaTlsError(
                f"TLS handshake with Kafka broker {broker} failed: {exc.reason or exc}",
                broker=broker,
                reason=type(exc).__name__,
            ) from exc
        except (KafkaError, OSError, TimeoutError):
            continue  # unreachable or not ready: the clients' own retries deal with it
        conn.close()
        return
