"""Tests for pipelines.canonical.links: defanged links restored."""

from __future__ import annotations

import pytest

from pipelines.canonical.links import deobfuscate_links


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("visit scam[.]com", "visit scam.com"),
        ("visit scam(.)com now", "visit scam.com now"),
        ("go to scam[dot]net", "go to scam.net"),
        ("hxxp://bad.site/x", "http://bad.site/x"),
        ("hxxps[:]//bad.site", "https://bad.site"),
        ("scam dot com", "scam.com"),
        ("scam . com", "scam.com"),
        ("win-prizes .xyz", "win-prizes.xyz"),
        ("ww dot scam dot com", "ww.scam.com"),
        ("scam\u70b9com", "scam.com"),  # Chinese "dot"
    ],
)
def test_defanged_links_are_restored(text: str, expected: str) -> None:
    """Spelled, bracketed and spaced dots and defanged schemes read as a link."""
    assert deobfuscate_links(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "polka dot dress",
        "connect the dots",
        "the end. com'on",
        "(see above)",
        "i said [citation needed]",
        "it's 5 p.m. now",
        "done. me too",
    ],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    """A dot before a non-domain word, brackets and sentence ends are left alone."""
    assert deobfuscate_links(text) == text
