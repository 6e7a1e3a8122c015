"""Tests of data.chunked: per-file work in chunks of paths, results in the paths' order."""

from tfaccel.data import chunked

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_results_keep_the_order_of_the_paths_across_chunks_and_threads():
    paths = [f"f{i:03d}" for i in range(100)]
    assert chunked.map_paths(str.upper, paths, chunk=7, workers=4) == [p.upper() for p in paths]


def test_one_task_per_chunk_not_per_file(monkeypatch):
    # The pool gets ceil(n / chunk) tasks: 10 files in chunks of 3 is 4 tasks, not 10.
    submitted = []
    original = chunked.ThreadPoolExecutor.map

    def counting_map(self, fn, *iterables, **kwargs):
        items = list(iterables[0])
        submitted.append(len(items))
        return original(self, fn, items, **kwargs)

    monkeypatch.setattr(chunked.ThreadPoolExecutor, "map", counting_map)
    assert chunked.map_paths(len, [str(10 ** i) for i in range(10)], chunk=3) == list(
        range(1, 11))
    assert submitted == [4]


def test_a_single_chunk_runs_without_threads(monkeypatch):
    monkeypatch.setattr(chunked, "ThreadPoolExecutor", None)  # would fail if used
    assert chunked.map_paths(len, ["a", "bb"], chunk=5) == [1, 2]
