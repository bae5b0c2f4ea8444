"""The generated training set is pinned: the heads are what this exact data trains.

``load_task_data`` is run on the pinned packages (the build's cache; ``modstream models build``
fetches them) and every task's examples, in order, with label, language, source and split, are
compared by fingerprint with the set the committed heads were trained on. A change to a data
file (``modelbuild/data/training/*.toml``), a template or a transform that changes the set fails
here: retrain the heads (``modstream models build --retrain``) and update ``PINNED`` in the same
commit, with the new eval line in the model cards.
"""

from __future__ import annotations

import pytest

from modelbuild.build import load_task_data
from modelbuild.canonical_inputs import canonical_text
from modelbuild.datasets import TaskData
from modelbuild.probe_set import PROBES, probe_lines
from modelbuild.settings import ModelToolSettings
from modelbuild.sources import fetch_all

PINNED: dict[str, tuple[int, str]] = {
    "sentiment": (22500, "789a78a7c7e246cbc8276d0b37ac8d275e9d5755577c7549eb47ccad42c13ed3"),
    "intent": (50788, "6638b3589176b40e5df0960f5a1195d7f17cc779c1c5358f881a2766376fe5fb"),
    "toxicity": (60912, "3d423ee646dd4d35f388527076d9850d5b9cfa747494183061e8612dcb1ea81e"),
}
"""Examples and fingerprint (:meth:`modelbuild.datasets.TaskData.fingerprint`) per task."""


@pytest.fixture(scope="module")
def tasks() -> dict[str, TaskData]:
    return load_task_data(fetch_all(ModelToolSettings().models.work_dir / "cache"))


def test_generated_training_set_is_the_pinned_one(tasks: dict[str, TaskData]) -> None:
    """Every task's examples, in order, with labels, sources and split, are the pinned set."""
    found = {task: (len(data.examples), data.fingerprint()) for task, data in tasks.items()}
    assert found == PINNED


@pytest.mark.parametrize("name", PROBES)
def test_no_probe_line_is_trained_on(tasks: dict[str, TaskData], name: str) -> None:
    """The probes (``modelbuild/data/probe_*.toml``) are for measurement: no example of any task
    is one of their lines, canonicalised as the examples are."""
    trained = {e.text for data in tasks.values() for e in data.examples}
    assert not trained & {canonical_text(e.text) for e in probe_lines(name)}
