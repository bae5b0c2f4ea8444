"""Metrics on hand-checked confusion matrices; deterministic splits and weak-label rules."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from modelbuild.datasets import (
    INTENT,
    TOXICITY,
    _rating_label,
    benign_words,
    held_out,
    is_question,
    load_lexicons,
    synthetic,
)
from modelbuild.evaluate import keyword_intent
from modelbuild.metrics import (
    average_precision,
    classification_report,
    detection_metrics,
    false_positive_rate,
)


def test_report_matches_hand_computed_values() -> None:
    """Precision, recall, F1, macro-F1 and the confusion matrix of a small known case."""
    y_true = np.array([0, 0, 0, 1, 1, 2], dtype=np.int64)
    y_pred = np.array([0, 0, 1, 1, 0, 2], dtype=np.int64)
    rep = classification_report(y_true, y_pred, ("a", "b", "c"))
    assert rep["confusion"] == [[2, 1, 0], [1, 1, 0], [0, 0, 1]]
    per = rep["per_class"]
    assert isinstance(per, dict)
    assert per["a"]["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert per["a"]["recall"] == pytest.approx(2 / 3, abs=1e-4)
    assert per["b"]["f1"] == pytest.approx(0.5, abs=1e-4)
    assert rep["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 1.0) / 3, abs=1e-4)
    assert rep["accuracy"] == pytest.approx(4 / 6, abs=1e-4)


def test_average_precision_matches_a_hand_computed_curve() -> None:
    """Scores 0.9 (harmful), 0.8 (benign), 0.7 (harmful): precision 1 at recall 0.5, then 2/3
    at recall 1, so AP = 0.5 * 1 + 0.5 * 2/3; tied scores enter together; no positives, None."""
    assert average_precision([True, False, True], [0.9, 0.8, 0.7]) == pytest.approx(0.8333)
    assert average_precision([True, False], [0.5, 0.5]) == 0.5
    assert average_precision([False, False], [0.1, 0.2]) is None


def test_detection_metrics_leave_undefined_rates_empty() -> None:
    """Nothing caught: precision undefined, F1 0; no benign lines: false-positive rate undefined."""
    empty = detection_metrics([True, True], [False, False], [0.0, 0.0])
    assert empty["precision"] is None
    assert empty["f1"] == 0.0
    assert empty["fpr"] is None
    full = detection_metrics([True, False, False], [True, True, False], [2.0, 1.5, 0.0])
    assert (full["precision"], full["recall"], full["fpr"]) == (0.5, 1.0, 0.5)


def test_macro_f1_skips_classes_absent_from_the_test_set() -> None:
    """A class with no true examples does not drag macro-F1 to zero."""
    rep = classification_report(
        np.array([0, 2], dtype=np.int64), np.array([0, 2], dtype=np.int64), ("n", "u", "p")
    )
    assert rep["macro_f1"] == 1.0


def test_false_positive_rate_counts_flagged_share() -> None:
    """FPR is the share of predictions outside the allowed labels."""
    assert false_positive_rate(np.array([0, 1, 0, 0], dtype=np.int64), [0]) == 0.25
    assert false_positive_rate(np.array([0, 1, 2, 3], dtype=np.int64), [0, 1]) == 0.5


def test_held_out_split_is_fixed_by_seed() -> None:
    """The split depends on the seed and the text only, and holds out about the fraction asked."""
    texts = [f"line {i}" for i in range(2000)]
    first = [held_out(7, t) for t in texts]
    assert first == [held_out(7, t) for t in texts]
    assert first != [held_out(8, t) for t in texts]
    assert 0.15 < sum(first) / len(texts) < 0.25


def test_rating_thresholds() -> None:
    """Mean ratings below -0.5 are negative, above 0.5 positive, neutral between."""
    assert [_rating_label(r) for r in (-2.0, -0.5, 0.0, 0.5, 0.51)] == [0, 1, 1, 1, 2]


def test_question_rule_handles_both_question_marks() -> None:
    """The weak question rule knows the ASCII and the full-width question mark."""
    assert is_question("how are you?")
    assert is_question("你好吗？")
    assert not is_question("fine thanks")


def test_synthetic_sentences_use_disjoint_words_for_test() -> None:
    """Held-out template sentences are built only from held-out lexicon words."""
    lex = {
        "en": [f"badword{i}" for i in range(40)],
        "zh": [f"坏词{i}" for i in range(40)],
        "zh_ads": [f"广告{i}" for i in range(20)],
    }
    examples = synthetic(lex, seed=3)
    used = {
        flag: {w for e in examples if e.test == flag for w in lex["en"] if w in e.text.split()}
        for flag in (False, True)
    }
    assert used[False]
    assert used[True]
    assert not used[False] & used[True]
    labels = {e.label for e in examples if e.source == "template-insult"}
    assert labels == {TOXICITY.index("offensive")}
    assert {e.label for e in examples if e.source == "template-ad"} == {
        INTENT.index("advertisement")
    }


def test_everyday_insults_are_always_trained_and_never_benign_fillers() -> None:
    """Everyday insults fill the training insult templates (never the held-out split) and are
    kept out of the counterfactual fillers, which are labelled none."""
    lex = {"en": [f"badword{i}" for i in range(10)], "zh": ["坏词"], "zh_ads": ["广告"]}
    examples = synthetic(lex, seed=3, everyday={"en": ("idiot",), "zh": ("蠢货",)})
    with_idiot = [e for e in examples if "idiot" in e.text]
    assert len(with_idiot) == 12
    assert {(e.test, e.source) for e in with_idiot} == {(False, "template-insult")}
    assert any("蠢货" in e.text for e in examples if not e.test)
    chat = {"en": ["you idiot, the weather is lovely today"], "zh": ["蠢货天气很好"]}
    words = benign_words(chat, {"en": [], "zh": []}, seed=3)
    assert "idiot" not in words["en"]
    assert "weather" in words["en"]
    assert "蠢货" not in words["zh"]
    assert "天气" in words["zh"]


def test_keyword_baseline() -> None:
    """The spam/ad keyword baseline flags links and contact bait, not plain chat."""
    assert keyword_intent("buy now at www.example.com") == INTENT.index("advertisement")
    assert keyword_intent("加微信领取福利") == INTENT.index("advertisement")
    assert keyword_intent("see you tomorrow") == INTENT.index("chat")


def _tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return path


def test_lexicons_merge_both_chinese_lists_in_simplified_script(tmp_path: Path) -> None:
    naughty = _tgz(
        tmp_path / "naughty-words-1.2.0.tgz",
        {
            "package/en.json": json.dumps(["jerk", "ok"]).encode(),
            "package/zh.json": json.dumps(["傻逼", "x", "abc"]).encode(),
        },
    )
    badwords = _tgz(
        tmp_path / "bad-words-chinese-1.0.2.tgz",
        {
            "package/libs/badWordsChinese.json": json.dumps(
                {"words": ["腦殘", "智障", "婊"]}
            ).encode()
        },
    )
    cleanse = tmp_path / "cleanse_speech-0.1.3-py3-none-any.whl"
    with zipfile.ZipFile(cleanse, "w") as zf:
        ads = " ".join(base64.b64encode(w.encode()).decode() for w in ("加微信", "q"))
        zf.writestr("cleanse_speech/bin/cn_advertisement.bin", ads)

    lex = load_lexicons(naughty, cleanse, badwords)

    # Traditional 腦殘 arrives as Simplified 脑残; one-character and ASCII entries are dropped.
    assert lex["zh"] == ["傻逼", "智障", "脑残"]
    assert lex["en"] == ["jerk"]
    assert lex["zh_ads"] == ["加微信"]
