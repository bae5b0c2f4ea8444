"""``modstream models eval``: the shipped heads and the baselines on the held-out splits.

Everything is scored on examples the heads never saw (same seed as the build). The ONNX head
files in ``model_repository/`` are run with onnxruntime, so what is graded is what Triton serves.
Weakly supervised labels (templates, the hatesonar teacher) are reported as such; the numbers
that matter for production are the false-positive rates on normal chat (held-out
chatterbot-corpus lines, written by people) and the hand-written probes in
:mod:`modelbuild.probes`.

Baselines in the same run: VADER's rules and TF-IDF + logistic regression (sentiment), hatesonar
as shipped (toxicity), a keyword list (spam and ads).

Then the whole decision as the worker makes it (rules, the served ``moderation`` model's code
in process on ``paths.repository``, the policy with default thresholds; see
:mod:`modelbuild.whole_decision`) on the adversarial dev set (:mod:`modelbuild.devset`), graded
by :mod:`modelbuild.decision_grading`: catch rates of plain and disguised harmful lines and the
false-positive rate on hard benign lines, per language, transform, category and benign topic,
and the detection figures the field reports (precision, recall, F1, false-positive rate and
AUPRC, per language and per category).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from modelbuild import probes
from modelbuild.archives import iter_members
from modelbuild.build import SEED, BuildPaths, load_task_data
from modelbuild.datasets import INTENT, SENTIMENT, TOXICITY, Example, TaskData
from modelbuild.decision_grading import HEADLINE_KEYS as DEVSET_HEADLINE_KEYS
from modelbuild.decision_grading import format_grading, grade
from modelbuild.devset import DevExample, read_devset
from modelbuild.metrics import classification_report, false_positive_rate
from modelbuild.real_text import load_real_text
from modelbuild.real_text_eval import grade_real_text
from modelbuild.sources import fetch_all
from modelbuild.whole_decision import Scorer, decide_and_score, served_scorer
from pipelines.scores import ModelScores

__all__ = [
    "HEADLINE_KEYS",
    "SPAM_KEYWORDS",
    "evaluate",
    "format_report",
    "grade_devset",
    "headline_line",
    "keyword_intent",
]

Ints = npt.NDArray[np.int64]
Log = Callable[..., None]

SPAM_KEYWORDS: tuple[str, ...] = (
    "http",
    "www.",
    ".com",
    "click",
    "free",
    "buy",
    "cheap",
    "discount",
    "offer",
    "$",
    "earn",
    "money",
    "promo",
    "deal",
    "dm me",
    "telegram",
    "subscribe",
    "order now",
    "微信",
    "加群",
    "qq",
    "优惠",
    "点击",
    "链接",
    "代购",
    "兼职",
    "免费",
    "促销",
    "客服",
)
_VADER_POSITIVE = 0.05
REAL_TEXT_KEYS: tuple[str, ...] = (
    "realtext_flag_en",
    "realtext_flag_zh",
    "realtext_block_en",
    "realtext_block_zh",
    "insult_cv_auc",
)
HEADLINE_KEYS: tuple[str, ...] = (
    "sentiment_macro_f1_en",
    "sentiment_acc_zh",
    "toxicity_fpr_chat",
    "intent_spam_fpr_chat",
    *DEVSET_HEADLINE_KEYS,
    *REAL_TEXT_KEYS,
)
"""The last line of ``modstream models eval``, in this order (the served ``moderation``)."""
SERVED = "moderation"
PREVIOUS = "moderation_v2"
"""The served model and the one before it (the packaged encoder and its heads), graded side by
side on every measure."""
MODELS = (SERVED, PREVIOUS)


def headline_line(headline: dict[str, float]) -> str:
    """The report's last line: ``HEADLINE_KEYS`` in order, ``key=value`` with 4 decimals."""
    if tuple(headline) != HEADLINE_KEYS:
        raise ValueError(f"headline keys {list(headline)} are not {list(HEADLINE_KEYS)}")
    return " ".join(f"{k}={v:.4f}" for k, v in headline.items())


def keyword_intent(text: str) -> int:
    """Keyword baseline: advertisement if any keyword occurs, chat otherwise."""
    low = text.lower()
    if any(k in low for k in SPAM_KEYWORDS):
        return INTENT.index("advertisement")
    return INTENT.index("question") if low.rstrip().endswith(("?", "？")) else 0


class _Served:
    """A served moderation model's code in process (float32 encoder unless asked for the CPU
    one), every text scored once."""

    _CHUNK = 256

    def __init__(self, repository: Path, model: str, *, cpu_encoder: bool = False) -> None:
        self._score = served_scorer(repository, model, cpu_encoder=cpu_encoder)
        self._cache: dict[str, ModelScores] = {}

    def rows(self, texts: Sequence[str]) -> list[ModelScores]:
        """The model's scores per text (a :data:`Scorer`)."""
        missing = sorted({t for t in texts if t not in self._cache})
        for start in range(0, len(missing), self._CHUNK):
            chunk = missing[start : start + self._CHUNK]
            self._cache.update(zip(chunk, self._score(chunk), strict=True))
        return [self._cache[t] for t in texts]

    def proba(self, task: str, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``[n, classes]`` probabilities of one task."""
        rows = self.rows(texts)
        width = len({"sentiment": SENTIMENT, "intent": INTENT, "toxicity": TOXICITY}[task])
        if not rows:
            return np.zeros((0, width), dtype=np.float32)
        return np.array([getattr(r, task) for r in rows], dtype=np.float32)


def _vader(sdist: Path, work: Path) -> Any:
    folder = work / "vader"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in iter_members(sdist, "vaderSentiment/"):
        if name.endswith(("vaderSentiment.py", "vader_lexicon.txt", "emoji_utf8_lexicon.txt")):
            (folder / Path(name).name).write_bytes(content)
    spec = importlib.util.spec_from_file_location("_vader", folder / "vaderSentiment.py")
    if spec is None or spec.loader is None:
        raise ImportError("cannot load VADER from the sdist")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SentimentIntensityAnalyzer()


def _vader_label(compound: float) -> int:
    if compound >= _VADER_POSITIVE:
        return 2
    if compound <= -_VADER_POSITIVE:
        return 0
    return 1


def _tfidf_lr(train: list[Example], test: list[Example], analyzer: str) -> Ints:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if analyzer == "char":
        vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), min_df=2, sublinear_tf=True)
    else:
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    x = vec.fit_transform([e.text for e in train])
    model = LogisticRegression(max_iter=2000, C=4.0, class_weight="balanced")
    model.fit(x, [e.label for e in train])
    return np.asarray(model.predict(vec.transform([e.text for e in test])), dtype=np.int64)


def _labels(examples: list[Example]) -> Ints:
    return np.array([e.label for e in examples], dtype=np.int64)


def _zh_binary(probs: npt.NDArray[np.float32]) -> Ints:
    """Chinese data has no neutral: pick the likelier of negative and positive."""
    return np.where(probs[:, 2] >= probs[:, 0], 2, 0).astype(np.int64)


def evaluate(
    paths: BuildPaths, log: Log | None = None, *, cpu_encoder: bool = False
) -> dict[str, Any]:
    """Every figure of the report, as a JSON-ready dict: each model with its float32 encoder, or
    with ``cpu_encoder`` the CPU file its config names (``python -m bench.cpu_model --eval``)."""
    archives = fetch_all(paths.cache)
    tasks = load_task_data(archives, SEED)
    served = {model: _Served(paths.repository, model, cpu_encoder=cpu_encoder) for model in MODELS}
    report: dict[str, Any] = {"seed": SEED, "models": list(MODELS)}

    def predict(key: str, examples: list[Example]) -> npt.NDArray[np.float32]:
        model, task = key.split("/")
        return served[model].proba(task, [e.text for e in examples])

    report["sentiment"] = _sentiment(tasks["sentiment"], predict, archives["vader"], paths.work)
    chat_test = [e for e in tasks["intent"].split(True) if e.source == "chatterbot"]
    report["intent"] = _intent(tasks["intent"], predict, chat_test)
    report["toxicity"] = _toxicity(tasks["toxicity"], predict, chat_test, archives["hatesonar"])
    report["devset"] = grade_devset(served[SERVED].rows)
    report["devset_previous"] = grade_devset(served[PREVIOUS].rows)["headline"]
    real = load_real_text(archives)
    report["real_text"] = grade_real_text(
        real,
        {model: s.rows for model, s in served.items()},
        {SERVED: lambda: tuned_insult_out_of_fold(paths, archives, tasks, real)},
    )
    ours = report["real_text"][SERVED]
    report["headline"] = {
        "sentiment_macro_f1_en": report["sentiment"]["model"]["en_tweets"]["macro_f1"],
        "sentiment_acc_zh": report["sentiment"]["model"]["zh"]["accuracy"],
        "toxicity_fpr_chat": report["toxicity"][SERVED]["fpr_chat"],
        "intent_spam_fpr_chat": report["intent"]["model"]["spam_fpr_chat"],
        **report["devset"]["headline"],
        "realtext_flag_en": ours["everyday_en"]["flag_rate"],
        "realtext_flag_zh": ours["everyday_zh"]["flag_rate"],
        "realtext_block_en": ours["everyday_en"]["block_rate"],
        "realtext_block_zh": ours["everyday_zh"]["block_rate"],
        "insult_cv_auc": ours["insults"]["model_cv_auc"],
    }
    if log is not None:
        log("models_evaluated", **report["headline"])
    return report


def grade_devset(scorer: Scorer, examples: list[DevExample] | None = None) -> dict[str, Any]:
    """The whole decision (rules, served model, policy) graded on the adversarial dev set."""
    lines = examples if examples is not None else read_devset()
    decided = decide_and_score([e.text for e in lines], scorer)
    return grade(lines, [d.result for d in decided], [d.score for d in decided])


def _sentiment(
    data: TaskData,
    predict: Callable[[str, list[Example]], npt.NDArray[np.float32]],
    vader_sdist: Path,
    work: Path,
) -> dict[str, Any]:
    test = data.split(True)
    train = data.split(False)
    groups = {
        "en_tweets": [e for e in test if e.source == "tweets"],
        "en_all": [e for e in test if e.lang == "en"],
        "zh": [e for e in test if e.lang == "zh"],
    }
    out: dict[str, Any] = {"model": {}, "previous": {}, "vader": {}, "tfidf_lr": {}}
    for system, key in (("model", f"{SERVED}/sentiment"), ("previous", f"{PREVIOUS}/sentiment")):
        for name, examples in groups.items():
            probs = predict(key, examples)
            pred = _zh_binary(probs) if name == "zh" else probs.argmax(axis=1).astype(np.int64)
            out[system][name] = classification_report(_labels(examples), pred, SENTIMENT)
    analyzer = _vader(vader_sdist, work)
    for name in ("en_tweets", "en_all"):
        examples = groups[name]
        pred = np.array(
            [_vader_label(analyzer.polarity_scores(e.text)["compound"]) for e in examples],
            dtype=np.int64,
        )
        out["vader"][name] = classification_report(_labels(examples), pred, SENTIMENT)
    en_train = [e for e in train if e.lang == "en"]
    for name in ("en_tweets", "en_all"):
        pred = _tfidf_lr(en_train, groups[name], "word")
        out["tfidf_lr"][name] = classification_report(_labels(groups[name]), pred, SENTIMENT)
    zh_pred = _tfidf_lr([e for e in train if e.lang == "zh"], groups["zh"], "char")
    out["tfidf_lr"]["zh"] = classification_report(_labels(groups["zh"]), zh_pred, SENTIMENT)
    return out


def _intent(
    data: TaskData,
    predict: Callable[[str, list[Example]], npt.NDArray[np.float32]],
    chat_test: list[Example],
) -> dict[str, Any]:
    out = _intent_of(data, predict, f"{SERVED}/intent", chat_test)
    out["previous"] = _intent_of(data, predict, f"{PREVIOUS}/intent", chat_test)["model"]
    return out


def _intent_of(
    data: TaskData,
    predict: Callable[[str, list[Example]], npt.NDArray[np.float32]],
    served: str,
    chat_test: list[Example],
) -> dict[str, Any]:
    test = data.split(True)
    out: dict[str, Any] = {"model": {}, "keywords": {}}
    chat_ok = [INTENT.index("chat"), INTENT.index("question")]
    for lang in ("en", "zh"):
        examples = [e for e in test if e.lang == lang]
        pred = predict(served, examples).argmax(axis=1).astype(np.int64)
        out["model"][lang] = classification_report(_labels(examples), pred, INTENT)
        kw = np.array([keyword_intent(e.text) for e in examples], dtype=np.int64)
        out["keywords"][lang] = classification_report(_labels(examples), kw, INTENT)
    pred_chat = predict(served, chat_test).argmax(axis=1).astype(np.int64)
    out["model"]["spam_fpr_chat"] = false_positive_rate(pred_chat, chat_ok)
    out["model"]["spam_only_fpr_chat"] = round(
        float(np.mean(pred_chat == INTENT.index("spam"))) if len(pred_chat) else 0.0, 4
    )
    kw_chat = np.array([keyword_intent(e.text) for e in chat_test], dtype=np.int64)
    out["keywords"]["spam_fpr_chat"] = false_positive_rate(kw_chat, chat_ok)
    out["chat_test_lines"] = len(chat_test)
    ad_probe = [
        Example(t, INTENT.index("advertisement"), lang, "probe", True)
        for lang, texts in probes.ADS.items()
        for t in texts
    ]
    probs = predict(served, ad_probe)
    flagged = np.isin(probs.argmax(axis=1), [INTENT.index("spam"), INTENT.index("advertisement")])
    for lang in ("en", "zh"):
        mask = np.array([e.lang == lang for e in ad_probe])
        out["model"][f"ads_probe_caught_{lang}"] = round(float(flagged[mask].mean()), 4)
        kw = np.array([keyword_intent(e.text) != 0 for e in ad_probe])
        out["keywords"][f"ads_probe_caught_{lang}"] = round(float(kw[mask].mean()), 4)
    return out


def _toxicity(
    data: TaskData,
    predict: Callable[[str, list[Example]], npt.NDArray[np.float32]],
    chat_test: list[Example],
    hatesonar_wheel: Path,
) -> dict[str, Any]:
    from modelbuild.teacher import HateSonar

    sonar = HateSonar(hatesonar_wheel)
    test = data.split(True)
    out: dict[str, Any] = {}
    abuse = [
        Example(t, 1, lang, "probe", True) for lang, texts in probes.ABUSE.items() for t in texts
    ]
    praise = [
        Example(t, 0, lang, "probe", True) for lang, texts in probes.PRAISE.items() for t in texts
    ]
    for model in MODELS:
        key = f"{model}/toxicity"
        res: dict[str, Any] = {}
        for lang in ("en", "zh"):
            examples = [e for e in test if e.lang == lang]
            pred = predict(key, examples).argmax(axis=1).astype(np.int64)
            res[f"weak_labels_{lang}"] = classification_report(_labels(examples), pred, TOXICITY)
        res["fpr_chat"] = false_positive_rate(predict(key, chat_test).argmax(axis=1), [0])
        abuse_p = predict(key, abuse)
        praise_p = predict(key, praise)
        for lang in ("en", "zh"):
            a = np.array([e.lang == lang for e in abuse])
            res[f"abuse_probe_caught_{lang}"] = round(float((abuse_p[a].argmax(1) != 0).mean()), 4)
            p = np.array([e.lang == lang for e in praise])
            res[f"praise_probe_flagged_{lang}"] = round(
                float((praise_p[p].argmax(1) != 0).mean()), 4
            )
        out[model] = res
    base: dict[str, Any] = {}
    en_test = [e for e in test if e.lang == "en"]
    sonar_pred = sonar.predict_proba([e.text for e in en_test]).argmax(1).astype(np.int64)
    base["weak_labels_en"] = classification_report(_labels(en_test), sonar_pred, TOXICITY)
    chat_pred = sonar.predict_proba([e.text for e in chat_test]).argmax(1)
    base["fpr_chat"] = false_positive_rate(chat_pred, [0])
    for lang in ("en", "zh"):
        texts = [e.text for e in abuse if e.lang == lang]
        base[f"abuse_probe_caught_{lang}"] = round(
            float((sonar.predict_proba(texts).argmax(1) != 0).mean()), 4
        )
    out["hatesonar_baseline"] = base
    return out


def format_report(report: dict[str, Any]) -> str:
    """Human-readable summary; the last line is the headline ``key=value`` list."""
    lines = []
    s = report["sentiment"]
    for system in ("model", "previous", "vader", "tfidf_lr"):
        for group, res in s[system].items():
            lines.append(
                f"sentiment {system:9s} {group:10s} n={res['n']:5d} acc={res['accuracy']:.3f} "
                f"macro_f1={res['macro_f1']:.3f}"
            )
    i = report["intent"]
    for system in ("model", "previous", "keywords"):
        for lang in ("en", "zh"):
            res = i[system][lang]
            lines.append(
                f"intent    {system:9s} {lang:10s} n={res['n']:5d} acc={res['accuracy']:.3f} "
                f"macro_f1={res['macro_f1']:.3f} "
                f"ads_probe_caught={i[system][f'ads_probe_caught_{lang}']:.2f}"
            )
        lines.append(
            f"intent    {system:9s} spam_or_ad_fpr_on_chat={i[system]['spam_fpr_chat']:.4f}"
        )
    t = report["toxicity"]
    for key in (*MODELS, "hatesonar_baseline"):
        res = t[key]
        parts = [f"fpr_chat={res['fpr_chat']:.4f}"]
        parts += [f"{k}={v:.2f}" for k, v in res.items() if k.startswith(("abuse", "praise"))]
        if "weak_labels_en" in res:
            parts.append(f"weak_en_macro_f1={res['weak_labels_en']['macro_f1']:.3f}")
        if "weak_labels_zh" in res:
            parts.append(f"weak_zh_macro_f1={res['weak_labels_zh']['macro_f1']:.3f}")
        lines.append(f"toxicity  {key:18s} " + " ".join(parts))
    lines.extend(format_grading(report["devset"]))
    lines.extend(_format_real_text(report["real_text"]))
    lines.append(headline_line(report["headline"]))
    return "\n".join(lines)


def _format_real_text(real: dict[str, Any]) -> list[str]:
    lines = []
    for model, figures in real.items():
        for name in ("everyday_en", "everyday_en_film", "everyday_zh"):
            f = figures[name]
            audited = ""
            if "false_flag_rate" in f:
                audited = (
                    f" false_flag={f['false_flag_rate']:.4f}"
                    f" false_block={f['false_block_rate']:.4f} harmful_flags={f['flags_harmful']}"
                    f" unaudited_flags={f['flags_unaudited']}"
                )
            lines.append(
                f"realtext  {model:14s} {name:16s} n={f['lines']:5d} flag={f['flag_rate']:.4f} "
                f"block={f['block_rate']:.4f} escalate={f['escalate_rate']:.4f}{audited}"
            )
        ins = figures["insults"]
        cv = "".join(f" {k}={ins[k]:.4f}" for k in ("model_cv_auc", "model_auc") if k in ins)
        lines.append(
            f"realtext  {model:14s} insults          n={ins['comments']:5d} auc={ins['auc']:.4f} "
            f"auprc={ins['auprc']:.4f} catch={ins['catch']:.4f} "
            f"flag_other={ins['flag_rate_other']:.4f}{cv}"
        )
    return lines


def tuned_insult_out_of_fold(
    paths: BuildPaths,
    archives: dict[str, Path],
    tasks: dict[str, TaskData],
    real: Any,
) -> Mapping[str, float]:
    """The served model's insult probability for each comment of ``train.csv`` from the insult
    output fitted without the comment's fold (the recipe of :mod:`modelbuild.train`, on the
    served float32 encoder), calibrated with the served temperature; by canonical text."""
    import json

    from modelbuild.embedding import Embedder
    from modelbuild.harm_labels import harm_lines
    from modelbuild.train import TrainPaths, comment_texts, examples_of, insult_output, insult_rows

    manifest = json.loads(TrainPaths(paths).manifest.read_text(encoding="utf-8"))
    temperature = float(manifest["temperatures"]["harms"]["insult"])
    examples = examples_of(archives, tasks, harm_lines(SEED), real, SEED)
    keep, y_rows = insult_rows(examples, int(manifest["config"]["seed"]))
    embedder = Embedder(paths.tuned_encoder, paths.tokenizer, paths.work / "tuned_embeddings")
    texts = comment_texts(real.insults)
    x_rows = embedder.embed([examples[i].text for i in keep])
    _, _, logits, _ = insult_output(
        real.insults, embedder.embed(texts), x_rows, y_rows, int(manifest["config"]["seed"])
    )
    probs = 1.0 / (1.0 + np.exp(-logits / temperature))
    return dict(zip(texts, (float(p) for p in probs), strict=True))
