"""The one translation of :class:`~common.settings.KafkaSettings` into aiokafka client arguments.

Every Kafka client of every program (the worker's consumer and producers, the review service's
decisions producer, the stack's admin calls, the demo and the benchmark) is built with
``AIOKafkaX(**kafka_client_kwargs(kafka), ...)`` or, when it already names its
``bootstrap_servers``, with ``**kafka_security_kwargs(kafka)``, so a managed Kafka (TLS, mTLS,
SASL PLAIN/SCRAM, OAUTHBEARER) is configured once, in the settings, for all of them.

The returned mapping holds the SASL password in clear (aiokafka wants a ``str``): it is handed
straight to a constructor, and its ``repr`` masks the secret should it ever be printed.
aiokafka itself is imported only when a token provider is loaded (the review service imports
it lazily).
"""

from __future__ import annotations

import importlib
import ssl
from typing import TYPE_CHECKING, Any

from common.errors import CommonError
from common.settings import KafkaSettings

if TYPE_CHECKING:
    from aiokafka.abc import AbstractTokenProvider

__all__ = [
    "ClientKwargs",
    "KafkaClientConfigError",
    "build_ssl_context",
    "kafka_client_kwargs",
    "kafka_security_kwargs",
    "load_token_provider",
]

_SECRET_KEYS = frozenset({"sasl_plain_password"})
_MASK = "**********"


class KafkaClientConfigError(CommonError):
    """The Kafka security settings are valid but cannot be used (unreadable key, bad import)."""


class ClientKwargs(dict[str, Any]):
    """Keyword arguments for an aiokafka client whose ``repr`` never shows the SASL password."""

    def __repr__(self) -> str:
        shown = {k: (_MASK if k in _SECRET_KEYS else v) for k, v in self.items()}
        return f"ClientKwargs({shown!r})"

    __str__ = __repr__


def build_ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """A client TLS context: brokers verified against ``ssl_cafile`` (or the system's CAs),
    the host name checked unless ``ssl_check_hostname`` is off, and the client certificate of
    ``ssl_certfile``/``ssl_keyfile`` loaded for mTLS."""
    cafile = str(kafka.ssl_cafile) if kafka.ssl_cafile is not None else None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except (ssl.SSLError, OSError) as exc:
        raise KafkaClientConfigError(
            f"cannot load ssl_cafile {kafka.ssl_cafile}: {type(exc).__name__}"
        ) from exc
    context.check_hostname = kafka.ssl_check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if kafka.ssl_certfile is not None:
        password = kafka.ssl_key_password
        try:
            context.load_cert_chain(
                certfile=str(kafka.ssl_certfile),
                keyfile=str(kafka.ssl_keyfile) if kafka.ssl_keyfile is not None else None,
                password=password.get_secret_value() if password is not None else None,
            )
        except (ssl.SSLError, OSError) as exc:
            raise KafkaClientConfigError(
                f"cannot load the client certificate {kafka.ssl_certfile} "
                f"(key {kafka.ssl_keyfile or 'in the same file'}): {type(exc).__name__}; "
                "check that the key matches and ssl_key_password is right"
            ) from exc
    return context


def load_token_provider(import_path: str) -> AbstractTokenProvider:
    """The OAUTHBEARER token provider named ``"package.module:attribute"``.

    The attribute is either an ``AbstractTokenProvider`` instance or a subclass, which is
    instantiated without arguments (read its own configuration from the environment).
    """
    from aiokafka.abc import AbstractTokenProvider  # heavy: only when OAUTHBEARER is used

    module_name, _, attribute = import_path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise KafkaClientConfigError(
            f"sasl_oauth_token_provider {import_path!r}: cannot import {module_name!r} ({exc})"
        ) from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise KafkaClientConfigError(
            f"sasl_oauth_token_provider {import_path!r}: {module_name!r} has no {attribute!r}"
        )
    if isinstance(target, type) and issubclass(target, AbstractTokenProvider):
        try:
            return target()
        except Exception as exc:  # a third-party constructor: report whatever it raised
            raise KafkaClientConfigError(
                f"sasl_oauth_token_provider {import_path!r}: constructing it failed "
                f"({type(exc).__name__})"
            ) from exc
    if isinstance(target, AbstractTokenProvider):
        return target
    raise KafkaClientConfigError(
        f"sasl_oauth_token_provider {import_path!r} is neither an aiokafka "
        "AbstractTokenProvider subclass nor an instance of one"
    )


def kafka_security_kwargs(kafka: KafkaSettings) -> ClientKwargs:
    """``security_protocol`` plus the TLS context and SASL arguments ``kafka`` asks for."""
    kwargs = ClientKwargs(security_protocol=kafka.security_protocol)
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        kwargs["ssl_context"] = build_ssl_context(kafka)
    if kafka.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = kafka.sasl_mechanism
        kwargs["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            provider = kafka.sasl_oauth_token_provider
            if provider is None:  # the settings' validator forbids it; kept for the type checker
                raise KafkaClientConfigError("OAUTHBEARER needs sasl_oauth_token_provider")
            kwargs["sasl_oauth_token_provider"] = load_token_provider(provider)
        else:
            password = kafka.sasl_password
            kwargs["sasl_plain_username"] = kafka.sasl_username
            kwargs["sasl_plain_password"] = (
                password.get_secret_value() if password is not None else None
            )
    return kwargs


def kafka_client_kwargs(target: KafkaSettings | str) -> ClientKwargs:
    """``bootstrap_servers`` and the security arguments; a bare address means PLAINTEXT."""
    if isinstance(target, str):
        return ClientKwargs(bootstrap_servers=target)
    kwargs = kafka_security_kwargs(target)
    kwargs["bootstrap_servers"] = target.bootstrap_servers
    return kwargs
