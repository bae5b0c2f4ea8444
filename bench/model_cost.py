"""``python -m bench.model_cost``: CPU time per message of the served model against the previous.

Both moderation models run in process with their own served code (``pipeline_model.py`` on the
files each ``config.pbtxt`` names, each with the encoder its load-time check picks on this
machine, as Triton would), on the sample chat lines of ``pipelines/samples/chat.jsonl`` in
batches of 100. The two alternate batch by batch, so load from other jobs falls on both alike;
CPU time (``time.process_time``, all threads of this process) is what is compared, not wall time.

Last line: ``model_cpu_ms=… previous_cpu_ms=… ratio=… encoder=… previous_encoder=…``
(milliseconds of CPU per message; ratio = model / previous).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from bench.models import REPOSITORY, cycled_batch, sample_messages

__all__ = ["main", "served"]


def served(model: str) -> tuple[Callable[[list[str]], object], str]:
    """``model``'s served code in process and the encoder it chose (``cpu`` or ``float32``)."""
    from modelbuild.serving.pipeline_model import TritonPythonModel
    from modelbuild.whole_decision import served_config

    instance = TritonPythonModel()
    instance.initialize(served_config(REPOSITORY, model))
    return instance.scores, instance.choice.encoder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="moderation")
    parser.add_argument("--previous", default="moderation_v2")
    parser.add_argument("--batches", type=int, default=30, help="batches of 100 per model")
    args = parser.parse_args(argv)
    messages = sample_messages()
    models = {name: served(name) for name in (args.model, args.previous)}
    spent = dict.fromkeys(models, 0.0)
    for score, _ in models.values():
        score(cycled_batch(messages, 100, 0))  # warm-up
    for index in range(args.batches):
        batch = cycled_batch(messages, 100, index * 100)
        for name, (score, _) in models.items():
            started = time.process_time()
            score(batch)
            spent[name] += time.process_time() - started
    per_message = {name: 1000 * spent[name] / (100 * args.batches) for name in models}
    ratio = per_message[args.model] / per_message[args.previous]
    print(json.dumps({"cpu_ms_per_message": per_message, "batches": args.batches}))
    print(
        f"model_cpu_ms={per_message[args.model]:.3f} "
        f"previous_cpu_ms={per_message[args.previous]:.3f} ratio={ratio:.3f} "
        f"encoder={models[args.model][1]} previous_encoder={models[args.previous][1]}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
