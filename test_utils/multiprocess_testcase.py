"""unittest integration of the multi-process harness: test methods that run in every rank.

    class T(MultiProcessTestCase):
        @per_rank
        def test_x(self): ...          # self.rank, self.device; the process group is up

In the pytest process a @per_rank test only launches the ranks (test_utils.distributed.run_ranks);
each rank rebuilds the TestCase, runs it through unittest and reports its verdict with its own
tracebacks.
"""

import functools
import unittest

import torch
import torch.distributed as dist

from test_utils import rank_process
from test_utils.distributed import default_timeout, module_file, run_ranks
from test_utils.numerics import seed_all
from tools.hardware import probe, variants


def _no_fixture() -> None:
    pass


class MultiProcessTestCase(unittest.TestCase):
    """Base for tests whose @per_rank methods run in every rank.

    In a rank: self.rank, self.world_size, self.device (cpu, or cuda:<rank>); setUp, the test
    and tearDown run there with the process group initialised. In the pytest process, per_rank
    tests only launch the ranks: setUp and tearDown do not run there (setUpClass does).
    Override world_size, device_type, backend or timeout as class attributes or properties; the
    default world size is the seeds' (torch's tests use torch.cuda.device_count(): every GPU
    the test may use).
    """

    rank: int | None = None  # None in the pytest process

    @property
    def world_size(self) -> int:
        """One rank per leased GPU (the runner leases exactly the variant's); 2 on CPU."""
        if self.device_type == "cuda":
            return probe.visible_gpu_count()
        return 2

    @property
    def device_type(self) -> str:
        return variants.device_type()

    @property
    def backend(self) -> str:
        return "nccl" if self.device_type == "cuda" else "gloo"

    @property
    def timeout(self) -> float:
        return default_timeout()

    @property
    def device(self) -> torch.device:
        if self.rank is None:
            raise RuntimeError("self.device exists only inside a rank (decorate with @per_rank)")
        if self.device_type == "cuda":
            return torch.device("cuda", self.rank)
        return torch.device(self.device_type)

    def run(self, result=None):
        test = getattr(type(self), self._testMethodName, None)
        if self.rank is None and getattr(test, "__per_rank__", False):
            # Fixtures belong to the ranks; here they would only cost time (or touch CUDA).
            self.setUp = self.tearDown = _no_fixture
        return super().run(result)


def per_rank(method):
    """Run a MultiProcessTestCase test method in each of its world_size ranks."""

    @functools.wraps(method)
    def launch(self):
        if self.rank is not None:  # inside a rank: the real test
            return method(self)
        cls = type(self)
        ref = (cls.__module__, module_file(cls.__module__), cls.__qualname__, self._testMethodName)
        label = f"{cls.__qualname__}.{self._testMethodName}"
        run_ranks(
            _run_test_in_rank,
            self.world_size,
            backend=self.backend,
            args=ref,
            timeout=self.timeout,
            label=label,
        )
        return None

    launch.__per_rank__ = True
    return launch


class _RankTestFailed(AssertionError):
    """unittest's verdict in a rank, with its own tracebacks (not this exception's)."""

    def __init__(self, headline: str, report: str):
        super().__init__(headline)
        self.rank_headline = headline
        self.rank_report = report


class _RankResult(unittest.TestResult):
    """Collects one test's outcome in a rank; pytest.skip() counts as a skip, as in pytest."""

    def addError(self, test, err):
        reason = rank_process.skip_reason(err[1])
        if reason is not None:
            self.addSkip(test, reason)
        else:
            super().addError(test, err)


def _run_test_in_rank(module_name: str, file: str | None, class_qualname: str, method_name: str):
    """Rebuild the TestCase in this rank and run it through unittest (setUp, test, tearDown,
    cleanups, subTests), re-raising its outcome for the harness to report."""
    module = rank_process.import_module(module_name, file)
    cls = functools.reduce(getattr, class_qualname.split("."), module)
    case = cls(method_name)
    case.rank = dist.get_rank()
    # Every rank starts from the same RNG state, as with torch's own TestCase: DDP broadcasts
    # rank 0's weights, but FSDP1 shards each rank's own copy, so models must be identical.
    seed_all(0)
    result = _RankResult()
    case.run(result)
    problems = [("raised", text) for _, text in result.errors]
    problems += [("failed:", text) for _, text in result.failures]
    problems += [("failed:", "unexpected success") for _ in result.unexpectedSuccesses]
    if problems:
        verb, text = problems[0]
        last_line = text.strip().splitlines()[-1] if text.strip() else "?"
        report = "\n".join(text for _, text in problems)
        raise _RankTestFailed(f"{verb} {last_line}", report)
    if result.skipped:
        raise unittest.SkipTest(result.skipped[0][1])
