"""Seven trivial tests, sharded: check_shards.py (Bazel shards partition them) and check_cache.py
(probe_durations: recorded durations re-run only their own target)."""


def test_a():
    pass


def test_b():
    pass


def test_c():
    pass


def test_d():
    pass


def test_e():
    pass


def test_f():
    pass


def test_g():
    pass
