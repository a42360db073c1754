"""Damaged datasets are refused with one line before anything reads them: a missing data file (LeRobot would try
the network), a video cut short (LeRobot would fail deep inside a training run) and a half-written frame file a
killed recording left (LeRobot's loader would end in a traceback)."""

import shutil

import pytest

from chess_sim.cli import main
from chess_sim.data.integrity import DatasetFilesError, checked_metadata

pytestmark = pytest.mark.slow  # the shared recorded dataset


def damaged(demos, tmp_path, how: str):
    root = tmp_path / "damaged"
    shutil.copytree(demos, root)
    if how == "data":
        next((root / "data").rglob("*.parquet")).unlink()
    elif how == "stray":  # what a recording killed while saving its next episode leaves
        (root / "data" / "chunk-000" / "file-001.parquet").write_bytes(b"PAR1 half")
    else:
        video = next((root / "videos").rglob("*.mp4"))
        video.write_bytes(video.read_bytes()[:3000])
    return root


def test_an_intact_recording_passes(demos):
    assert checked_metadata(demos).total_episodes == 1


DAMAGES = [("data", "is missing data/"), ("video", "damaged video videos/"), ("stray", "no saved episode")]


@pytest.mark.parametrize("how, words", DAMAGES)
def test_a_damaged_dataset_is_refused(demos, tmp_path, how, words):
    with pytest.raises(DatasetFilesError, match=words):
        checked_metadata(damaged(demos, tmp_path, how))


@pytest.mark.parametrize("how, words", DAMAGES)
@pytest.mark.parametrize("verb", ["inspect", "train"])
def test_the_cli_says_it_in_one_line(demos, tmp_path, capsys, how, words, verb):
    root = damaged(demos, tmp_path, how)
    argv = (["record", "--inspect", str(root)] if verb == "inspect"
            else ["train", "--dataset", str(root), "--out", str(tmp_path / "run"), "--steps", "1"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
