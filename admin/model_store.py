"""The model repository in object storage: push a version, pull one atomically, load it.

Layout under ``s3://bucket/prefix``::

    <prefix>/<version>/repository/<path>   every file of the Triton model repository
    <prefix>/<version>/manifest.json       path, size and SHA-256 of each file, and the links
    <prefix>/LATEST                        the version a pull without ``--version`` takes

:func:`push` uploads the files first (one already there with the same size and checksum is
skipped), then the manifest, then ``LATEST``: a version is complete before anything names it.
Its default name is the first 12 hex digits of the manifest's content digest, so pushing the
same repository twice is one version. A link inside the repository (the test fixture's
``2/model.py -> ../1/model.py``) is kept as a link; one leaving it is uploaded as the file it
names.

:func:`pull` serves a pulled version from ``<into>/current``, a link to ``<into>/versions/<v>``
(Triton's ``--model-repository=<into>/current``). It writes beside (``<into>/.partial-<v>-*``),
checks every file's size and SHA-256 against the manifest as it downloads, renames the checked
folder to ``versions/<v>`` and only then replaces the ``current`` link (one ``rename``, atomic):
a half-copied or corrupted repository is never what ``current`` names. A file whose checksum
differs stops the pull (:class:`ChecksumMismatch`) and leaves ``current`` as it was; so does a
pull killed half-way (its partial folder is removed by the next pull). With a Triton URL, the
pull then asks Triton to load every model of the new repository and unload the ones it no
longer has (explicit model control); if Triton refuses one, ``current`` goes back to the
previous version and its models are loaded again. The version pulled before stays on disk
(rollback: pull it again, nothing is downloaded); older ones are deleted.

The object store is any :class:`ObjectStore` (``admin.models_command`` makes the boto3 one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from admin.errors import AdminError

__all__ = [
    "CHUNK_BYTES",
    "ChecksumMismatch",
    "Location",
    "Manifest",
    "ManifestEntry",
    "ModelStoreError",
    "ObjectStore",
    "PullReport",
    "TritonLoader",
    "TritonRefused",
    "build_manifest",
    "parse_location",
    "pull",
    "push",
    "version_name",
]

CHUNK_BYTES = 1024 * 1024
FORMAT = 1
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SKIPPED = ("__pycache__", ".DS_Store")
_KEEP_VERSIONS = 2
"""The version served and the one before it (rollback without a download)."""


class ModelStoreError(AdminError):
    """A push or pull cannot go on; the served repository is left as it was."""


class ChecksumMismatch(ModelStoreError):
    """A pulled file's size or SHA-256 is not the manifest's: the version is refused."""


class TritonRefused(ModelStoreError):
    """Triton did not load a model of the pulled repository (the previous one serves again)."""


def version_name(text: str) -> str:
    """``text`` if it can name a version (a letter or digit, then up to 63 letters, digits,
    ``.``, ``_`` or ``-``); ``ModelStoreError`` saying so otherwise, the empty name included."""
    if not _VERSION.fullmatch(text):
        raise ModelStoreError(f"not a version name: {text!r} (letters, digits, '.', '_', '-')")
    return text


@dataclass(frozen=True, slots=True)
class Location:
    """``s3://bucket/prefix``: where versions of one model repository live."""

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def parse_location(url: str) -> Location:
    """``s3://bucket/prefix`` (the prefix may be empty or nested); anything else is an error."""
    if not url.startswith("s3://"):
        raise ModelStoreError(f"not an s3:// URL: {url!r}")
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        raise ModelStoreError(f"not a bucket name: {bucket!r}")
    return Location(bucket, prefix.strip("/"))


class ObjectStore(Protocol):
    """The few object-storage calls push and pull make (boto3's S3 client, wrapped)."""

    def head(self, bucket: str, key: str) -> dict[str, str] | None:
        """The object's metadata (with ``size``), or ``None`` when there is no such object."""

    def put_file(self, bucket: str, key: str, path: Path, metadata: dict[str, str]) -> None: ...

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None: ...

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """The object's content; ``ModelStoreError`` when there is none."""

    def open(self, bucket: str, key: str) -> Iterator[bytes]:
        """The object's content in chunks; ``ModelStoreError`` when there is none."""


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    path: str
    size: int = 0
    sha256: str = ""
    link: str | None = None
    """For a link: its target, relative to the link's folder."""


@dataclass(frozen=True, slots=True)
class Manifest:
    version: str
    entries: tuple[ManifestEntry, ...]
    created_at: str = ""

    @property
    def digest(self) -> str:
        """SHA-256 of the entries alone (not the version or the time): the content's name."""
        body = json.dumps([_entry_json(e) for e in self.entries], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    def to_json(self) -> bytes:
        doc = {
            "format": FORMAT,
            "version": self.version,
            "created_at": self.created_at,
            "digest": self.digest,
            "entries": [_entry_json(e) for e in self.entries],
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """The manifest of ``data``; every path is checked to stay inside the repository."""
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                raise ModelStoreError(f"manifest format {doc.get('format')!r} is not {FORMAT}")
            entries = tuple(
                ManifestEntry(
                    path=_safe_path(str(e["path"])),
                    size=int(e.get("size", 0)),
                    sha256=str(e.get("sha256", "")),
                    link=None if e.get("link") is None else str(e["link"]),
                )
                for e in doc["entries"]
            )
            manifest = cls(str(doc["version"]), entries, str(doc.get("created_at", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelStoreError(f"unreadable manifest: {exc}") from exc
        for entry in manifest.entries:
            if entry.link is not None:
                target = PurePosixPath(entry.path).parent / entry.link
                _safe_path(os.path.normpath(str(target)))
        if doc.get("digest") not in (None, manifest.digest):
            raise ModelStoreError("manifest digest does not match its entries")
        return manifest


def _entry_json(entry: ManifestEntry) -> dict[str, Any]:
    if entry.link is not None:
        return {"path": entry.path, "link": entry.link}
    return {"path": entry.path, "size": entry.size, "sha256": entry.sha256}


def _safe_path(path: str) -> str:
    """A relative POSIX path inside the repository (no ``..``, no absolute, no empty part)."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise ModelStoreError(f"unsafe path in manifest: {path!r}")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _walk(repository: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(repository, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
        for name in sorted(files):
            if name in _SKIPPED or name.startswith(".") or name.endswith(".pyc"):
                continue
            yield Path(root) / name
        for name in dirs:
            if (Path(root) / name).is_symlink():
                yield Path(root) / name


def build_manifest(repository: Path, version: str = "") -> tuple[Manifest, dict[str, Path]]:
    """The manifest of ``repository`` (``version`` empty: named by its digest) and the local
    file behind each uploaded path."""
    if not (repository.is_dir() and any(repository.glob("*/config.pbtxt"))):
        raise ModelStoreError(f"{repository} is not a model repository (no */config.pbtxt)")
    root = repository.resolve()
    entries: list[ManifestEntry] = []
    files: dict[str, Path] = {}
    for path in _walk(repository):
        relative = path.relative_to(repository).as_posix()
        if path.is_symlink():
            resolved = path.resolve()
            if resolved.is_relative_to(root) and resolved.exists():
                target = os.path.relpath(resolved, path.parent.resolve())
                entries.append(ManifestEntry(relative, link=Path(target).as_posix()))
                continue
            if resolved.is_dir():
                raise ModelStoreError(f"{relative} links to a folder outside the repository")
        if not path.is_file():
            raise ModelStoreError(f"{relative} is not a file")
        entries.append(ManifestEntry(relative, path.stat().st_size, _sha256(path)))
        files[relative] = path
    draft = Manifest("", tuple(entries), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    name = version_name(version or draft.digest[:12])
    return Manifest(name, draft.entries, draft.created_at), files


def push(
    store: ObjectStore,
    repository: Path,
    location: Location,
    *,
    version: str = "",
    latest: bool = True,
    log: Callable[..., None] = lambda event, **fields: None,
) -> Manifest:
    """Upload ``repository`` as a version under ``location`` (see the module docstring);
    ``latest``: name it in ``LATEST`` once it is complete."""
    manifest, files = build_manifest(repository, version)
    uploaded = 0
    for entry in manifest.entries:
        if entry.link is not None:
            continue
        key = location.key(manifest.version, "repository", entry.path)
        there = store.head(location.bucket, key)
        if there and there.get("sha256") == entry.sha256 and there.get("size") == str(entry.size):
            continue
        store.put_file(location.bucket, key, files[entry.path], {"sha256": entry.sha256})
        uploaded += 1
    store.put_bytes(
        location.bucket, location.key(manifest.version, "manifest.json"), manifest.to_json()
    )
    if latest:
        store.put_bytes(location.bucket, location.key("LATEST"), manifest.version.encode())
    log(
        "models_pushed",
        location=str(location),
        version=manifest.version,
        files=len(files),
        uploaded=uploaded,
        latest=latest,
    )
    return manifest


class TritonLoader(Protocol):
    """Triton's model-repository calls (explicit model control), over its HTTP port."""

    def load(self, model: str) -> None:
        """Load or reload ``model``; ``TritonRefused`` when Triton does not."""

    def unload(self, model: str) -> None: ...


@dataclass(slots=True)
class PullReport:
    version: str
    served: Path
    downloaded: int = 0
    reused: bool = False
    loaded: list[str] = field(default_factory=list)
    unloaded: list[str] = field(default_factory=list)


def _models(repository: Path) -> set[str]:
    return (
        {p.parent.name for p in repository.glob("*/config.pbtxt")} if repository.is_dir() else set()
    )


@contextlib.contextmanager
def _exclusive(into: Path) -> Iterator[None]:
    """One pull at a time into ``into`` (an advisory lock on ``into/.pull.lock``)."""
    with (into / ".pull.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(store: ObjectStore, location: Location, manifest: Manifest, target: Path) -> int:
    """Every file of ``manifest`` into ``target``, each checked as it is written."""
    count = 0
    for entry in manifest.entries:
        path = target / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry.link is not None:
            continue
        digest = hashlib.sha256()
        size = 0
        with path.open("wb") as sink:
            for chunk in store.open(
                location.bucket, location.key(manifest.version, "repository", entry.path)
            ):
                digest.update(chunk)
                size += len(chunk)
                sink.write(chunk)
            sink.flush()
            os.fsync(sink.fileno())
        if size != entry.size or digest.hexdigest() != entry.sha256:
            raise ChecksumMismatch(
                f"{entry.path}: {size} bytes with SHA-256 {digest.hexdigest()[:16]}..., the "
                f"manifest says {entry.size} bytes, {entry.sha256[:16]}...; version "
                f"{manifest.version} refused"
            )
        count += 1
    for entry in manifest.entries:
        if entry.link is not None:
            (target / entry.path).symlink_to(entry.link)
    return count


def _verified(folder: Path, manifest: Manifest) -> bool:
    """``folder`` holds exactly what ``manifest`` says (a version pulled before)."""
    for entry in manifest.entries:
        path = folder / entry.path
        if entry.link is not None:
            if not path.is_symlink() or os.readlink(path) != entry.link:
                return False
        elif (
            not path.is_file() or path.stat().st_size != entry.size or _sha256(path) != entry.sha256
        ):
            return False
    return True


def _touch(folder: Path) -> None:
    """Every file and folder of ``folder`` modified now: Triton reloads a model only when its
    folder looks newer than what it loaded, and a version pulled again (a rollback) is older
    than the one it replaces."""
    now = time.time()
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (now, now), follow_symlinks=False)


def _point(into: Path, version: str | None) -> None:
    """Make ``into/current`` name ``versions/<version>`` in one rename (``None``: remove)."""
    current = into / "current"
    if version is None:
        current.unlink(missing_ok=True)
        return
    fresh = into / f".current-{secrets.token_hex(4)}"
    fresh.symlink_to(Path("versions") / version)
    os.replace(fresh, current)


def _served_version(into: Path) -> str | None:
    current = into / "current"
    if not current.is_symlink():
        return None
    return Path(os.readlink(current)).name


def _prune(into: Path, keep: Iterable[str]) -> None:
    kept = {k for k in keep if k}
    for stale in into.glob(".partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in into.glob(".current-*"):
        stale.unlink(missing_ok=True)
    versions = into / "versions"
    if versions.is_dir():
        for folder in versions.iterdir():
            if folder.name not in kept:
                shutil.rmtree(folder, ignore_errors=True)


def _reload(
    triton: TritonLoader, wanted: set[str], previous: set[str]
) -> tuple[list[str], list[str]]:
    loaded = []
    for model in sorted(wanted):
        triton.load(model)
        loaded.append(model)
    unloaded = []
    for model in sorted(previous - wanted):
        triton.unload(model)
        unloaded.append(model)
    return loaded, unloaded


def _restore(triton: TritonLoader, models: set[str], log: Callable[..., None]) -> None:
    """Load each of ``models`` again (the version served before), whatever one of them says."""
    for model in sorted(models):
        try:
            triton.load(model)
        except TritonRefused as exc:
            log("models_restore_refused", model=model, error=str(exc))


def read_latest(store: ObjectStore, location: Location) -> str:
    """The version ``LATEST`` names."""
    version = store.get_bytes(location.bucket, location.key("LATEST")).decode().strip()
    if not _VERSION.fullmatch(version):
        raise ModelStoreError(f"{location}/LATEST names no version: {version!r}")
    return version


def pull(
    store: ObjectStore,
    location: Location,
    into: Path,
    *,
    version: str = "",
    triton: TritonLoader | None = None,
    log: Callable[..., None] = lambda event, **fields: None,
) -> PullReport:
    """Make ``into/current`` serve ``version`` (empty: ``LATEST``) of ``location``, then have
    ``triton`` load it (see the module docstring)."""
    into.mkdir(parents=True, exist_ok=True)
    with _exclusive(into):
        chosen = version_name(version or read_latest(store, location))
        manifest = Manifest.from_json(
            store.get_bytes(location.bucket, location.key(chosen, "manifest.json"))
        )
        if manifest.version != chosen:
            raise ModelStoreError(f"manifest of {chosen} names version {manifest.version}")
        previous = _served_version(into)
        previous_models = _models(into / "current")
        final = into / "versions" / chosen
        report = PullReport(chosen, into / "current")
        _prune(into, keep=(previous or "", chosen))
        if final.is_dir() and _verified(final, manifest):
            report.reused = True
        else:
            partial = into / f".partial-{chosen}-{secrets.token_hex(4)}"
            partial.mkdir()
            try:
                report.downloaded = _download(store, location, manifest, partial)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            shutil.rmtree(final, ignore_errors=True)
            final.parent.mkdir(exist_ok=True)
            os.replace(partial, final)
        _touch(final)
        _point(into, chosen)
        log("models_pulled", location=str(location), version=chosen, downloaded=report.downloaded)
        if triton is not None:
            try:
                report.loaded, report.unloaded = _reload(triton, _models(final), previous_models)
            except TritonRefused:
                if previous is not None and previous != chosen:
                    _touch(into / "versions" / previous)
                    _point(into, previous)
                    _restore(triton, _models(into / "versions" / previous), log)
                log("models_load_refused", version=chosen, serving=previous)
                raise
            log("models_loaded", version=chosen, models=report.loaded, unloaded=report.unloaded)
        _prune(into, keep=(previous or "", chosen))
        return report
