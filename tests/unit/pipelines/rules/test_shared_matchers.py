"""A tenant's engine that reuses the default engine's matchers (``base=``) decides every line
exactly as an engine of its own rules does, overridden exempt spans and disabled rules
included."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.examples import default_rule_examples
from pipelines.rules.layers import load_rule_stack
from pipelines.rules.shared_engines import EngineShelf

_GAMING = Path(str(resources.files("pipelines").joinpath("rulesets", "layers")))
_LAYER = """extends = "default"
disable = ["en.hate.slur", "zh.spam.invoice"]
[overrides."en.threat.direct"]
exempt_lists = []
[overrides."en.offensive.profanity"]
action = "escalate"
yields_to_model = false
[[rules]]
id = "t.words"
category = "spam"
severity = "low"
action = "flag"
kind = "keywords"
keywords = ["next round", "傻逼"]
[[examples]]
id = "t.words"
examples = ["see you next round"]
near_misses = ["the next rounds"]
"""


def _outcomes(engine: RuleEngine, texts: list[str]) -> list[object]:
    sent = datetime(2026, 1, 1, tzinfo=UTC)
    return [engine.evaluate(ChatMessage("m", "g", "u", t, sent)).hits for t in texts]


def test_a_layered_engine_decides_as_its_own(tmp_path: Path) -> None:
    examples = default_rule_examples()
    texts = [t for r in examples.rules.values() for t in (*r.examples, *r.near_misses)]
    texts += [*examples.no_hits, "i'm gonna kill you next round", "你个傻逼"]
    default = RuleEngine(default_ruleset())
    for path in (tmp_path / "acme.toml", _GAMING / "gaming_community.toml"):
        if path.parent == tmp_path:
            path.write_text(_LAYER, encoding="utf-8")
        ruleset = load_rule_stack(path).ruleset
        layered = RuleEngine(ruleset, base=default)
        assert layered.is_layered
        assert _outcomes(layered, texts) == _outcomes(RuleEngine(ruleset), texts)


def test_the_shelf_builds_tenant_engines_over_the_default(tmp_path: Path) -> None:
    """A stack over the default reuses the default engine held on the shelf."""
    (tmp_path / "acme.toml").write_text(_LAYER, encoding="utf-8")
    shelf = EngineShelf(3)
    default = RuleEngine(default_ruleset())
    shelf.add(default)
    built, new = shelf.engine_for(load_rule_stack(tmp_path / "acme.toml"))
    assert new
    assert built.engine.is_layered
    assert not default.is_layered
    hits = _outcomes(built.engine, ["i'm gonna kill you next round"])[0]
    assert {h.rule_id for h in hits} == {"en.threat.direct", "t.words"}  # type: ignore[attr-defined]
