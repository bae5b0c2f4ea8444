"""``admin.model_store`` over an in-memory object store: manifests, idempotent pushes, atomic
pulls and the rollback when Triton refuses (the real S3 server and Triton:
tests/integration/test_model_store.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from admin.model_store import (
    ChecksumMismatch,
    Location,
    Manifest,
    ModelStoreError,
    TritonRefused,
    build_manifest,
    parse_location,
    pull,
    push,
    version_name,
)
from modstream.cli import main


class MemoryStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}
        self.uploads = 0

    def head(self, bucket: str, key: str) -> dict[str, str] | None:
        if key not in self.objects:
            return None
        return {**self.metadata.get(key, {}), "size": str(len(self.objects[key]))}

    def put_file(self, bucket: str, key: str, path: Path, metadata: dict[str, str]) -> None:
        self.uploads += 1
        self.objects[key] = path.read_bytes()
        self.metadata[key] = metadata

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        self.objects[key] = data

    def get_bytes(self, bucket: str, key: str) -> bytes:
        if key not in self.objects:
            raise ModelStoreError(f"no object {key}")
        return self.objects[key]

    def open(self, bucket: str, key: str) -> Iterator[bytes]:
        data = self.get_bytes(bucket, key)
        yield from (data[i : i + 3] for i in range(0, len(data), 3))


class Triton:
    def __init__(self, refuse: set[str] | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.refuse = refuse or set()

    def load(self, model: str) -> None:
        self.calls.append(("load", model))
        if model in self.refuse:
            raise TritonRefused(f"load {model}: no")

    def unload(self, model: str) -> None:
        self.calls.append(("unload", model))


LOCATION = Location("bucket", "models")


def _repository(root: Path, marker: str, models: tuple[str, ...] = ("moderation",)) -> Path:
    for model in models:
        (root / model / "1").mkdir(parents=True)
        (root / model / "config.pbtxt").write_text(f'backend: "python"  # {marker}\n')
        (root / model / "1" / "model.py").write_text(f"# {marker}\n")
        (root / model / "2").mkdir()
        (root / model / "2" / "model.py").symlink_to("../1/model.py")
    (root / "moderation" / "1" / "__pycache__").mkdir()
    (root / "moderation" / "1" / "__pycache__" / "model.pyc").write_bytes(b"x")
    return root


def test_locations_are_s3_urls_with_a_bucket() -> None:
    """``s3://bucket/a/b`` splits into bucket and prefix; other schemes and bucket names fail."""
    assert parse_location("s3://my-bucket/a/b/") == Location("my-bucket", "a/b")
    assert parse_location("s3://my-bucket").key("v", "manifest.json") == "v/manifest.json"
    for bad in ("gs://b/p", "s3://B_ad/p", "/tmp/x"):
        with pytest.raises(ModelStoreError):
            parse_location(bad)


def test_the_manifest_lists_files_with_checksums_and_links_as_links(tmp_path: Path) -> None:
    """Files with size and SHA-256, the inner link as a link, caches left out; the default
    version is the content digest, so the same content has the same name."""
    repository = _repository(tmp_path / "r", "one")
    manifest, files = build_manifest(repository)
    paths = {e.path: e for e in manifest.entries}
    assert set(paths) == {
        "moderation/config.pbtxt",
        "moderation/1/model.py",
        "moderation/2/model.py",
    }
    assert paths["moderation/2/model.py"].link == "../1/model.py"
    assert paths["moderation/1/model.py"].size == len("# one\n")
    assert set(files) == {"moderation/config.pbtxt", "moderation/1/model.py"}
    assert manifest.version == manifest.digest[:12]
    assert build_manifest(repository)[0].version == manifest.version
    assert Manifest.from_json(manifest.to_json()).entries == manifest.entries


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "../etc/passwd", "size": 1, "sha256": "x"},
        {"path": "/abs", "size": 1, "sha256": "x"},
        {"path": "a//b", "size": 1, "sha256": "x"},
        {"path": "m/2/model.py", "link": "../../../outside"},
    ],
)
def test_a_manifest_cannot_write_outside_the_repository(entry: dict[str, object]) -> None:
    """Paths that climb out, absolute paths, empty parts and links leaving the repository are
    refused before anything is written."""
    data = json.dumps({"format": 1, "version": "v", "entries": [entry]}).encode()
    with pytest.raises(ModelStoreError, match="unsafe path"):
        Manifest.from_json(data)


def test_pushing_the_same_content_again_uploads_nothing(tmp_path: Path) -> None:
    """Files already there with the same checksum are skipped; the manifest comes before
    LATEST."""
    store = MemoryStore()
    repository = _repository(tmp_path / "r", "one")
    manifest = push(store, repository, LOCATION)
    assert store.uploads == 2
    assert store.objects["models/LATEST"] == manifest.version.encode()
    push(store, repository, LOCATION)
    assert store.uploads == 2


def test_pull_serves_current_through_a_link_and_keeps_one_version_back(tmp_path: Path) -> None:
    """``current`` names ``versions/<v>``; a third pull deletes the oldest version and keeps
    the one it replaced."""
    store = MemoryStore()
    for name in ("v1", "v2", "v3"):
        push(store, _repository(tmp_path / name, name), LOCATION, version=name)
    into = tmp_path / "served"
    for name in ("v1", "v2", "v3"):
        report = pull(store, LOCATION, into, version=name)
        assert (report.version, report.downloaded) == (name, 2)
        assert os.readlink(into / "current") == f"versions/{name}"
        assert (into / "current" / "moderation" / "1" / "model.py").read_text() == f"# {name}\n"
        assert (into / "current" / "moderation" / "2" / "model.py").is_symlink()
    assert sorted(p.name for p in (into / "versions").iterdir()) == ["v2", "v3"]
    assert pull(store, LOCATION, into).version == "v3"  # LATEST


def test_a_corrupted_object_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    """A file whose bytes differ from the manifest: ``ChecksumMismatch``, no partial folder,
    ``current`` as it was."""
    store = MemoryStore()
    push(store, _repository(tmp_path / "a", "a"), LOCATION, version="a")
    push(store, _repository(tmp_path / "b", "b"), LOCATION, version="b")
    into = tmp_path / "served"
    pull(store, LOCATION, into, version="a")
    store.objects["models/b/repository/moderation/1/model.py"] = b"# c\n"
    with pytest.raises(ChecksumMismatch, match=r"moderation/1/model\.py"):
        pull(store, LOCATION, into, version="b")
    assert os.readlink(into / "current") == "versions/a"
    assert not list(into.glob(".partial-*"))
    assert not (into / "versions" / "b").exists()


def test_a_model_triton_refuses_puts_the_previous_version_back(tmp_path: Path) -> None:
    """Triton loads every model of the new version and unloads the ones it lacks; when it
    refuses one, ``current`` names the previous version again and its models are reloaded."""
    store = MemoryStore()
    push(store, _repository(tmp_path / "a", "a", ("moderation", "old")), LOCATION, version="a")
    push(store, _repository(tmp_path / "b", "b", ("moderation", "new")), LOCATION, version="b")
    into = tmp_path / "served"
    pull(store, LOCATION, into, version="a")
    triton = Triton()
    report = pull(store, LOCATION, into, version="b", triton=triton)
    assert (report.loaded, report.unloaded) == (["moderation", "new"], ["old"])
    refusing = Triton(refuse={"moderation"})
    pull(store, LOCATION, into, version="a", triton=Triton())
    with pytest.raises(TritonRefused):
        pull(store, LOCATION, into, version="b", triton=refusing)
    assert os.readlink(into / "current") == "versions/a"
    assert refusing.calls[-2:] == [("load", "moderation"), ("load", "old")]


@pytest.mark.parametrize("name", ["2026.12.0", "3f9a1c0b2d4e", "v1_rc-2"])
def test_a_version_name_is_letters_digits_dots_dashes_and_underscores(name: str) -> None:
    """Names ``push`` makes or takes pass as they are."""
    assert version_name(name) == name


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "x" * 65, "$(MODELS_VERSION)"])
def test_anything_else_is_not_a_version_name(name: str) -> None:
    """The empty name, a path, an unexpanded variable or an overlong name are refused."""
    with pytest.raises(ModelStoreError, match="not a version name"):
        version_name(name)


def test_pull_refuses_an_empty_version_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--version=`` (an unset ``$(MODELS_VERSION)``) exits 2 before anything is fetched or
    written, rather than serving whatever ``LATEST`` names."""
    into = tmp_path / "models"
    code = main(
        ["models", "pull", "s3://modstream-models/moderation", f"--into={into}", "--version="]
    )
    assert code == 2
    assert "--version is empty" in capsys.readouterr().err
    assert not into.exists()
