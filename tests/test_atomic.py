"""Atomic files and folders, including a kill between the two renames of a folder swap."""

from chess_sim import atomic


def test_write_dir_replaces_the_whole_folder(tmp_path):
    target = tmp_path / "last"
    atomic.write_dir(target, lambda d: (d / "a.txt").write_text("1"))
    atomic.write_dir(target, lambda d: (d / "b.txt").write_text("2"))
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]  # no staging or old copy left


def test_recover_dir_after_a_kill_between_the_renames(tmp_path):
    target = tmp_path / "last"
    atomic.write_dir(target, lambda d: (d / "a.txt").write_text("1"))
    target.rename(tmp_path / ".last.old")  # the kill: old moved aside, new not yet renamed in
    atomic.recover_dir(target)
    assert (target / "a.txt").read_text() == "1"
    atomic.write_dir(target, lambda d: (d / "c.txt").write_text("3"))
    assert (target / "c.txt").read_text() == "3"


def test_write_text_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "sub" / "summary.json"
    atomic.write_text(path, "{}")
    assert path.read_text() == "{}" and [p.name for p in path.parent.iterdir()] == ["summary.json"]
