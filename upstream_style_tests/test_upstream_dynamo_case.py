"""Upstream style: a dynamo test on torch._dynamo's own TestCase, which imports common_utils.

Its deps must be //test_utils:torch_testing (expecttest, numpy) although the file names no
torch.testing module; `functorch` ships inside torch (no label of its own).
"""

import torch
import torch._dynamo.test_case
import torch._dynamo.testing
from functorch import make_fx


class TestCompileCounts(torch._dynamo.test_case.TestCase):
    def test_one_graph_for_straight_line_code(self):
        counter = torch._dynamo.testing.CompileCounter()

        @torch.compile(backend=counter)
        def double_then_shift(x):
            return x * 2 + 1

        x = torch.arange(4.0)
        self.assertEqual(double_then_shift(x), x * 2 + 1)
        self.assertEqual(counter.frame_count, 1)

    def test_make_fx_traces_the_ops(self):
        graph = make_fx(lambda x: torch.sin(x) + 1)(torch.ones(3))
        targets = {str(node.target) for node in graph.graph.nodes}
        self.assertIn("aten.sin.default", targets)


if __name__ == "__main__":
    torch._dynamo.test_case.run_tests()
