"""JSON-lines logs: a line cut by a kill is skipped, and `keep` rewrites only complete, wanted records."""

from chess_sim import jsonl


def test_append_read_and_keep_skip_a_cut_line(tmp_path):
    path = tmp_path / "log.jsonl"
    assert jsonl.read(path) == []
    assert jsonl.keep(path, lambda record: True) == [] and not path.exists()
    for step in (1, 2, 3):
        jsonl.append(path, {"step": step})
    with open(path, "a") as log:
        log.write('{"step": 4, "lo')  # killed mid-write
    assert jsonl.read(path) == [{"step": 1}, {"step": 2}, {"step": 3}]
    assert jsonl.keep(path, lambda record: record["step"] <= 2) == [{"step": 1}, {"step": 2}]
    jsonl.append(path, {"step": 3})
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n{"step": 3}\n'
