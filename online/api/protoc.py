"""Regenerates the Python modules of ``moderation.proto``: ``python -m online.api.protoc``.

The generated ``moderation_pb2.py`` and ``moderation_pb2.pyi`` are committed (the service imports
them; ``grpcio-tools`` is a development dependency only). A unit test generates them again into a
temporary folder and compares, so the committed files cannot drift from the ``.proto``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.settings import project_root
from online.errors import OnlineError

__all__ = ["PROTO", "GeneratorFailed", "generate", "main"]

PROTO = "online/api/moderation.proto"
"""The contract, relative to the repository root (which is also the import root)."""


class GeneratorFailed(OnlineError):
    """``protoc`` returned an error status."""


def generate(out_dir: Path, root: Path | None = None) -> list[Path]:
    """Write the generated modules for :data:`PROTO` under ``out_dir``; returns their paths."""
    from grpc_tools import protoc  # development dependency, imported only here

    import_root = root or project_root()
    include = Path(protoc.__file__).parent / "_proto"
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{import_root}",
            f"-I{include}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            str(import_root / PROTO),
        ]
    )
    if status != 0:
        raise GeneratorFailed(f"protoc exited with status {status}")
    stem = PROTO.removesuffix(".proto")
    return [out_dir / f"{stem}_pb2.py", out_dir / f"{stem}_pb2.pyi"]


def main() -> int:
    for path in generate(project_root()):
        print(path.relative_to(project_root()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
