"""``modstream models``' settings: where the build keeps its downloads and intermediate files.

``MODSTREAM_MODELS__WORK_DIR=/var/cache/modstream`` moves them; the default is the checkout's
``.modstream/`` (the same folder the local stack uses for its state).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from common.settings import Section, ServiceSettings, project_root

__all__ = ["ModelToolSettings", "ModelsSettings"]


class ModelsSettings(Section):
    work_dir: Path = Field(default_factory=lambda: project_root() / ".modstream")
    """Holds ``cache/`` (fetched packages, embeddings) and ``build/`` (intermediate files)."""


class ModelToolSettings(ServiceSettings):
    """Everything ``modstream models`` reads."""

    models: ModelsSettings = ModelsSettings()
