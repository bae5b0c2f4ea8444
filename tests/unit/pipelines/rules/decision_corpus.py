"""The rule decisions of the shipped set over every corpus the repository keeps, as digests: the
before/after record that moving phrase knowledge out of Python into data files changed nothing.

Each line's digest covers the canonical text (emoji readings included), whether it reads as a
report of received abuse, the quoted and named spans its mention frames find, and every rule
hit with its spans: a change to any frame, named span, emoji reading or severe category shows.
``python -m tests.unit.pipelines.rules.decision_corpus`` writes ``rule_decisions.json`` beside
this file (run it with the code whose decisions are the reference; after a deliberate change of
the rules, the phrase files or the canonical text, write it again). The record is keyed by each
line's text, so lines added to a corpus later are not in it and are not checked; one written
line in three is recorded, to keep the file small.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from modelbuild.written_lines import written_lines
from pipelines.canonical import canonicalize
from pipelines.messages import ChatMessage
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.examples import default_rule_examples
from pipelines.rules.mentions import mentioned_spans
from pipelines.rules.reports import is_report

GOLDEN = Path(__file__).with_name("rule_decisions.json")
_SENT_AT = datetime(2026, 1, 1, tzinfo=UTC)
DIGEST_HEX = 8
_TEXT_HEX = 8
_WRITTEN_EVERY = 3


def corpora() -> dict[str, list[str]]:
    """Every corpus of lines the repository keeps for the rules, by name."""
    examples = default_rule_examples()
    shipped = [t for r in examples.rules.values() for t in (*r.examples, *r.near_misses)]
    shipped += [*examples.no_hits, *examples.no_severe_hits]
    dev = resources.files("modelbuild").joinpath("data", "adversarial_dev.jsonl")
    samples = resources.files("pipelines").joinpath("samples", "chat.jsonl")
    return {
        "default_examples": shipped,
        "adversarial_dev": [json.loads(x)["text"] for x in dev.read_text("utf-8").splitlines()],
        "samples": [json.loads(x)["text"] for x in samples.read_text("utf-8").splitlines()],
        "written_lines": [line.text for line in written_lines()[::_WRITTEN_EVERY]],
    }


def line_digest(engine: RuleEngine, text: str) -> str:
    """What the rules make of ``text`` (module docstring), as a short digest."""
    canonical = canonicalize(text)
    outcome = engine.evaluate(ChatMessage("m", "g", "u", text, _SENT_AT, {}), canonical)
    record = [
        canonical.text,
        is_report(canonical.text),
        mentioned_spans(canonical.text),
        [[h.rule_id, h.category, int(h.severity), str(h.action), h.spans] for h in outcome.hits],
    ]
    encoded = json.dumps(record, ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:DIGEST_HEX]


def text_key(text: str) -> str:
    """A line's key in the record."""
    return hashlib.sha256(text.encode()).hexdigest()[:_TEXT_HEX]


def digests(engine: RuleEngine) -> dict[str, str]:
    """Each corpus's lines as text key and digest, 16 hex digits a line, in key order."""
    return {
        name: "".join(sorted({text_key(t) + line_digest(engine, t) for t in lines}))
        for name, lines in corpora().items()
    }


def recorded(chunks: str) -> dict[str, str]:
    """A corpus's record as text key -> digest."""
    step = _TEXT_HEX + DIGEST_HEX
    return {
        chunks[i : i + _TEXT_HEX]: chunks[i + _TEXT_HEX : i + step]
        for i in range(0, len(chunks), step)
    }


def main() -> int:
    GOLDEN.write_text(json.dumps(digests(RuleEngine(default_ruleset())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
