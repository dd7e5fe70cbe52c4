"""Seven trivial tests for tools/selftest/check_shards.sh: Bazel's shards must partition them."""


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
