"""The disk cache of slow deterministic results (acvi_tf/utils/disk_cache.py) and the
tables' bootstraps through it: a second render reads what the first computed, and any
change of input or code computes again."""

import numpy as np
import pytest

from acvi_tf.utils import disk_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value
    return compute, calls


def test_same_parts_are_computed_once_and_other_parts_again(cache):
    compute, calls = _counting({"p": 0.25, "ci95": [1.0, 2.0]})
    parts = ["a b c", np.arange(6).reshape(2, 3), 10_000]
    assert disk_cache.cached("ns", parts, compute) == {"p": 0.25, "ci95": [1.0, 2.0]}
    assert disk_cache.cached("ns", parts, compute) == {"p": 0.25, "ci95": [1.0, 2.0]}
    assert len(calls) == 1 and len(list((cache / "ns").iterdir())) == 1
    for other in (["a b c", np.arange(6).reshape(3, 2), 10_000],   # same numbers, new shape
                  ["a b c", np.arange(6.0).reshape(2, 3), 10_000],  # another dtype
                  ["a b c", np.arange(6).reshape(2, 3), 1_000],
                  ["a b", np.arange(6).reshape(2, 3), 10_000]):
        disk_cache.cached("ns", other, compute)
    assert len(calls) == 5


def test_keys_do_not_collide_across_splits_and_kinds():
    keys = {disk_cache.key_of(p) for p in (
        [["ab", "c"]], [["a", "bc"]], [["abc"]], ["abc"], [[1, 2]], [np.array([1, 2])],
        [1], ["1"], [[["ab"], "c"]])}
    assert len(keys) == 9


def test_a_function_is_keyed_by_its_source():
    def f(x):
        return x + 1

    def g(x):
        return x + 2
    assert disk_cache.key_of([f]) == disk_cache.key_of([f])
    assert disk_cache.key_of([f]) != disk_cache.key_of([g])


def test_a_part_without_a_key_is_computed_every_time(cache):
    compute, calls = _counting(3)
    for _ in range(2):  # a builtin has no source to hash: no key, so no stored result
        assert disk_cache.cached("ns", [len, "x"], compute) == 3
    assert len(calls) == 2 and not cache.exists()


def test_an_empty_setting_turns_it_off_and_a_bad_entry_is_recomputed(cache, monkeypatch):
    compute, calls = _counting([1, 2])
    disk_cache.cached("ns", ["x"], compute)
    entry = next((cache / "ns").iterdir())
    entry.write_text('{"truncated": ')  # a half-written file from elsewhere
    assert disk_cache.cached("ns", ["x"], compute) == [1, 2] and len(calls) == 2
    assert disk_cache.cached("ns", ["x"], compute) == [1, 2] and len(calls) == 2
    monkeypatch.setenv(disk_cache.ENV, "")
    assert disk_cache.cache_dir() is None
    disk_cache.cached("ns", ["x"], compute)
    assert len(calls) == 3


def test_an_unwritable_cache_still_returns_the_result(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")  # the cache's directory would have to be inside a file
    monkeypatch.setenv(disk_cache.ENV, str(blocker / "cache"))
    compute, calls = _counting(7)
    assert disk_cache.cached("ns", ["x"], compute) == 7
    assert disk_cache.cached("ns", ["x"], compute) == 7 and len(calls) == 2


def test_the_tables_bootstraps_read_the_cache_and_equal_a_fresh_computation(cache,
                                                                            monkeypatch):
    from acvi_tf.metrics import significance as sig
    from experiments.tables import significance as table_sig
    rng = np.random.default_rng(0)
    refs = [" ".join(rng.choice(list("abcdefgh"), 8)) for _ in range(40)]
    base = [" ".join(r.split()[:6]) for r in refs]
    cand = [" ".join(r.split()[:7]) for r in refs]
    stats = [[sig.bleu_statistics(h, refs)] * 2 for h in (base, cand)]
    scored = []

    def corpus_bleu(sums):  # the statistic, counting its calls
        scored.append(1)
        return sig.bleu_from_statistics(sums)
    fresh = sig.paired_bootstrap_bleu(base, cand, refs, n_samples=200)
    two_fresh = sig.two_level_bootstrap(stats[0], stats[1], corpus_bleu, 300)
    assert table_sig.cached_paired_bleu(base, cand, refs, 200) == fresh
    assert table_sig.cached_two_level(stats[0], stats[1], corpus_bleu, 300) == two_fresh
    assert len(list(cache.rglob("*.json"))) == 2
    scored.clear()

    def refuse(self):
        raise AssertionError("sacrebleu's bootstrap ran again although its result is cached")
    monkeypatch.setattr("sacrebleu.significance.PairedTest.__call__", refuse)
    assert table_sig.cached_paired_bleu(base, cand, refs, 200) == fresh
    assert table_sig.cached_two_level(stats[0], stats[1], corpus_bleu, 300) == two_fresh
    assert not scored
    # another resample count, or other decodes: computed
    assert table_sig.cached_two_level(stats[0], stats[1], corpus_bleu, 301) != two_fresh
    assert scored
    with pytest.raises(AssertionError, match="ran again"):
        table_sig.cached_paired_bleu(base, cand[:-1] + ["a"], refs, 200)
