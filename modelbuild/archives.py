"""Read files straight out of wheels (zip), sdists and npm tarballs (tar.gz), without installing."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ArchiveError", "iter_members", "read_member"]


class ArchiveError(KeyError):
    """The archive has no member with that path suffix."""


def iter_members(archive: Path | bytes, prefix_part: str = "") -> Iterator[tuple[str, bytes]]:
    """``(name, content)`` of every regular file whose path contains ``prefix_part``."""
    data = archive if isinstance(archive, bytes) else None
    path_name = "" if isinstance(archive, bytes) else archive.name
    if path_name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:  # type: ignore[arg-type]
            for info in zf.infolist():
                if not info.is_dir() and prefix_part in info.filename:
                    yield info.filename, zf.read(info)
        return
    source: dict[str, object] = (
        {"fileobj": io.BytesIO(data)} if data is not None else {"name": archive}
    )
    with tarfile.open(mode="r:*", **source) as tf:  # type: ignore[call-overload]
        for member in tf:
            if member.isfile() and prefix_part in member.name:
                handle = tf.extractfile(member)
                if handle is not None:
                    yield member.name, handle.read()


def read_member(archive: Path | bytes, suffix: str) -> bytes:
    """The content of the one member whose path ends with ``suffix``."""
    for name, content in iter_members(archive):
        if name.endswith(suffix):
            return content
    raise ArchiveError(suffix)
