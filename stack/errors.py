"""Typed failures of the local service stack (``modstream stack``)."""

from __future__ import annotations

__all__ = [
    "CertificateError",
    "NoModelsError",
    "PortInUseError",
    "ServiceStartError",
    "StackError",
    "ToolMissingError",
]


class StackError(Exception):
    """Base class: the local stack could not do what was asked."""


class ToolMissingError(StackError):
    """A program the stack needs (java, mvn, initdb, tritonserver) is not installed."""


class PortInUseError(StackError):
    """A port the stack wants is already held by a process it did not start."""


class ServiceStartError(StackError):
    """A service did not start or did not become healthy in time; see its log file."""


class NoModelsError(StackError):
    """The model repository handed to Triton holds no model (no ``*/config.pbtxt``)."""


class CertificateError(StackError):
    """The local stack could not make its throw-away TLS certificates (openssl failed)."""
