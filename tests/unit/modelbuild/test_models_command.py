"""`modstream models` is registered and its actions parse."""

from __future__ import annotations

from modstream.cli import build_parser


def test_models_build_and_eval_parse() -> None:
    """Both actions exist, carry their flags, and select different handlers."""
    parser = build_parser()
    build = parser.parse_args(["models", "build", "--retrain"])
    assert build.retrain is True
    assert build.force is False
    evaluate = parser.parse_args(["models", "eval"])
    assert evaluate.json is None
    assert evaluate.repository is None
    elsewhere = parser.parse_args(["models", "eval", "--repository", "/tmp/repo"])
    assert str(elsewhere.repository) == "/tmp/repo"
    assert build.handler is not evaluate.handler
