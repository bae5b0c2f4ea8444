"""``modstream models push`` and ``modstream models pull``: the model repository in S3.

``push s3://bucket/prefix [--repository DIR] [--version V] [--no-latest]`` uploads a Triton
model repository (default: the checkout's ``model_repository/``) as one version with a manifest
of checksums; ``pull s3://bucket/prefix --into DIR [--version V] [--triton-url URL]`` makes
``DIR/current`` serve a version, atomically, and asks Triton to load it (see
``admin.model_store``). They sit beside ``models build`` and ``models eval`` in one command
group; these two are in the production image too (the Triton pods' init container runs pull).

Object storage is any S3 API (AWS, MinIO, Ceph, GCS's interoperability endpoint), reached with
boto3 from the ``object_store`` settings: ``MODSTREAM_OBJECT_STORE__ENDPOINT_URL`` (empty: AWS),
``..._REGION``, and ``..._ACCESS_KEY_ID`` / ``..._SECRET_ACCESS_KEY``; without keys, boto3's own
chain (``AWS_*`` variables, a web identity or instance role) supplies them. Exit codes: 0 done,
1 refused (a checksum, a manifest, Triton; what was served still is), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from admin.model_store import (
    CHUNK_BYTES,
    ModelStoreError,
    TritonRefused,
    parse_location,
    pull,
    push,
)
from common.commands import command_group
from common.logs import configure_logging, get_logger
from common.settings import Section, ServiceSettings, project_root

__all__ = ["ModelStoreSettings", "ObjectStoreSettings", "S3Store", "TritonHttpLoader", "register"]

_log = get_logger(__name__)
_LOAD_TIMEOUT_S = 600.0


class ObjectStoreSettings(Section):
    """Where the model repository's versions are kept (any S3 API)."""

    endpoint_url: str | None = None
    """``http://minio:9000`` and the like; ``None``: AWS S3 of ``region``."""
    region: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    """``path`` for servers without per-bucket host names (MinIO, most private endpoints)."""


class ModelStoreSettings(ServiceSettings):
    """Everything ``modstream models push / pull`` reads."""

    object_store: ObjectStoreSettings = ObjectStoreSettings()


class S3Store:
    """``admin.model_store.ObjectStore`` over boto3's S3 client; its errors become
    ``ModelStoreError`` here, where they enter."""

    def __init__(self, settings: ObjectStoreSettings) -> None:
        import boto3  # heavy, kept off the CLI path
        from botocore.config import Config

        key, secret = settings.access_key_id, settings.secret_access_key
        self._client: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=key.get_secret_value() if key else None,
            aws_secret_access_key=secret.get_secret_value() if secret else None,
            config=Config(
                s3={"addressing_style": settings.addressing_style},
                retries={"max_attempts": 5, "mode": "standard"},
            ),
        )

    @staticmethod
    def _missing(exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in {"404", "NoSuchKey", "NotFound"}

    def _fail(self, what: str, bucket: str, key: str, exc: Exception) -> ModelStoreError:
        if self._missing(exc):
            return ModelStoreError(f"{what}: no object s3://{bucket}/{key}")
        return ModelStoreError(f"{what} s3://{bucket}/{key}: {type(exc).__name__}: {exc}")

    def head(self, bucket: str, key: str) -> dict[str, str] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if self._missing(exc):
                return None
            raise self._fail("head", bucket, key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail("head", bucket, key, exc) from exc
        return {**answer.get("Metadata", {}), "size": str(answer["ContentLength"])}

    def put_file(self, bucket: str, key: str, path: Path, metadata: dict[str, str]) -> None:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.upload_file(str(path), bucket, key, ExtraArgs={"Metadata": metadata})
        except (ClientError, BotoCoreError, S3UploadFailedError) as exc:
            raise self._fail("upload", bucket, key, exc) from exc

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("upload", bucket, key, exc) from exc

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return b"".join(self.open(bucket, key))

    def open(self, bucket: str, key: str) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self._client.get_object(Bucket=bucket, Key=key)["Body"]
            yield from body.iter_chunks(CHUNK_BYTES)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("download", bucket, key, exc) from exc


class TritonHttpLoader:
    """Triton's ``/v2/repository/models/<model>/load|unload`` on its HTTP port."""

    def __init__(self, url: str) -> None:
        self._url = url.rstrip("/")

    def _post(self, model: str, action: str) -> None:
        import httpx

        try:
            answer = httpx.post(
                f"{self._url}/v2/repository/models/{model}/{action}", timeout=_LOAD_TIMEOUT_S
            )
        except httpx.HTTPError as exc:
            raise TritonRefused(f"{action} {model}: {type(exc).__name__}: {exc}") from exc
        if answer.status_code != 200:
            detail = answer.text.strip()[:300]
            raise TritonRefused(f"{action} {model}: HTTP {answer.status_code}: {detail}")

    def load(self, model: str) -> None:
        self._post(model, "load")

    def unload(self, model: str) -> None:
        self._post(model, "unload")


def register(subparsers: Any) -> None:
    actions = command_group(subparsers, "models", "build, evaluate, push or pull the models")
    push_parser = actions.add_parser(
        "push", help="upload a model repository to s3://bucket/prefix as one version"
    )
    push_parser.add_argument("location", help="s3://bucket/prefix")
    push_parser.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="the Triton model repository to upload (default: the project's model_repository/)",
    )
    push_parser.add_argument(
        "--version", default="", help="the version's name (default: its content digest)"
    )
    push_parser.add_argument(
        "--no-latest", action="store_true", help="do not make it the version LATEST names"
    )
    push_parser.set_defaults(handler=_push)
    pull_parser = actions.add_parser(
        "pull", help="serve a version of s3://bucket/prefix from DIR/current, atomically"
    )
    pull_parser.add_argument("location", help="s3://bucket/prefix")
    pull_parser.add_argument(
        "--into", type=Path, required=True, help="the folder holding current and versions/"
    )
    pull_parser.add_argument(
        "--version",
        default=None,
        help="the version to serve (default: the one LATEST names); an empty value is refused",
    )
    pull_parser.add_argument(
        "--triton-url",
        default=None,
        help="Triton's HTTP address (http://127.0.0.1:8000): load the pulled models there",
    )
    pull_parser.set_defaults(handler=_pull)


def _log_event(event: str, **fields: object) -> None:
    _log.info(event, **fields)


def _push(args: argparse.Namespace) -> int:
    settings = ModelStoreSettings()
    configure_logging()
    try:
        location = parse_location(args.location)
        repository = args.repository or project_root() / "model_repository"
        manifest = push(
            S3Store(settings.object_store),
            repository,
            location,
            version=args.version,
            latest=not args.no_latest,
            log=_log_event,
        )
    except ModelStoreError as exc:
        print(f"modstream models push: {exc}", file=sys.stderr)
        return 1
    print(f"{location}/{manifest.version}")
    return 0


def _pull(args: argparse.Namespace) -> int:
    if args.version == "":
        # An empty --version=$(MODELS_VERSION) is a version nobody pinned, not a wish for
        # LATEST: a pod must not serve whatever was pushed last.
        print(
            "modstream models pull: --version is empty: name the version to serve, or leave "
            "the option out to serve the one LATEST names",
            file=sys.stderr,
        )
        return 2
    settings = ModelStoreSettings()
    configure_logging()
    try:
        location = parse_location(args.location)
        report = pull(
            S3Store(settings.object_store),
            location,
            args.into,
            version=args.version or "",
            triton=TritonHttpLoader(args.triton_url) if args.triton_url else None,
            log=_log_event,
        )
    except ModelStoreError as exc:
        _log.error("models_pull_failed", error_type=type(exc).__name__, detail=str(exc))
        print(f"modstream models pull: {exc}", file=sys.stderr)
        return 1
    how = "already on disk" if report.reused else f"{report.downloaded} files downloaded"
    print(f"{report.served} -> versions/{report.version} ({how})")
    return 0
