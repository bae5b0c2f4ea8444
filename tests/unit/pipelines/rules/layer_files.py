"""Small rule files and layers for the layering tests (a base of three rules, not the shipped
set, so each test builds its engines quickly)."""

from __future__ import annotations

from pathlib import Path

BASE = """
[exempts]
fruit = ['''\\bbanana split\\b''']

[[rules]]
id = "t.spam.words"
category = "spam"
severity = "low"
action = "flag"
kind = "keywords"
keywords = ["cheap pills", "banana split"]
exempt_lists = ["fruit"]

[[rules]]
id = "t.threat.words"
category = "threat"
severity = "high"
action = "flag"
kind = "regex"
patterns = ['''\\bi will hurt you\\b''']

[[rules]]
id = "t.profile.strikes"
category = "repeat_offender"
severity = "medium"
action = "escalate"
kind = "profile"
check = "repeat_offender"
min_strikes = 3
"""

LAYER = """
extends = "base.toml"
disable = ["t.spam.words"]

[overrides."t.threat.words"]
action = "block"
severity = "critical"

[overrides."t.profile.strikes"]
min_strikes = 5

[[rules]]
id = "acme.links"
category = "spam"
severity = "medium"
action = "flag"
kind = "keywords"
keywords = ["bit.ly"]

[[examples]]
id = "acme.links"
examples = ["look at bit.ly/abc"]
near_misses = ["a bitly link"]

[everyday]
no_hits = ["cheap pills are not a thing here"]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
