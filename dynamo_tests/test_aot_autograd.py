"""Dynamo + AOTAutograd: mutation, aliasing, duplicate-argument guards, grad mode, sequence numbers.

Rewritten from PyTorch's test/dynamo/test_aot_autograd.py. Expectations that changed since that
file was written are asserted as today's behaviour, with a comment saying what changed.
"""

import copy
import os
import re
import unittest
from unittest import mock

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch._functorch.config
import torch.fx.traceback as fx_traceback
import torch.utils._pytree as pytree
from torch._dynamo.testing import CompileCounterWithBackend, rand_strided, same
from torch._functorch.aot_autograd import _aot_export_function, create_functional_call
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.split_module import split_module
from torch.profiler import ProfilerActivity, profile

from test_utils.dynamo import DynamoTestCase, GuardFailures, compile_counter
from test_utils.versions import by_torch_version

# --------------------------------------------------------------------------------------------
# Local helpers
# --------------------------------------------------------------------------------------------


def aot_eager_counter() -> CompileCounterWithBackend:
    """Counts frames and ops like compile_counter(), but runs graphs through AOTAutograd."""
    return CompileCounterWithBackend("aot_eager")


def compile_recording_guard_failures(module):
    """`module` compiled with a counting aot_eager backend; guard-failure reasons are recorded."""
    counter = aot_eager_counter()
    failures = GuardFailures()
    compiled = torch._dynamo.optimize(counter, guard_fail_fn=failures.record)(module)
    return compiled, counter, failures


def dupe_arg_reason(first: str, second: str) -> str:
    """The guard text dynamo reports when two arguments stop being the same tensor."""
    # Changed: the seed expected the frame-local accessors, L['x'] is L['y']; torch 2.11 and
    # 2.13 both print the bare names.
    return f"{first} is {second}"


def outputs_and_input_grads(fn, inputs):
    """Run `fn`, backprop the sum of every grad-requiring output, return (outputs, input grads)."""
    outputs = fn(*inputs)
    for out in pytree.tree_leaves(outputs):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward(retain_graph=True)
    grads = [inp.grad for inp in inputs]
    for inp in inputs:
        inp.grad = None
    return outputs, grads


def assert_same_outputs_and_grads(reference, compiled, inputs):
    """Same outputs, and same input gradients after backprop, for `reference` and `compiled`."""
    ref_out, ref_grads = outputs_and_input_grads(reference, inputs)
    out, grads = outputs_and_input_grads(compiled, inputs)
    torch.testing.assert_close(ref_out, out)
    torch.testing.assert_close(ref_grads, grads)


# Forces torch._functorch.config.error_on_custom_op_aliasing over any patch when set.
ALIASING_FORCE_ENV = "TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING"


def run_dupe_op_scenario():
    """The seed's scenario: a custom op that returns its output twice for small inputs, compiled
    by a backend that splits the graph and calls AOTAutograd once per piece.

    Returns (graphs the backend got, output for 4 elements, output for 6 elements).
    """

    def maybe_dupe_op(x):
        y = x + 1
        z = x + 2
        if x.numel() < 5:
            return y, y
        return y, z

    class TupleOutput(torch.nn.Module):
        """aot_module_simplified wants modules that return a tuple or list."""

        def __init__(self, mod):
            super().__init__()
            self.mod = mod

        def forward(self, *args):
            out = self.mod(*args)
            return out if isinstance(out, (list, tuple)) else (out,)

    def compile_submod(input_mod, args):
        from functorch.compile import nop
        from torch._functorch.aot_autograd import aot_module_simplified

        class AotCompiled(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.original = input_mod
                self.submod = aot_module_simplified(input_mod, args, nop)

            def forward(self, *args):
                return self.submod(*args)

        return AotCompiled()

    graphs_compiled = []

    def split_and_compile(fx_g, example_inps):
        # Two AOTAutograd calls: one for the custom op, one for the mul_ fed by its outputs.
        graphs_compiled.append(fx_g)
        split_gm = split_module(fx_g, None, lambda node: 1 if "mul" in str(node) else 0)
        submod_1_inps = split_gm.submod_0(*example_inps)
        split_gm.submod_0 = compile_submod(TupleOutput(split_gm.submod_0), example_inps)
        split_gm.submod_1 = compile_submod(TupleOutput(split_gm.submod_1), submod_1_inps)
        return split_gm

    with torch.library._scoped_library("aot_test_custom", "DEF") as lib:
        lib.define("maybe_dupe_op(Tensor a) -> (Tensor, Tensor)")
        lib.impl("maybe_dupe_op", maybe_dupe_op, "CPU")
        lib.impl("maybe_dupe_op", maybe_dupe_op, "Meta")

        @torch._dynamo.optimize(split_and_compile)
        def f(a):
            b, c = torch.ops.aot_test_custom.maybe_dupe_op(a)
            return (b.mul_(c),)

        dupe_out = f(torch.ones(4))  # outputs alias: 2 * 2, in place
        distinct_out = f(torch.ones(6))  # distinct outputs: 2 * 3
    return graphs_compiled, dupe_out, distinct_out


# Measured on torch 2.11 (GPU image, 2026-11-23): the compiled LSTM (allow_rnn) returns h_n with
# shape [4, 1, 4, 64] where eager returns [4, 4, 64]; 2.13 and 2.14 match eager. A strict xfail
# there, so a 2.11 build that fixes it XPASSes.
LSTM_ALLOW_RNN_KNOWN_FAILURE = by_torch_version(
    {
        "2.11": "torch 2.11: compiled LSTM (allow_rnn) returns h_n of shape [4, 1, 4, 64], "
        "eager [4, 4, 64] (measured on the H100 image)",
        "2.13": None,
    }
)


class L1ConvNet(torch.nn.Module):
    """Conv -> batch norm -> relu -> residual add -> linear -> L1 loss, used for seq_nr tests."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(16, 16, kernel_size=(1, 1), stride=1, padding="same")
        self.bn1 = torch.nn.BatchNorm2d(num_features=16)
        self.relu1 = torch.nn.ReLU()
        self.fc1 = torch.nn.Linear(in_features=1638400, out_features=1)
        self.loss_fn = torch.nn.L1Loss()

    def forward(self, x, target):
        residual = x
        x = self.relu1(self.bn1(self.conv1(x)))
        x = torch.flatten(x + residual)
        return (self.loss_fn(self.fc1(x), target),)


def l1_conv_net_inputs():
    return torch.rand(100, 16, 32, 32, requires_grad=True), torch.rand(1)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


class AotAutogradFallbackTests(DynamoTestCase):
    def test_LSTM(self):
        # https://github.com/pytorch/torchdynamo/issues/1147
        class Repro(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(64, 64, num_layers=2, bidirectional=True)

            def forward(self, permute):
                return (self.lstm(permute),)

        mod = Repro()
        counter = aot_eager_counter()
        compiled = torch._dynamo.optimize(counter)(mod)
        x = rand_strided((92, 4, 64), (1, 5888, 92), torch.float32, "cpu").requires_grad_(False)

        self.assertTrue(same(mod(x), compiled(x)))
        # Changed: dynamo no longer traces RNN modules unless config.allow_rnn is set, so the
        # LSTM now runs eagerly and no graph reaches aot_eager. (test_LSTM_traced_by_aot_eager
        # covers the traced path.)
        self.assertEqual(counter.frame_count, 0)

    @pytest.mark.xfail(
        LSTM_ALLOW_RNN_KNOWN_FAILURE is not None,
        reason=str(LSTM_ALLOW_RNN_KNOWN_FAILURE),
        raises=AssertionError,
        strict=True,
    )
    def test_LSTM_allow_rnn(self):
        # The seed's scenario with the LSTM traced (config.allow_rnn), which is what the seed
        # exercised before dynamo stopped tracing RNNs by default: one frame through aot_eager,
        # same outputs and input gradient as eager. The input requires grad: see the next test.
        mod = torch.nn.LSTM(64, 64, num_layers=2, bidirectional=True)
        x = rand_strided((92, 4, 64), (1, 5888, 92), torch.float32, "cpu").requires_grad_(True)
        counter = aot_eager_counter()
        with torch._dynamo.config.patch(allow_rnn=True):
            compiled = torch._dynamo.optimize(counter)(mod)
            assert_same_outputs_and_grads(mod, compiled, [x])
        self.assertEqual(counter.frame_count, 1)

    def test_LSTM_allow_rnn_input_without_grad(self):
        # Measured on torch 2.11, 2.13 and 2.14: with an input that does not require grad,
        # AOTAutograd rejects the LSTM's saved parameters. A torch that fixes this fails here.
        mod = torch.nn.LSTM(64, 64, num_layers=2, bidirectional=True)
        x = rand_strided((92, 4, 64), (1, 5888, 92), torch.float32, "cpu")
        with torch._dynamo.config.patch(allow_rnn=True):
            with self.assertRaisesRegex(
                AssertionError, "expected all tensors_saved_with_vc_check to be Tensors"
            ):
                torch._dynamo.optimize(aot_eager_counter())(mod)(x)

    def test_mutation(self):
        # https://github.com/pytorch/torchdynamo/issues/1301
        def add_to_param_without_grad(param, y):
            prev_grad = torch.is_grad_enabled()
            try:
                torch.set_grad_enabled(False)
                param.add_(y)
            finally:
                torch.set_grad_enabled(prev_grad)
            return y

        y = torch.randn(4)
        param = torch.nn.Parameter(torch.randn(4))
        expected_param = param.detach() + y
        compiled = torch._dynamo.optimize("aot_eager")(add_to_param_without_grad)

        # Mutating an autograd leaf under no_grad must not raise, and must really mutate it.
        self.assertIs(compiled(param, y), y)
        torch.testing.assert_close(param.detach(), expected_param)
        self.assertTrue(torch.is_grad_enabled())

    @staticmethod
    def _write_attention_chunk(stack0, scores, apply_sin):
        chunk = scores[:, :, :256, :257]
        if apply_sin:
            stack0 = torch.sin(stack0)
        stack0[:, :-1, :, 256:] = chunk
        return (stack0.view(1, 12, 1024, 513),)

    def test_mutation1(self):
        def fn(stack0, scores):
            return self._write_attention_chunk(stack0, scores, apply_sin=False)

        x = torch.randn(torch.Size([12, 4, 256, 513]))
        y = torch.randn(torch.Size([12, 3, 512, 513]))
        x_ref = x.clone()
        expected = fn(x_ref, y)

        result = torch._dynamo.optimize("aot_eager")(fn)(x, y)
        torch.testing.assert_close(result, expected)
        # The input itself is written to, exactly as in eager.
        torch.testing.assert_close(x, x_ref)

    def test_negative_testing_mutation(self):
        def fn(stack0, scores):
            return self._write_attention_chunk(stack0, scores, apply_sin=True)

        x = torch.randn(torch.Size([12, 4, 256, 513]))
        y = torch.randn(torch.Size([12, 3, 512, 513]))
        x_before = x.clone()
        expected = fn(x.clone(), y)

        result = torch._dynamo.optimize("aot_eager")(fn)(x, y)
        torch.testing.assert_close(result, expected)
        # Only the sin() intermediate is written to; the input stays untouched.
        torch.testing.assert_close(x, x_before)

    def test_negative_testing(self):
        def fn(x, y):
            return torch.sin(x).add_(y)

        x = torch.randn(4)
        y = torch.randn(4)
        result = torch._dynamo.optimize("aot_eager")(fn)(x, y)
        torch.testing.assert_close(result, torch.sin(x) + y)

    def test_call_fn_with_non_const_inputs_aot_safe(self):
        class ModuleSpecialFwd(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(in_channels=3, out_channels=20, kernel_size=(5, 5))

            def _conv_forward(self, x):
                return self.conv._conv_forward(x, self.conv.weight, self.conv.bias)

            def forward(self, x):
                return self._conv_forward(x)

        mod = ModuleSpecialFwd()
        rx = torch.randn([3, 10, 10])
        real = mod(rx)

        graph, _ = torch._dynamo.export(mod)(rx)
        self.assertTrue(same(real, graph(rx)))

        # The exported graph compiles again through aot_eager and still agrees.
        self.assertTrue(same(real, torch._dynamo.optimize("aot_eager")(graph)(rx)))

    def test_call_fn_with_non_const_inputs_aot_unsafe(self):
        class ModuleSpecialFwd(torch.nn.Module):
            def _some_bad_fwd(self, param, y):
                prev_grad = torch.is_grad_enabled()
                try:
                    torch.set_grad_enabled(False)
                    param.add_(y)
                finally:
                    torch.set_grad_enabled(prev_grad)
                return y

            def forward(self, x, y):
                return self._some_bad_fwd(x, y)

        mod = ModuleSpecialFwd()
        x = torch.nn.Parameter(torch.randn(4))
        y = torch.randn([4])
        x_start = x.detach().clone()

        real = mod(x, y)
        graph, _ = torch._dynamo.export(mod)(x, y)
        self.assertTrue(same(real, graph(x, y)))

        # Mutating an autograd leaf under no_grad through aot_eager must not raise.
        result = torch._dynamo.optimize("aot_eager")(graph)(x, y)
        self.assertTrue(same(real, result))
        # Eager, exported and aot_eager calls each added y once.
        torch.testing.assert_close(x.detach(), x_start + 3 * y)

    def _run_control_flow_module(self):
        """Compile a module with a data-dependent branch in a nested method; count its graphs."""

        class ModuleSpecialFwd(torch.nn.Module):
            def _some_bad_fwd(self, param, y):
                if y[0][0] < 3:
                    return y + param
                return param * y

            def forward(self, x, y):
                a = x * y
                a = self._some_bad_fwd(a, a)
                b = x + y
                return a * b

        mod = ModuleSpecialFwd()
        x = torch.nn.Parameter(torch.randn([2, 2]))
        y = torch.randn([2, 2])
        real = mod(x, y)

        counter = compile_counter()
        optimized_mod = torch._dynamo.optimize(counter)(mod)
        self.assertTrue(same(real, optimized_mod(x, y)))
        return counter, optimized_mod, (x, y), real

    def test_call_fn_with_non_const_inputs_aot_unsafe_control_flow(self):
        # Changed: the seed ran with nested_graph_breaks on (dynamo's own TestCase turns it on),
        # which resumes inside the nested method: 2 frames. With the default (off) the graph
        # break splits the caller too: 4 frames. Both keep the same 7 ops.
        counter, optimized_mod, args, real = self._run_control_flow_module()
        self.assertEqual((counter.frame_count, counter.op_count), (4, 7))

        torch._dynamo.reset()
        with torch._dynamo.config.patch(nested_graph_breaks=True):
            nested_counter, _, _, _ = self._run_control_flow_module()
        self.assertEqual((nested_counter.frame_count, nested_counter.op_count), (2, 7))

        # The already-optimized module can be wrapped again with aot_eager.
        torch._dynamo.reset()
        self.assertTrue(same(real, torch._dynamo.optimize("aot_eager")(optimized_mod)(*args)))

    # Note [Dynamo recompilation guarding invalid grad]
    # Calling aot_autograd with a tensor whose requires_grad differs from the traced one would trip
    # its debug asserts; dynamo must guard on requires_grad and recompile instead. Dynamo hands
    # fake tensors to aot_autograd, which is what makes this a "fake" test.
    @torch._functorch.config.patch(debug_assert=True)
    def test_requires_grad_fake_via_dynamo_recompiles(self):
        class F(torch.nn.Module):
            def forward(self, x, y):
                return (x + y,)

        x = torch.randn(3, 3, requires_grad=True)
        y = torch.randn(3, 3, requires_grad=True)
        z = torch.randn(3, 3, requires_grad=False)

        fxy, counter, failures = compile_recording_guard_failures(F())
        assert_same_outputs_and_grads(F(), fxy, (x, y))
        assert_same_outputs_and_grads(F(), fxy, (x, z))
        self.assertEqual(counter.frame_count, 2)
        self.assertEqual(len(failures), 1)
        # Changed: the guard names the argument bare ('y', formerly 'L['y']'), on 2.11 and 2.13.
        expected = "tensor 'y' requires_grad mismatch. expected requires_grad=1"
        self.assertIn(expected, failures[0])

        torch._dynamo.reset()
        fxz, counter, failures = compile_recording_guard_failures(F())
        assert_same_outputs_and_grads(F(), fxz, (x, z))
        assert_same_outputs_and_grads(F(), fxz, (x, z))
        self.assertEqual(counter.frame_count, 1)
        self.assertEqual(failures, [])

    def _assert_double_backward_raises(self, grad_output):
        err = "torch.compile with aot_autograd does not currently support double backward"
        x = torch.tensor(1.0, requires_grad=True)

        # The three variants below differ only in where the compiled region ends.
        # (1) Both backwards inside the compiled function.
        def double_backward_inside(x):
            y = x.sin().exp()
            (gx,) = torch.autograd.grad(y, x, create_graph=True, grad_outputs=grad_output)
            torch.autograd.grad(gx, x)
            return gx

        double_backward_inside(x)  # fine in eager
        with self.assertRaisesRegex(RuntimeError, err):
            torch.compile(backend="aot_eager")(double_backward_inside)(x)

        # (2) The second backward outside the compiled function.
        def first_backward_inside(x):
            y = x.sin().exp()
            (gx,) = torch.autograd.grad(y, x, create_graph=True, grad_outputs=grad_output)
            return gx

        gx = torch.compile(backend="aot_eager")(first_backward_inside)(x)
        with self.assertRaisesRegex(RuntimeError, err):
            torch.autograd.grad(gx, x)

        # (3) Both backwards outside the compiled function.
        def forward_only(x):
            return x.sin().exp()

        y = torch.compile(backend="aot_eager")(forward_only)(x)
        (gx,) = torch.autograd.grad(y, x, create_graph=True, grad_outputs=grad_output)
        with self.assertRaisesRegex(RuntimeError, err):
            torch.autograd.grad(gx, x)

    def test_double_backward_errors(self):
        # Remove this test once double backward through compiled code is supported.
        for grad_output in (torch.tensor(1.0, requires_grad=True), None):
            with self.subTest(grad_output=grad_output):
                self._assert_double_backward_raises(grad_output)

        # A single backward (create_graph=False) through compiled code works.
        def forward_only(x):
            return x.sin().exp()

        x = torch.tensor(1.0, requires_grad=True)
        y = torch.compile(backend="aot_eager")(forward_only)(x)
        (gx,) = torch.autograd.grad(y, x, create_graph=False)
        torch.testing.assert_close(gx, torch.cos(x) * torch.exp(torch.sin(x)))

    @torch._functorch.config.patch(debug_assert=True)
    def test_arg_dupe_via_dynamo_recompiles(self):
        class F(torch.nn.Module):
            def forward(self, x, y):
                x = x.trunc_()
                y = y.trunc_()
                return (x + y,)

        x = torch.randn(3, 3, requires_grad=True)
        x1, x2, x3, x4 = x.clone(), x.clone(), x.clone(), x.clone()
        y = torch.randn(3, 3, requires_grad=True)
        y1, y2, y4 = y.clone(), y.clone(), y.clone()

        # Distinct tensors twice: one graph serves both calls.
        fxy, counter, failures = compile_recording_guard_failures(F())
        fxy(x1, y1)
        fxy(x2, y2)
        self.assertEqual(failures, [])
        self.assertEqual(counter.frame_count, 1)

        # The same tensor passed twice, then distinct ones: the aliasing guard recompiles.
        torch._dynamo.reset()
        fxx, counter, failures = compile_recording_guard_failures(F())
        fxx(x3, x3)
        fxx(x4, y4)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("x", "y"), failures[-1])

    def _trunc_sum_with_param_module(self, closed_over=None):
        """forward(a, b, e, f) truncates a and b in place; adds `closed_over` too when given."""

        class F(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mean = torch.nn.Parameter(torch.randn(3, 3))

            def forward(self, a, b, e, f):
                a.trunc_()
                b.trunc_()
                total = a + b + self.mean
                if closed_over is not None:
                    total = total + closed_over
                return total * e * f

        return F()

    def test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg(self):
        a = torch.randn(3, 3, requires_grad=True)
        b = torch.randn(3, 3, requires_grad=True)
        a1, a2 = a.clone(), a.clone()
        b2 = b.clone()

        f, counter, failures = compile_recording_guard_failures(self._trunc_sum_with_param_module())
        f(a1, a1, 2, 2)
        f(a2, b2, 2, 2)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

        torch._dynamo.reset()
        c = torch.randn(3, 3, requires_grad=True)
        d = torch.randn(3, 3, requires_grad=True)
        c3, c4 = c.clone(), c.clone()
        d4 = d.clone()

        f, counter, failures = compile_recording_guard_failures(self._trunc_sum_with_param_module())
        f(c3, c3, 3, 3)
        f(c4, d4, 3, 3)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

    @torch._functorch.config.patch(debug_assert=True)
    def test_arg_dupe_via_dynamo_recompiles_many_with_global(self):
        a = torch.randn(3, 3, requires_grad=True)
        b = torch.randn(3, 3, requires_grad=True)
        a1, a2 = a.clone(), a.clone()
        b2 = b.clone()

        # The module also reads a tensor from its enclosing scope, which is `a` itself.
        f, counter, failures = compile_recording_guard_failures(
            self._trunc_sum_with_param_module(closed_over=a)
        )
        f(a1, a1, 2, 2)
        f(a2, b2, 2, 2)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

    def test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list(self):
        class F(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mean = torch.nn.Parameter(torch.randn(3, 3))

            def forward(self, e, f, a, b):
                a.trunc_()
                b.trunc_()
                return (a + b + self.mean) * e[0] * f[0]

        a = torch.randn(3, 3, requires_grad=True)
        b = torch.randn(3, 3, requires_grad=True)
        a1, a2 = a.clone(), a.clone()
        b2 = b.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f([3, 2, 1], [4, 5, 6], a1, a1)
        f([3, 2, 1], [4, 5, 6], a2, b2)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

        torch._dynamo.reset()
        c = torch.randn(3, 3, requires_grad=True)
        d = torch.randn(3, 3, requires_grad=True)
        c3, c4 = c.clone(), c.clone()
        d4 = d.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f([3, 2, 1], [4, 5, 6], c3, c3)
        f([3, 2, 1], [4, 5, 6], c4, d4)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

    def test_arg_dupe_via_dynamo_recompiles_many_args_param(self):
        class F(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mean = torch.nn.Parameter(torch.randn(3, 3))

            def forward(self, a, b):
                a.trunc_()
                b.trunc_()
                return a + b + self.mean

        a = torch.randn(3, 3, requires_grad=True)
        b = torch.randn(3, 3, requires_grad=True)
        a1, a2 = a.clone(), a.clone()
        b2 = b.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f(a1, a1)
        f(a2, b2)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

        torch._dynamo.reset()
        c = torch.randn(3, 3, requires_grad=True)
        d = torch.randn(3, 3, requires_grad=True)
        c3, c4 = c.clone(), c.clone()
        d4 = d.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f(c3, c3)
        f(c4, d4)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

    def test_arg_dupe_via_dynamo_recompiles_many_args(self):
        class F(torch.nn.Module):
            def forward(self, a, b, c, d):
                a.trunc_()
                b.trunc_()
                c.trunc_()
                d.trunc_()
                return (a + b + c + d,)

        a = torch.randn(3, 3, requires_grad=True)
        b = torch.randn(3, 3, requires_grad=True)
        a1, a2, a3, a4 = a.clone(), a.clone(), a.clone(), a.clone()
        b2, b3, b4 = b.clone(), b.clone(), b.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f(a1, a1, a1, a1)
        f(a2, b2, b2, b2)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("a", "b"), failures[-1])

        # Only the last two arguments alias: the guard names exactly that pair.
        torch._dynamo.reset()
        c = torch.randn(3, 3, requires_grad=True)
        d = torch.randn(3, 3, requires_grad=True)
        c3, c4 = c.clone(), c.clone()
        d4 = d.clone()

        f, counter, failures = compile_recording_guard_failures(F())
        f(a3, b3, c3, c3)
        f(a4, b4, c4, d4)
        self.assertEqual(counter.frame_count, 2)
        self.assertIn(dupe_arg_reason("c", "d"), failures[-1])

    def test_alias_inputs(self):
        def fn():
            a = torch.tensor([1])
            a = a[0:1]
            b = a.squeeze()
            a[0] = 0
            if a[0] < 1e5:
                pass
            a[0] = 2
            return b

        ref_output = fn()
        actual_output = torch._dynamo.optimize("aot_eager")(fn)()
        # b is a view of a, so it sees the last write.
        torch.testing.assert_close(ref_output, torch.tensor(2))
        torch.testing.assert_close(ref_output, actual_output)

    def test_grad_inputs_alias_inputs(self):
        class Test(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x)
                return y

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                # The gradient for x is x itself: a grad input aliasing a forward input.
                return x, grad

        def fn(x, y):
            return Test.apply(x, y)

        x = torch.ones(1, requires_grad=True)
        y = torch.ones(1, requires_grad=True)
        out = torch.compile(fn, backend="aot_eager")(x, y)
        out.sum().backward()
        torch.testing.assert_close(x.grad, torch.ones(1))
        torch.testing.assert_close(y.grad, torch.ones(1))

    # The seed also marked this expectedFailureDynamic (pytorch#103539); that only applies to the
    # dynamic-shapes rerun of the suite, which this repository does not run.
    @torch._dynamo.config.patch(automatic_dynamic_shapes=False)
    @torch._functorch.config.patch(debug_assert=True)
    def test_multiple_aot_autograd_calls_dupe_args(self):
        # Changed: a custom op returning one tensor twice now trips AOTAutograd's custom-op
        # aliasing check on the first call of the compiled graph. torch's switch
        # `error_on_custom_op_aliasing` defaults to bool(os.getenv("CI")) at import: a warning
        # on a developer's machine, an error under CI (`.ci/run` sets CI=true). Both settings
        # are run explicitly, so the expectation does not depend on where the test runs.
        self.assertNotIn(ALIASING_FORCE_ENV, os.environ, "it would override both settings")
        aliasing_message = r"maybe_dupe_op .*may not alias any inputs to this custom operator"
        with torch._functorch.config.patch(error_on_custom_op_aliasing=False):
            with self.assertWarnsRegex(UserWarning, aliasing_message) as warned:
                graphs_compiled, dupe_out, distinct_out = run_dupe_op_scenario()
        self.assertIn("deprecated", str(warned.warning))
        # The split graph hands back its submodule's output wrapped once more; unwrap it.
        torch.testing.assert_close(pytree.tree_leaves(dupe_out), [torch.full((4,), 4.0)])
        torch.testing.assert_close(pytree.tree_leaves(distinct_out), [torch.full((6,), 6.0)])
        # Static shapes: the second input size compiles a second graph.
        self.assertEqual(len(graphs_compiled), 2)

        torch._dynamo.reset()
        with torch._functorch.config.patch(error_on_custom_op_aliasing=True):
            with self.assertRaisesRegex(RuntimeError, aliasing_message):
                run_dupe_op_scenario()

    def test_nn_parameter_construction(self):
        # https://github.com/pytorch/pytorch/issues/99569
        def fn(x):
            y = x.sin()
            z = torch.nn.Parameter(torch.ones(1))
            return y + z

        x = torch.rand((4, 4))
        opt_fn = torch._dynamo.optimize("aot_eager")(fn)
        self.assertTrue(same(fn(x), opt_fn(x)))

    def test_aot_sequence_nr(self):
        # The seed lost this test's header; rebuilt from its expected table. The joint graph's
        # forward and backward nodes carry the autograd sequence number of the forward op they
        # come from, so backward nodes pair up with their forward nodes.
        mod = L1ConvNet()
        mod.train()
        x, target = l1_conv_net_inputs()
        graph_module, _ = torch._dynamo.export(mod)(x, target)

        named = {
            **dict(graph_module.named_parameters(remove_duplicate=False)),
            **dict(graph_module.named_buffers(remove_duplicate=False)),
        }
        params_flat, params_spec = pytree.tree_flatten(named)
        functional = create_functional_call(graph_module, params_spec, len(params_flat))

        with torch.enable_grad(), fx_traceback.preserve_node_meta():
            joint, *_ = _aot_export_function(
                functional,
                [*params_flat, x, target],
                decompositions=None,
                num_params_buffers=len(params_flat),
                no_tangents=True,
            )

        rows = ["SeqNr|OrigAten|SrcFn"]
        first_seq_nr = None
        for node in joint.graph.nodes:
            if not node.op.startswith("call_") or "getitem" in str(node.target):
                continue
            seq_nr = node.meta.get("seq_nr", -1)
            if seq_nr < 0:
                continue
            if first_seq_nr is None:
                first_seq_nr = seq_nr
            source_fn_stack = node.meta.get("source_fn_stack", [])
            source_fn = source_fn_stack[-1][0] if source_fn_stack else ""
            rows.append(f"{seq_nr - first_seq_nr}|{node.meta.get('original_aten', '')}|{source_fn}")

        # Changed since the seed: SrcFn names the traced call (conv2d, batch_norm, linear, ...)
        # instead of the module attribute (l__self___conv1, ...), and relu leaves one detach in
        # each direction instead of two. Sequence numbers are unchanged. Same table on 2.11.
        expected = [
            "SeqNr|OrigAten|SrcFn",
            "0|aten.convolution.default|conv2d",
            "0|aten.add.Tensor|add_",
            "1|aten._native_batch_norm_legit_functional.default|batch_norm",
            "2|aten.relu.default|relu",
            "2|aten.detach.default|relu",
            "3|aten.add.Tensor|add",
            "4|aten.view.default|flatten",
            "5|aten.view.default|linear",
            "6|aten.t.default|linear",
            "7|aten.addmm.default|linear",
            # Changed in 2.15: the view of linear's addmm output back to the input's shape is
            # recorded as aten._unsafe_view.default (aten.view.default up to 2.14).
            by_torch_version(
                {"2.11": "8|aten.view.default|linear", "2.15": "8|aten._unsafe_view.default|linear"}
            ),
            "9|aten.sub.Tensor|l1_loss",
            "10|aten.abs.default|l1_loss",
            "11|aten.mean.default|l1_loss",
            "11|aten.ones_like.default|",
            "11|aten.expand.default|",
            "11|aten.div.Scalar|",
            "10|aten.sgn.default|",
            "10|aten.mul.Tensor|",
            "8|aten.view.default|",
            "7|aten.t.default|",
            "7|aten.mm.default|",
            "7|aten.t.default|",
            "7|aten.mm.default|",
            "7|aten.t.default|",
            "7|aten.sum.dim_IntList|",
            "7|aten.view.default|",
            "6|aten.t.default|",
            "5|aten.view.default|",
            "4|aten.view.default|",
            "2|aten.detach.default|",
            "2|aten.threshold_backward.default|",
            "1|aten.native_batch_norm_backward.default|",
            "0|aten.convolution_backward.default|",
            "11|aten.add.Tensor|",
        ]
        self.maxDiff = None
        self.assertEqual(rows, expected)

    def test_split_with_sizes_aot_autograd_cleans_up_traceback_meta(self):
        from torch._functorch.aot_autograd import setup_stacktrace_preservation_hooks

        def fn(result, split_sizes):
            return torch.ops.aten.split_with_sizes(result, split_sizes.tolist())

        example_inputs = (torch.randn(32, requires_grad=True), torch.tensor((7, 16, 9)))
        outs = fn(*example_inputs)
        setup_stacktrace_preservation_hooks([out.grad_fn for out in outs])

        # Registered after the preservation hooks, so it sees the metadata they set.
        meta_during_backward = []
        outs[0].grad_fn.register_prehook(
            lambda grad_outputs: meta_during_backward.append(dict(fx_traceback.current_meta))
        )
        with fx_traceback.preserve_node_meta():
            (outs[0].sum() + outs[1].sum() + outs[2].sum()).backward()

        self.assertIn("grad_fn_seq_nr", meta_during_backward[0])
        self.assertIn("in_grad_fn", meta_during_backward[0])
        self.assertNotIn("grad_fn_seq_nr", fx_traceback.current_meta)
        self.assertNotIn("in_grad_fn", fx_traceback.current_meta)

    def test_aot_export_joint_simple_repro(self):
        # https://github.com/pytorch/pytorch/issues/110121
        class Mod(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(5, 7)

            def forward(self, x):
                return self.linear(x)

        backend_calls = []

        def mini_backend(gm, sample_inputs):
            from torch._functorch.aot_autograd import aot_export_joint_simple

            backend_calls.append(gm)
            fake_mode = torch._dynamo.utils.detect_fake_mode(sample_inputs)
            with mock.patch.object(fake_mode, "allow_non_fake_inputs", True), fake_mode:
                return aot_export_joint_simple(gm, sample_inputs, trace_joint=False)

        sample_inputs = [torch.rand((3, 4, 5))]
        model = Mod()
        m_compiled = torch.compile(model, backend=mini_backend)

        torch.testing.assert_close(model(*sample_inputs), m_compiled(*sample_inputs))
        self.assertEqual(len(backend_calls), 1)

    def test_eager_sequence_nr(self):
        mod = L1ConvNet()
        x, target = l1_conv_net_inputs()
        grad_output = torch.tensor(1.0, requires_grad=True)

        def grad_with_create_graph(mod, x, target):
            y = mod(x, target)
            # create_graph=True keeps the backward ops recording sequence numbers.
            (gx,) = torch.autograd.grad(y[0], x, create_graph=True, grad_outputs=grad_output)
            return gx

        compiled = torch.compile(backend="aot_eager")(grad_with_create_graph)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as kineto_prof:
            compiled(mod, x, target)

        backward_seq_nrs = {
            event.sequence_nr
            for event in kineto_prof.events()
            if event.sequence_nr >= 0 and re.search(r"Backward[01]", event.name)
        }
        # Changed: the seed expected 13 but asserted it vacuously (assertTrue(len(...), 13)).
        # Measured on 2.11 and 2.13: one backward node per differentiable forward op (conv, batch
        # norm, relu, add, flatten's view, linear's view/t/addmm/view, sub, abs, mean), numbered
        # consecutively.
        self.assertEqual(len(backward_seq_nrs), 12)
        first = min(backward_seq_nrs)
        self.assertEqual(sorted(backward_seq_nrs), list(range(first, first + 12)))

    def test_aot_grad_mode_mutation(self):
        for compiler in ["aot_eager", "inductor"]:
            with self.subTest(compiler=compiler):

                def f(x):
                    y = x * x
                    torch.set_grad_enabled(False)
                    return y.clone(), y

                f_compiled = torch.compile(f, backend=compiler, fullgraph=True)
                try:
                    torch.set_grad_enabled(True)
                    x = torch.ones(3, requires_grad=True) * 3
                    y_ref = f(x)
                    self.assertFalse(torch.is_grad_enabled())
                    torch.set_grad_enabled(True)
                    y = f_compiled(x)
                    # The compiled function replays the grad-mode change for its caller.
                    self.assertFalse(torch.is_grad_enabled())
                finally:
                    torch.set_grad_enabled(True)
                torch.testing.assert_close(y_ref, y)

                # Only the output produced before grad mode was turned off has a grad_fn.
                self.assertIsNone(y_ref[0].grad_fn)
                self.assertIsNone(y[0].grad_fn)
                self.assertIsNotNone(y_ref[1].grad_fn)
                self.assertIsNotNone(y[1].grad_fn)

                # Same gradient for the input; y[0] needs no tangent, hence the None.
                tangent = torch.tensor([-1.0, 2.0, 0.0])
                torch.testing.assert_close(
                    sum(y_ref[1].grad_fn(tangent)),
                    sum(g for g in y[1].grad_fn.apply(None, tangent) if g is not None),
                )

    def test_aot_autograd_raises_invalid_leaf_set(self):
        @torch.compile
        def f(x):
            x.set_(torch.ones(2))

        # Same error as eager: set_ on a leaf that requires grad is an in-place op on it.
        x = torch.ones(2, requires_grad=True)
        with self.assertRaisesRegex(RuntimeError, "is being used in an in-place operation"):
            f(x)

    def test_aot_autograd_expand_mutation_functionalizes(self):
        def fn(x):
            y = x.expand(3, *x.shape)
            y[0, 0].add_(5)
            return y

        opt_fn = torch.compile(fn, backend="aot_eager")
        x = torch.arange(6)
        x_opt = x.clone().detach()
        torch.testing.assert_close(fn(x), opt_fn(x_opt))
        # The write through the expanded view lands in the input, as in eager.
        torch.testing.assert_close(x_opt[0], torch.tensor(5))
        torch.testing.assert_close(x, x_opt)

    def test_aot_autograd_expand_mutation_backwards(self):
        def fn(x, z):
            y = x.expand(3, *x.shape)
            y[1, 1].mul_(5)
            return y * z

        opt_fn = torch.compile(fn, backend="aot_eager")
        x = torch.arange(6, dtype=torch.float)
        z = x.clone().detach()
        x_opt = x.clone().detach()
        z_opt = x.clone().detach()
        z.requires_grad = True
        z_opt.requires_grad = True

        res = fn(x, z)
        opt_res = opt_fn(x_opt, z_opt)
        torch.testing.assert_close(res, opt_res)

        res.sum().backward()
        opt_res.sum().backward()
        torch.testing.assert_close(x, x_opt)
        torch.testing.assert_close(x_opt[1], torch.tensor(5.0))
        torch.testing.assert_close(z.grad, z_opt.grad)

    def test_data_ptr_access_copy(self):
        with torch._functorch.config.patch(fake_tensor_allow_unsafe_data_ptr_access=False):
            with FakeTensorMode():
                x = torch.randn(3)
                y = copy.copy(x)
        # Copying a fake tensor must not need its data pointer.
        self.assertEqual(y.shape, x.shape)

    def test_data_ptr_access_fails_in_forward(self):
        with torch.library._scoped_library("aot_test_dataptr", "FRAGMENT") as lib:
            torch.library.define("aot_test_dataptr::foo", "(Tensor x) -> Tensor", lib=lib)

            @torch.library.impl("aot_test_dataptr::foo", "CompositeImplicitAutograd", lib=lib)
            def _(x):
                x.data_ptr()
                return x.clone()

            x = torch.randn(3)

            def data_ptr_graph_input(x):
                return torch.ops.aot_test_dataptr.foo(x)

            def data_ptr_graph_intermediate(x):
                return torch.ops.aot_test_dataptr.foo(x.clone())

            for f in (data_ptr_graph_input, data_ptr_graph_intermediate):
                with self.subTest(fn=f.__name__):
                    with self.assertRaisesRegex(RuntimeError, "Cannot access data pointer"):
                        make_fx(f, tracing_mode="fake")(x)
                    with self.assertRaisesRegex(RuntimeError, "Cannot access data pointer"):
                        make_fx(f, tracing_mode="symbolic")(x)
                    with self.assertRaisesRegex(RuntimeError, "Cannot access data pointer"):
                        torch.compile(f, backend="eager", fullgraph=True)(x)

    def test_data_ptr_access_fails_in_backward(self):
        with torch.library._scoped_library("aot_test_dataptr", "FRAGMENT") as lib:
            torch.library.define("aot_test_dataptr::foo", "(Tensor x) -> Tensor", lib=lib)
            backward_called = False

            class Foo(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    nonlocal backward_called
                    backward_called = True
                    grad.data_ptr()
                    return grad.clone()

            @torch.library.impl("aot_test_dataptr::foo", "CompositeImplicitAutograd", lib=lib)
            def _(x):
                return Foo.apply(x)

            def f(x):
                return torch.ops.aot_test_dataptr.foo(x)

            x = torch.randn(3, requires_grad=True)
            # AOTAutograd traces the backward at compile time, with fake tensors.
            with self.assertRaisesRegex(RuntimeError, "Cannot access data pointer"):
                torch.compile(f, backend="aot_eager", fullgraph=True)(x)
            self.assertTrue(backward_called)

    # Still fails: the compiled version does not detect several writes to one memory location
    # through an expanded view (eager raises "more than one element of the written-to tensor
    # refers to a single memory location"); aot_eager silently computes a result.
    @unittest.expectedFailure
    def test_aot_autograd_expand_mutation_error(self):
        def fn(x):
            y = x.expand(3, *x.shape)
            y[0:3, 0].add_(5)
            return y

        opt_fn = torch.compile(fn, backend="aot_eager")
        x = torch.arange(6)
        x_opt = x.clone().detach()
        overlap = "refers to a single memory location"
        with self.assertRaisesRegex(RuntimeError, overlap):
            fn(x)
        with self.assertRaisesRegex(RuntimeError, overlap):
            opt_fn(x_opt)


if __name__ == "__main__":
    unittest.main()
