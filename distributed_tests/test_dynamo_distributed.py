"""torch.compile with DDP and FSDP: graph splitting, guards, and compiled-vs-eager parity.

Seed: pytorch test/distributed/test_dynamo_distributed.py. Variants:
  cpu        TestFakeDistributedSingleProc (FakeDDP, no process group), except its gpu tests
  gpu        TestFakeDistributedSingleProc's inductor BERT tests, TestFakeDistributedSingleProcGpu
             (the seed's fake-DDP aot_eager BERT on cuda:0), and TestSingleProc (one process,
             world_size=1 NCCL group)
  multi_gpu  TestMultiProc (2 ranks, one process per rank, NCCL)
  gpu_x4     TestMultiProcX4: the same tests at 4 ranks
  gpu_x8     TestMultiProcX8: the same tests at 8 ranks
  (the seed sizes its multi-process world by torch.cuda.device_count(): one rank per leased GPU)

Where torch changed on purpose the tests assert today's behaviour (see each test's comment):
- FSDP with use_orig_params=False is a graph break now, not an AssertionError.
- DDPOptimizer compiles graphs holding higher-order ops (activation checkpointing) instead of
  rejecting them.
- With skip_fsdp_guards=False, FSDP-managed submodules are guarded as unspecialized nn modules.
- CompileProfiler was retired (torch 2.5); graph breaks are read from dynamo's counters.

BERT comparisons: transformers now runs BERT attention through scaled_dot_product_attention.
With dropout on and fused SDPA kernels on the GPU, eager and compiled runs draw different
attention-dropout masks inside the fused kernel: measured on H200 (torch 2.11, fake DDP,
aot_eager), logits differed by up to 2.04, not by rounding. With math SDPA alone the same run
matches at the seed's tol=1e-4. So the seed's runs use math SDPA and full-fp32 matmuls
(deterministic_numerics) and reseed the RNGs before each run, keeping dropout on and the
tolerance at 1e-4; the *_fused_sdpa tests pin the fused kernel with dropout off at the same
tolerance (see FUSED_SDPA; on torch 2.11 they are strict xfails: compiling that call finds no
fused kernel, see FUSED_SDPA_KNOWN_FAILURES). Every comparison prints and records (test.xml property
max_abs_diff) its largest difference. The seed's hf_bert_fsdp skip ("Inaccurate results with
fused SDPA kernels") is dropped for the same reason.
"""

import collections
import contextlib
import copy
import functools
import io
import itertools
import re
import unittest
from unittest.mock import patch

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch._inductor.config
from torch import nn
from torch._dynamo import config
from torch._dynamo.backends.distributed import DDPOptimizer
from torch._dynamo.comptime import comptime
from torch._dynamo.testing import collect_results
from torch._dynamo.utils import counters, same
from torch._higher_order_ops.wrap import tag_activation_checkpoint
from torch.distributed._functional_collectives import _maybe_wrap_tensor
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy, transformer_auto_wrap_policy
from torch.nn.attention import SDPBackend
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils import _pytree as pytree

from test_utils.distributed import single_process_group
from test_utils.dynamo import DynamoTestCase, graph_break_types
from test_utils.hardware import requires_gpus, requires_nccl, requires_triton
from test_utils.multiprocess_testcase import MultiProcessTestCase, per_rank
from test_utils.numerics import deterministic_numerics, max_abs_diff, seed_all
from test_utils.versions import by_torch_version

BERT_SEED = 1337


# ---------------------------------------------------------------------------------------------
# Models


def init_weights(module):
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        module.bias.data.fill_(0.01)


def mlp_layers(in_feat, hidden_feat, out_feat):
    """Four Linear+ReLU pairs: in -> hidden -> hidden -> hidden -> out."""
    sizes = [in_feat, hidden_feat, hidden_feat, hidden_feat, out_feat]
    return [layer for pair in itertools.pairwise(sizes) for layer in (nn.Linear(*pair), nn.ReLU())]


class ToyModel(nn.Module):
    def __init__(self, in_feat=10, hidden_feat=5000, out_feat=5, ctx_manager=None):
        super().__init__()
        self.ctx_manager = ctx_manager
        self.net = nn.Sequential(*mlp_layers(in_feat, hidden_feat, out_feat))

    def forward(self, inputs):
        if self.ctx_manager is None:
            return self.net(inputs)
        with self.ctx_manager():
            return self.net(inputs)


class MutatingModel(nn.Module):
    """Sets a plain attribute inside forward; the output depends on the new value."""

    def __init__(self, in_feat=10, hidden_feat=5000, out_feat=5):
        super().__init__()
        self.net = nn.Sequential(*mlp_layers(in_feat, hidden_feat, out_feat))
        self.state = 1

    def forward(self, inputs):
        self.state = 2
        return self.net(inputs) * self.state


def build_with_reference(model, device, bsz=20, in_feat=10):
    """Move and initialise `model`; return it, random inputs, and its eager outputs."""
    model = model.to(device)
    model.apply(init_weights)
    inputs = torch.rand(bsz, in_feat).to(device)
    return model, inputs, model(inputs)


def get_model(device, bsz=20, in_feat=10, hidden_feat=5000, out_feat=5, ctx_manager=None):
    model = ToyModel(in_feat, hidden_feat, out_feat, ctx_manager)
    return build_with_reference(model, device, bsz, in_feat)


def get_mutating_model(device, bsz=20, in_feat=10, hidden_feat=5000, out_feat=5):
    return build_with_reference(MutatingModel(in_feat, hidden_feat, out_feat), device, bsz, in_feat)


class ToyInnerModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(100, 100), nn.Linear(100, 100))

    def forward(self, inputs):
        return self.layers(inputs)


class ToyOuterModel(nn.Module):
    def __init__(self, device):
        super().__init__()
        inner = [ToyInnerModel().to(device) for _ in range(2)]
        self.layers = nn.Sequential(inner[0], nn.ReLU(), inner[1], nn.ReLU())

    def forward(self, inputs):
        return self.layers(inputs)


def get_toy_model_for_activation_checkpointing(device):
    model = ToyOuterModel(device).to(device)
    model.apply(init_weights)
    return model, torch.rand(100, 100).to(device)


def find_first_node(gm, target):
    return next((node for node in gm.graph.nodes if node.target is target), None)


def apply_fsdp_with_checkpointing(model, wrap_policy, checkpoint_policy, use_checkpointing=True):
    """FSDP-wrap a copy of `model` (use_orig_params=True), checkpointing the matched modules."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    model = FSDP(copy.deepcopy(model), auto_wrap_policy=wrap_policy, use_orig_params=True)
    if use_checkpointing:
        wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=wrapper, check_fn=checkpoint_policy
        )
    return model


class MyCustomLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(512, 512))

    def forward(self, x):
        tmp = torch.mm(x, self.weight.t())
        return tmp + torch.where(tmp < 0.5, 0.3, 0.6)


class MyLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(512, 512)

    def forward(self, x):
        return self.linear(x)


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        # A custom linear between two regular ones, each followed by a ReLU.
        blocks = [MyLinear(), MyCustomLinear(), MyLinear()]
        self.seq = nn.Sequential(*[layer for block in blocks for layer in (block, nn.ReLU())])

    def forward(self, x, y):
        # `x + y` has no parameters: when the first bucket fills up it must be merged into the
        # previous bucket rather than becoming an empty subgraph of its own.
        return self.seq(x + y)


def get_custom_model(device):
    model = MyModule().to(device)
    model.apply(init_weights)
    x = torch.rand((512, 512)).to(device)
    inputs = (x, x)
    return model, inputs, model(*inputs)


def get_hf_bert(device, *, rank=0, dropout=True):
    """A randomly initialised BERT masked-LM (built from its config, nothing downloaded).

    dropout=False zeroes BertConfig's hidden and attention dropout probabilities.
    """
    from transformers import AutoModelForMaskedLM, BertConfig

    probs = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    batch_size, max_length, config = 4, 512, BertConfig(**probs)
    seed_all(0)  # identical weights on every rank
    model = AutoModelForMaskedLM.from_config(config).to(device)
    seed_all(100 + rank)  # different batches per rank
    input_ids = torch.randint(0, config.vocab_size, (batch_size, max_length), device=device)
    labels = torch.randint(0, config.vocab_size, (batch_size, max_length), device=device)
    model.train()  # dropout on, as in the seed: the RNG is reseeded before each run instead
    return model, {"input_ids": input_ids, "labels": labels}


class CheckSplitsCompiler:
    """A backend that counts how many (sub)graphs it was asked to compile."""

    def __init__(self):
        self.compiler_called = 0

    def compile_fn(self, gm, example_inputs):
        self.compiler_called += 1
        return gm


class FakeDDP(nn.Module):
    """Just enough of DDP for dynamo's DDPOptimizer: an active-module marker and bucket size."""

    def __init__(self, module, bucket_cap_mb=25):
        super().__init__()
        self.module = module
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)

    @contextlib.contextmanager
    def _inside_ddp_forward(self):
        DDP._active_ddp_module = self
        try:
            yield
        finally:
            DDP._active_ddp_module = None

    def forward(self, *inputs, **kwargs):
        with self._inside_ddp_forward():
            return self.module.forward(*inputs, **kwargs)


# ---------------------------------------------------------------------------------------------
# Comparing eager and compiled training steps


def detached_copy(tree):
    return pytree.tree_map(lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x, tree)


def assert_same_results(test, expected, actual, tol=1e-4):
    """`same(expected, actual, tol)`, naming the mismatching leaves when it fails.

    The largest absolute difference over all leaves is recorded as the test case's
    `max_abs_diff` property (test.xml) where the test case records properties.
    """
    diff = max_abs_diff(expected, actual)
    print(f"{test.id()}: max abs diff {diff:.3g} (tol={tol})")  # shown by pytest -s / -rP
    record_property = getattr(test, "record_property", None)
    if record_property is not None:
        record_property("max_abs_diff", f"{diff:.3g}")
    if same(expected, actual, tol=tol):
        return
    flat_expected, _ = pytree.tree_flatten_with_path(expected)
    flat_actual, _ = pytree.tree_flatten_with_path(actual)
    bad = []
    for (path, ref), (_, res) in zip(flat_expected, flat_actual, strict=False):
        if isinstance(ref, torch.Tensor) and not same(ref, res, tol=tol):
            bad.append(f"{pytree.keystr(path)}: max abs diff {max_abs_diff(ref, res):.3g}")
    test.fail(
        f"{len(bad)} results differ at tol={tol}, max abs diff {diff:.3g}: " + "; ".join(bad[:8])
    )


def bert_step(model, inputs):
    """One forward+backward from a fixed RNG state; returns (outputs, loss)."""
    seed_all(BERT_SEED)
    outputs = model(**inputs)
    outputs.loss.backward()
    return outputs, outputs.loss


def run_hf_bert_ddp(test, model, inputs, backend, sdpa_backend=None):
    """Eager and compiled training steps of the same (DDP-wrapped) model must agree.

    Attention runs on `sdpa_backend` alone (default: the math kernel; deterministic_numerics).

    Unlike the seed, the eager results are copied and the gradients cleared before the compiled
    step: both steps use the same parameters, so otherwise the compiled step accumulated into the
    eager gradients and the gradient comparison compared each tensor with itself.
    """
    flat_inputs = list(inputs.values())
    with deterministic_numerics(sdpa_backend):
        outputs, loss = bert_step(model, inputs)
        expected = detached_copy(collect_results(model, outputs.logits, loss, flat_inputs))
        model.zero_grad(set_to_none=True)

        opt_model = torch.compile(model, backend=backend)
        opt_outputs, opt_loss = bert_step(opt_model, inputs)
        actual = collect_results(opt_model, opt_outputs.logits, opt_loss, flat_inputs)
    assert_same_results(test, expected, actual)


def run_hf_bert_fsdp(test, model, inputs, wrap):
    """Eager and inductor-compiled steps of two identical FSDP copies of `model` must agree."""
    flat_inputs = list(inputs.values())
    with deterministic_numerics():
        eager_model = wrap(model)
        outputs, loss = bert_step(eager_model, inputs)
        expected = collect_results(eager_model, outputs.logits, loss, flat_inputs)

        opt_model = torch.compile(wrap(model), backend="inductor")
        opt_outputs, opt_loss = bert_step(opt_model, inputs)
        actual = collect_results(opt_model, opt_outputs.logits, opt_loss, flat_inputs)
    assert_same_results(test, expected, actual)


# Fused attention under compile. BERT runs in fp32 as in the seed; of the fused SDPA kernels only
# the memory-efficient one takes fp32 (flash and cuDNN attention take fp16/bf16 alone), so that
# is the fused kernel these runs pin. Dropout is off: fused kernels draw their dropout masks
# inside the kernel, so eager and compiled runs cannot share them (measured on H200, torch 2.11,
# fake DDP, aot_eager, dropout on: logits differed by up to 2.04).
FUSED_SDPA = SDPBackend.EFFICIENT_ATTENTION

# Backends whose fused-attention step is known to fail, per torch release, with the measured
# reason; the case is then a strict xfail, so a release that fixes it XPASSes and fails the run
# until its entry is removed. An entry is (reason, exception the step raises) for a step that
# cannot run, or (reason, None) for one that runs and misses tol=1e-4 (name the max abs diff).
#
# torch 2.11 (H100, transformers 5.17; measured 2026-11-23): eager BERT runs the memory-efficient
# kernel, but dynamo's fake-tensor run of the same call finds none ("No available kernel"): the
# traced boolean attn_mask (4, 1, 512, 512) has stride(-1) == 0, which GPU fused kernels refuse.
# Neither backend gets as far as comparing numbers.
_NO_FUSED_KERNEL_UNDER_DYNAMO = (
    "torch 2.11: dynamo's fake-tensor SDPA finds no kernel for the memory-efficient backend "
    "(traced attn_mask (4, 1, 512, 512) bool, stride(-1) == 0); eager runs it",
    torch._dynamo.exc.TorchRuntimeError,
)
FUSED_SDPA_KNOWN_FAILURES = by_torch_version(
    {
        "2.11": {
            "aot_eager": _NO_FUSED_KERNEL_UNDER_DYNAMO,
            "inductor": _NO_FUSED_KERNEL_UNDER_DYNAMO,
        }
    }
)


def xfail_if_known_failure(backend):
    reason, raises = FUSED_SDPA_KNOWN_FAILURES.get(backend, (None, None))
    return pytest.mark.xfail(reason is not None, reason=str(reason), raises=raises, strict=True)


class RecordsProperties:
    """Gives unittest-style tests pytest's record_property (test.xml <property> entries)."""

    @pytest.fixture(autouse=True)
    def _bind_record_property(self, record_property):
        self.record_property = record_property


# ---------------------------------------------------------------------------------------------
# cpu (and one gpu) tests: DDPOptimizer without a process group


class TestFakeDistributedSingleProc(RecordsProperties, DynamoTestCase):
    @requires_gpus(1)
    @requires_triton
    @patch.object(config, "optimize_ddp", True)
    @patch.object(torch._inductor.config, "fallback_random", True)
    def test_hf_bert_ddp_inductor(self):
        model, inputs = get_hf_bert("cuda:0")
        run_hf_bert_ddp(self, FakeDDP(model), inputs, "inductor")

    @requires_gpus(1)
    @requires_triton
    @xfail_if_known_failure("inductor")
    @patch.object(config, "optimize_ddp", True)
    @patch.object(torch._inductor.config, "fallback_random", True)
    def test_hf_bert_ddp_inductor_fused_sdpa(self):
        model, inputs = get_hf_bert("cuda:0", dropout=False)
        run_hf_bert_ddp(self, FakeDDP(model), inputs, "inductor", sdpa_backend=FUSED_SDPA)

    @patch.object(config, "optimize_ddp", True)
    def test_hf_bert_ddp_aot_eager(self):
        # CPU: ~65 s and ~7 GB RSS. TestFakeDistributedSingleProcGpu runs it on cuda:0 (the seed's
        # device).
        model, inputs = get_hf_bert("cpu")
        run_hf_bert_ddp(self, FakeDDP(model), inputs, "aot_eager")

    @patch.object(config, "optimize_ddp", True)
    def test_issue90375(self):
        # A graph without parameters (nothing for DDPOptimizer to bucket) must still compile.
        class Model(nn.Module):
            def forward(self):
                return torch.randn(3) * torch.randn(3)

        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        out = torch.compile(FakeDDP(Model()), backend=cnt)()
        self.assertEqual(out.shape, (3,))
        self.assertEqual(cnt.frame_count, 1)

    @patch.object(config, "optimize_ddp", True)
    def test_symbol_splitting(self):
        # DDPOptimizer must split graphs whose shapes are symbolic (dynamic=True).
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight1 = nn.Parameter(torch.randn(512, 512))
                self.weight2 = nn.Parameter(torch.randn(512, 512))

            def forward(self, x):
                x = torch.cat([x, x])
                y = x @ self.weight1
                return x + y @ self.weight2

        model = FakeDDP(Model())
        opt_model = torch.compile(model, dynamic=True)
        for batch in (20, 7):
            x = torch.randn(batch, 512)
            torch.testing.assert_close(opt_model(x), model(x), rtol=1e-4, atol=1e-3)

    @patch.object(config, "optimize_ddp", True)
    def test_call_method_forward(self):
        # Submodules called through an explicit `.forward(...)` inside the DDP-wrapped module.
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList(
                    nn.ModuleList(
                        [nn.LayerNorm(96), nn.MultiheadAttention(96, num_heads=4, batch_first=True)]
                    )
                    for _ in range(2)
                )

            def forward(self, x):
                batch, freq, time, feat = x.shape  # [Batch, Freq, Time, Feature]
                for norm, attention in self.layers:
                    x = norm(x.reshape(batch * freq, time, feat))
                    x, _ = attention.forward(x, x, x)
                    x = x.reshape(batch, freq, time, feat)
                return x

        model = FakeDDP(Model())
        x = torch.randn(2, 129, 100, 96)
        torch.testing.assert_close(torch.compile(model)(x), model(x), rtol=1e-4, atol=1e-4)


@requires_gpus(1)
class TestFakeDistributedSingleProcGpu(RecordsProperties, DynamoTestCase):
    """The seed ran test_hf_bert_ddp_aot_eager on cuda:0; the cpu class keeps a CPU run."""

    @patch.object(config, "optimize_ddp", True)
    def test_hf_bert_ddp_aot_eager(self):
        model, inputs = get_hf_bert("cuda:0")
        run_hf_bert_ddp(self, FakeDDP(model), inputs, "aot_eager")

    @xfail_if_known_failure("aot_eager")
    @patch.object(config, "optimize_ddp", True)
    def test_hf_bert_ddp_aot_eager_fused_sdpa(self):
        model, inputs = get_hf_bert("cuda:0", dropout=False)
        run_hf_bert_ddp(self, FakeDDP(model), inputs, "aot_eager", sdpa_backend=FUSED_SDPA)


# ---------------------------------------------------------------------------------------------
# gpu tests: one process, world_size=1 NCCL group


@requires_gpus(1)
@requires_nccl
class TestSingleProc(DynamoTestCase):
    """Easy-to-debug single-process checks; TestMultiProc covers real multi-rank runs."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.rank, cls.device, cls.device_ids = 0, "cuda:0", [0]
        torch.cuda.set_device(cls.device)
        cls.enterClassContext(single_process_group("nccl", device=cls.device))

    def get_model(self, bsz=20, in_feat=10, hidden_feat=5000, out_feat=5, ctx_manager=None):
        return get_model(self.device, bsz, in_feat, hidden_feat, out_feat, ctx_manager)

    def compile_ddp(self, ddp_module, backend):
        @torch.compile(backend=backend)
        def opt_fn(*inputs):
            return ddp_module(*inputs)

        return opt_fn

    def assert_ddp_optimizer_breaks(self, ddp_module, inputs, expected):
        """dynamo.explain sees the DDPOptimizer's splits as graph breaks."""
        explained = torch._dynamo.explain(ddp_module)(inputs)
        reasons = [r.reason for r in explained.break_reasons]
        self.assertEqual(len(reasons), expected, reasons)
        self.assertTrue(all("DDPOptimizer" in r for r in reasons), reasons)

    @patch.object(config, "optimize_ddp", False)
    def test_ddp_baseline_aot_eager(self):
        m, inputs, correct_outputs = self.get_model()
        ddp_m = torch.compile(DDP(m, device_ids=self.device_ids), backend="aot_eager")
        self.assertTrue(same(correct_outputs, ddp_m(inputs)))

    @requires_triton
    @patch.object(config, "optimize_ddp", False)
    def test_ddp_baseline_inductor(self):
        m, inputs, correct_outputs = self.get_model()
        ddp_m = torch.compile(DDP(m, device_ids=self.device_ids), backend="inductor")
        self.assertTrue(same(correct_outputs, ddp_m(inputs)))

    @patch.object(config, "optimize_ddp", True)
    def test_graph_split(self):
        # 4 Linear layers (the 5000x5000 ones are ~100 MB) with 25 MB buckets: 3 subgraphs.
        m, inputs, correct_outputs = self.get_model()
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=25)
        splits = CheckSplitsCompiler()
        opt_outputs = self.compile_ddp(ddp_m, splits.compile_fn)(inputs)
        self.assertTrue(same(correct_outputs, opt_outputs))
        self.assertEqual(splits.compiler_called, 3)
        self.assert_ddp_optimizer_breaks(ddp_m, inputs, expected=3)

    @patch.object(config, "optimize_ddp", True)
    def test_graph_split_ctx_manager(self):
        # Each subgraph must still run under the context manager active around the model.
        device_type = torch.device(self.device).type
        cases = [
            (
                lambda: torch.autocast(device_type, torch.float16),
                lambda out: self.assertEqual(out.dtype, torch.float16),
            ),
            (torch.enable_grad, lambda out: self.assertTrue(out.requires_grad)),
            (torch.no_grad, lambda out: self.assertFalse(out.requires_grad)),
        ]
        for make_compiler in (CheckSplitsCompiler, lambda: None):
            for ctx_manager, check_output in cases:
                # 1000x1000 fp32 weights are 4 MB each; 3.5 MB buckets hold one layer apiece.
                m, inputs, correct_outputs = self.get_model(
                    in_feat=1000, hidden_feat=1000, out_feat=1000, ctx_manager=ctx_manager
                )
                ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=3.5)
                compiler = make_compiler()
                backend = compiler.compile_fn if compiler else "aot_eager"
                opt_outputs = self.compile_ddp(ddp_m, backend)(inputs)
                self.assertTrue(same(correct_outputs, opt_outputs))
                if compiler:
                    self.assertEqual(compiler.compiler_called, 4)
                check_output(opt_outputs)
                self.assert_ddp_optimizer_breaks(ddp_m, inputs, expected=4)

    @requires_triton
    @patch.object(config, "optimize_ddp", True)
    def test_graph_split_inductor(self):
        # Same split as test_graph_split, compiled by inductor (its fx interface broke before).
        m, inputs, correct_outputs = self.get_model()
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=25)
        self.assertTrue(same(correct_outputs, self.compile_ddp(ddp_m, "inductor")(inputs)))

    @torch._inductor.config.patch(layout_optimization=True, keep_output_stride=False)
    @patch.object(config, "optimize_ddp", True)
    def _check_graph_split_inductor_layout_optimizations(self, context):
        channels = 512  # > 64, so inductor switches the convolutions to channels-last

        def conv_relu():
            return [nn.Conv2d(channels, channels, 1, stride=1, bias=False), nn.ReLU()]

        model = nn.Sequential(*conv_relu(), *conv_relu(), *conv_relu(), *conv_relu())
        with context():
            m = model.to(self.device)
            inputs = torch.rand(2, channels, channels, 128).to(self.device)
            correct_outputs = m(inputs)
            ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=25)
            opt_outputs = self.compile_ddp(ddp_m, "inductor")(inputs)
            self.assertTrue(same(correct_outputs, opt_outputs))

    @requires_triton
    def test_graph_split_inductor_layout_optimizations_training(self):
        self._check_graph_split_inductor_layout_optimizations(contextlib.nullcontext)

    @requires_triton
    def test_graph_split_inductor_layout_optimizations_inference(self):
        self._check_graph_split_inductor_layout_optimizations(torch.no_grad)

    @requires_triton
    @patch.object(config, "optimize_ddp", True)
    def test_graph_split_inductor_transpose(self):
        batch, n, d, k = 100, 30, 50, 70

        class Foo(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear0 = nn.Linear(n, k)
                self.linear1 = nn.Linear(d * k, 2048)

            def forward(self, x):
                xt = x.transpose(2, 1)
                return self.linear1(self.linear0(xt).flatten(1))

        mod = Foo().to(self.device)
        ddp_compiled = DDP(torch.compile(mod, backend="inductor"), device_ids=self.device_ids)
        # Growing batch sizes: recompiles must keep the transposed layout right.
        for scale in (1, 2, 3):
            x = torch.randn((batch * scale, n, d), dtype=torch.float32, device=self.device)
            self.assertTrue(same(mod(x), ddp_compiled(x)), f"batch {batch * scale}")

    @patch.object(config, "optimize_ddp", True)
    def test_no_split(self):
        # All parameters fit in one 250 MB bucket: one graph, no split.
        m, inputs, correct_outputs = self.get_model(hidden_feat=5)
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=250)
        splits = CheckSplitsCompiler()
        self.assertTrue(same(correct_outputs, self.compile_ddp(ddp_m, splits.compile_fn)(inputs)))
        self.assertEqual(splits.compiler_called, 1)

    @patch.object(config, "optimize_ddp", True)
    def test_aot_autograd(self):
        # AOTAutograd backends need example inputs propagated across the split subgraphs.
        m, inputs, correct_outputs = self.get_model()
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=25)
        opt_outputs = self.compile_ddp(ddp_m, "aot_eager")(inputs)
        opt_outputs.sum().backward()
        self.assertTrue(same(correct_outputs, opt_outputs))
        self.assertTrue(all(p.grad is not None for p in m.parameters()))

    @patch.object(config, "optimize_ddp", True)
    def test_custom_layer(self):
        # Three 1 MB layers with 1 MB buckets: 3 subgraphs, the parameterless `x + y` merged.
        m, inputs, correct_outputs = get_custom_model(self.device)
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=1)
        splits = CheckSplitsCompiler()
        self.assertTrue(same(correct_outputs, self.compile_ddp(ddp_m, splits.compile_fn)(*inputs)))
        self.assertEqual(splits.compiler_called, 3)

    @requires_triton
    def test_empty_graph_inductor(self):
        # A frame that only queries the process group compiles to an empty graph.
        def fn():
            return (torch.distributed.distributed_c10d.get_world_size(),)

        self.assertEqual(torch.compile(fn, backend="inductor")()[0], 1)

    @patch.object(config, "optimize_ddp", False)
    def test_ignored_parameters(self):
        # Parameters DDP ignores must not be placed in DDPOptimizer's buckets.
        m, inputs, correct_outputs = get_custom_model(self.device)
        DDP._set_params_and_buffers_to_ignore_for_model(m, ["seq.2.weight", "seq.4.linear.bias"])
        ddp_m = DDP(m, device_ids=self.device_ids, bucket_cap_mb=25)
        ignored_ids = {id(ddp_m.module.get_parameter(p)) for p in ddp_m.parameters_to_ignore}
        self.assertEqual(len(ignored_ids), 2)

        splits = CheckSplitsCompiler()
        ddp_optimizer = DDPOptimizer(
            bucket_bytes_cap=ddp_m.bucket_bytes_cap, backend_compile_fn=splits.compile_fn
        )
        opt_outputs = self.compile_ddp(ddp_m, ddp_optimizer.compile_fn)(*inputs)
        self.assertTrue(same(correct_outputs, opt_outputs))
        self.assertEqual(splits.compiler_called, 2)
        bucketed = {p_id for bucket in ddp_optimizer.buckets for p_id in bucket.param_ids}
        self.assertTrue(bucketed, "DDPOptimizer bucketed no parameters")
        self.assertFalse(bucketed & ignored_ids)

    @patch.object(config, "optimize_ddp", True)
    def test_higher_order_op(self):
        # Changed: the seed expected BackendCompilerFailed("DDPOptimizer backend: Found a higher
        # order op in the graph"). DDPOptimizer now splits graphs holding checkpoint HOPs (the
        # check is gone from torch/_dynamo/backends/distributed.py), so assert that it does and
        # that the result and gradients still match eager.
        from torch.utils.checkpoint import checkpoint

        size = 1000

        class InnerModule(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear1 = nn.Linear(size, size)
                self.linear2 = nn.Linear(size, size)

            def forward(self, x):
                return self.linear2(self.linear1(x))

        class MockModule(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner_mod1 = InnerModule()
                self.inner_mod2 = InnerModule()

            def forward(self, x):
                a = torch.cos(checkpoint(self.inner_mod1, x, use_reentrant=False))
                return torch.cos(checkpoint(self.inner_mod2, a, use_reentrant=False))

        mod = MockModule().to(self.device)
        ddp_mod = DDP(mod, bucket_cap_mb=1)
        x = torch.randn(size, size, device=self.device, requires_grad=True)
        expected = mod(x)
        (expected_grad,) = torch.autograd.grad(expected.sum(), x)

        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        out = torch.compile(ddp_mod, backend=cnt)(x)
        (grad,) = torch.autograd.grad(out.sum(), x)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(grad, expected_grad)
        # 8 MB per checkpointed block against 1 MB buckets: split, each block kept whole.
        checkpoints_per_graph = [
            sum(1 for n in gm.graph.nodes if n.target is tag_activation_checkpoint)
            for gm in cnt.graphs
        ]
        # Measured (one-rank gloo, torch 2.13 and 2.14): DDPOptimizer hands the backend two
        # subgraphs, one checkpoint each.
        self.assertEqual(cnt.frame_count, 2)
        self.assertEqual(checkpoints_per_graph, [1, 1])

    @requires_triton  # the seed's default backend: inductor
    def test_fsdp_orig_params_assert(self):
        # Changed: the seed expected AssertionError("Dynamo only supports FSDP with
        # use_orig_params=True") from the call. Dynamo now reports it as a graph break
        # (unimplemented() in variables/builder.py): fullgraph=True raises Unsupported with that
        # explanation, and a default compile falls back to eager with the graph break recorded.
        m, inputs, correct_outputs = get_model(self.device)
        fsdp_m = FSDP(m, use_orig_params=False)
        message = "Dynamo only supports FSDP with use_orig_params=True"
        with self.assertRaisesRegex(torch._dynamo.exc.Unsupported, message):
            torch.compile(fsdp_m, fullgraph=True)(inputs)

        torch._dynamo.reset()
        counters.clear()
        outputs = torch.compile(fsdp_m)(inputs)
        self.assertTrue(same(correct_outputs, outputs))
        self.assertTrue(any(message in reason for reason in counters["graph_break"]))

    def test_fsdp_skip_guards(self):
        """With skip_fsdp_guards, guards on FSDP-managed submodules carry the
        'local_fsdp_module' source (which is not installed); we read the sources that comptime's
        print_guards shows, since making a skipped guard observably fail is contrived.

        Changed: without skipping, the seed expected source 'local'. FSDP-managed modules are
        traced as unspecialized nn modules now (FSDPManagedNNModuleVariable wraps attribute
        sources in UnspecializedNNModuleSource), so their guards show
        'local_unspecialized_nn_module'.
        """
        global _GUARDS_OUT

        class ToyModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(*mlp_layers(10, 5000, 5))

            def forward(self, inputs):
                out = self.net(inputs)

                @comptime
                def _(ctx):
                    ctx.print_guards(file=_GUARDS_OUT)

                return out

        for skip_guards, expected_source in (
            (True, "local_fsdp_module"),
            (False, "local_unspecialized_nn_module"),
        ):
            torch._dynamo.reset()
            _GUARDS_OUT = io.StringIO()
            m, inputs, correct_outputs = build_with_reference(ToyModel(), self.device)
            fsdp_m = FSDP(m, use_orig_params=True)
            with torch._dynamo.config.patch(skip_fsdp_guards=skip_guards):
                outputs = torch.compile(fsdp_m, backend="aot_eager")(inputs)
            self.assertTrue(same(correct_outputs, outputs))

            guards = _GUARDS_OUT.getvalue()
            self.assertIn("""local "L['self']" TYPE_MATCH""", guards)
            # The compiled frame is the wrapped model's forward (dynamo does not trace FSDP's
            # own forward), so its submodules hang directly off L['self'] (measured with FSDP on
            # one-rank gloo, torch 2.13 and 2.14).
            for path in (
                """L['self']._modules['net']""",
                """L['self']._modules['net']._modules['0']""",
            ):
                sources = set(re.findall(rf'(\S+) "{re.escape(path)}" TYPE_MATCH', guards))
                self.assertEqual(sources, {expected_source}, f"{path}:\n{guards}")

    def test_fsdp_skip_register_attr_or_module(self):
        # FSDP-managed parameters are graph inputs, never get_attr nodes of the fx graph.
        class ToyModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(*mlp_layers(10, 5000, 5)[:4])

            def forward(self, inputs):
                return self.net(inputs)

        m, inputs, correct_outputs = build_with_reference(ToyModel(), self.device)
        fsdp_m = FSDP(m, use_orig_params=True)
        registered = []

        def debug_compiler(gm, _):
            registered.extend(n.name for n in gm.graph.nodes if n.op == "get_attr")
            return gm

        outputs = torch.compile(fsdp_m, backend=debug_compiler)(inputs)
        self.assertTrue(same(correct_outputs, outputs))
        param_names = [f"l__self___net_{i}_{kind}" for i in (0, 2) for kind in ("weight", "bias")]
        for name in param_names:
            self.assertFalse(
                any(name in node for node in registered),
                f"FSDP module parameter {name} registered as an attribute: {registered}",
            )

    def test_fsdp_dup_tensors_same_source(self):
        # A parameter and a buffer each used twice are passed to the graph once each.
        class DuplicateModule(nn.Module):
            def __init__(self, device):
                super().__init__()
                self._param = torch.randn((3,), device=device)
                self.register_buffer("_buf", torch.randn((3,), device=device))

            def forward(self, x):
                z = x + self._buf + self._buf
                z += self._param + self._param
                return z

        model = DuplicateModule(self.device)
        fsdp_model = torch.compile(
            FSDP(copy.deepcopy(model), use_orig_params=True), backend="aot_eager"
        )
        inp = torch.randn((2, 3), device=self.device)
        torch.testing.assert_close(fsdp_model(inp), model(inp))

    @patch.object(config, "guard_nn_modules", True)
    def test_fsdp_dup_tensors_diff_source(self):
        # One buffer reachable under two names must not produce a wrong `a is b` dedup guard,
        # which would recompile on every call.
        device = self.device

        class BufModule(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("_buf", torch.randn((3,), device=device))

            def forward(self, x):
                return x + self._buf

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self._param = nn.Parameter(torch.randn((1,), device=device))
                self._buf_module = BufModule()
                self.register_buffer("_buf", self._buf_module._buf)  # shared tensor

            def forward(self, x):
                self._buf.mul_(2)  # a mutation, to take the dedup path
                z = self._buf_module(x + self._buf)
                z += self._param
                return z

        cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
        fsdp_model = torch.compile(FSDP(Model(), use_orig_params=True), backend=cnt)
        inp = torch.randn((2, 3), device=device)
        for _ in range(15):
            fsdp_model(inp)
        self.assertEqual(cnt.frame_count, 1)

    def test_fsdp_staticmethod(self):
        # Staticmethods called via the class or via self compile once, with correct results.
        device = self.device

        class ModuleWithStaticMethod(nn.Module):
            def __init__(self, use_self):
                super().__init__()
                self._use_self = use_self
                torch.manual_seed(42)  # the same `_param` in every instance
                self._param = nn.Parameter(torch.randn((3,), device=device))

            def forward(self, x):
                if self._use_self:
                    z = self._add(x, self._param)
                else:
                    z = ModuleWithStaticMethod._add(x, self._param)
                return z * 2

            @staticmethod
            def _add(x, y):
                return x + y

        x = torch.randn((2, 3), device=device)
        expected = ModuleWithStaticMethod(False)(x)
        for use_self in (False, True):
            cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
            model = FSDP(ModuleWithStaticMethod(use_self), use_orig_params=True)
            out = torch.compile(model, backend=cnt)(x)
            self.assertEqual(cnt.frame_count, 1, f"use_self={use_self}")
            torch.testing.assert_close(out, expected)

    def test_async_subclass_no_specialize(self):
        # Tensors wrapped as async collective results must not specialize on size.
        cnt = torch._dynamo.testing.CompileCounterWithBackend("eager")

        @torch.compile(backend=cnt, fullgraph=True, dynamic=True)
        def f(x):
            return x + 1

        f(_maybe_wrap_tensor(torch.randn(10)))
        f(_maybe_wrap_tensor(torch.randn(12)))
        self.assertEqual(cnt.frame_count, 1)


_GUARDS_OUT = io.StringIO()


# ---------------------------------------------------------------------------------------------
# multi_gpu, gpu_x4 and gpu_x8 tests: one rank per leased GPU (2, 4, 8), one process each

# test_fsdp_setattr, per device type: (frames compiled, ops in them, graph breaks by type).
# One graph of MutatingModel's 4 linear + 4 relu + the multiplication by the new state.
# cpu: measured with this test's class on 2 gloo ranks with FSDP on the CPU (scratch run,
#   torch 2.13 and 2.14): FSDP's lazy init calls torch.cpu.is_available(), a torch.* call
#   returning a bool, which dynamo does not fold; `_is_root` is set after it, eagerly.
# cuda: measured on 2x H200, torch 2.11.0+cu130 (bench/gpu_suite.sh, 2026-11-23); the earlier
#   expectation of no break at all was reasoned and failed there. FSDP's lazy init on CUDA sets
#   `requires_grad` on a tensor, a setattr dynamo does not trace, so it breaks once there;
#   `state` and `_is_root` still compile (frames and ops as on the CPU). Not yet measured on a
#   later release with CUDA: a change there fails this test and shows in the upgrade gate.
# The facts are per rank, each compiling its own frame, so TestMultiProcX4 and X8 expect the same
# (first measured at 4 and 8 ranks by their first run on such hosts).
FSDP_SETATTR_EXPECTED = {
    "cpu": (1, 9, collections.Counter({"torch.* op returned non-Tensor": 1})),
    "cuda": (1, 9, collections.Counter({"setattr() on Tensor.requires_grad": 1})),
}


@requires_gpus(2)
@requires_nccl
class TestMultiProc(DynamoTestCase, MultiProcessTestCase):
    """Integration tests over real ranks; each test spawns its processes, so keep these few."""

    # world_size: one rank per leased GPU (MultiProcessTestCase), as the seed's device_count().
    device_type = "cuda"  # the harness sets each rank's current device to cuda:<rank>

    # Ranks start from the same RNG state (test_utils.distributed seeds them): FSDP1 shards each
    # rank's own copy of the model, so every rank must build the same one.

    def hf_bert_ddp(self, backend, static_graph):
        model, inputs = get_hf_bert(self.device, rank=self.rank)
        model = DDP(model, static_graph=static_graph)
        run_hf_bert_ddp(self, model, inputs, backend)

    @per_rank
    @patch.object(config, "optimize_ddp", False)
    def test_ddp_baseline_aot_eager_multiprocess(self):
        self.assertFalse(config.optimize_ddp)
        m, inputs, correct_outputs = get_model(self.device)
        m = torch.compile(DDP(m, device_ids=[torch.device(self.device)]), backend="aot_eager")
        self.assertTrue(same(correct_outputs, m(inputs)))

    @requires_triton
    @per_rank
    @patch.object(config, "optimize_ddp", True)
    @patch.object(torch._inductor.config, "fallback_random", True)
    def test_hf_bert_ddp_inductor(self):
        self.hf_bert_ddp("inductor", static_graph=False)

    @requires_triton
    @per_rank
    @patch.object(config, "optimize_ddp", True)
    @patch.object(torch._inductor.config, "fallback_random", True)
    def test_hf_bert_ddp_inductor_static_graph(self):
        self.hf_bert_ddp("inductor", static_graph=True)

    @per_rank
    @patch.object(config, "optimize_ddp", True)
    def test_hf_bert_ddp_aot_eager(self):
        self.hf_bert_ddp("aot_eager", static_graph=False)

    @per_rank
    @patch.object(config, "optimize_ddp", True)
    def test_hf_bert_ddp_aot_eager_static_graph(self):
        self.hf_bert_ddp("aot_eager", static_graph=True)

    @requires_triton
    @per_rank
    @patch.object(config, "optimize_ddp", False)
    def test_ddp_activation_checkpointing(self):
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl,
            apply_activation_checkpointing,
            checkpoint_wrapper,
        )

        class MyModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(64, 32)
                self.fc2 = nn.Linear(32, 16)
                self.fc3 = nn.Linear(16, 8)

            def forward(self, inp):
                return self.fc3(self.fc2(self.fc1(inp)))

        self.assertFalse(config.optimize_ddp)
        model = MyModel().to(self.device)
        apply_activation_checkpointing(
            model,
            checkpoint_wrapper_fn=functools.partial(
                checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT
            ),
            check_fn=lambda submodule: isinstance(submodule, nn.Linear),
        )
        model = DDP(model)
        x = torch.randn(10, 64, device=self.device)
        correct_outputs = model(x)
        self.assertTrue(same(correct_outputs, torch.compile(model)(x)))

    def wrap_policy_per_linear(self):
        return functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=(nn.Linear,))

    def check_fsdp_toy_model(self, backend):
        # Outer wrap of the whole model, then one FSDP unit per Linear layer.
        for wrap_policy in (None, self.wrap_policy_per_linear()):
            m, inputs, correct_outputs = get_model(self.device)
            fsdp_m = FSDP(m, auto_wrap_policy=wrap_policy, use_orig_params=True)
            outputs = torch.compile(fsdp_m, backend=backend)(inputs)
            self.assertTrue(same(correct_outputs, outputs), f"auto_wrap_policy={wrap_policy}")

    @per_rank
    def test_fsdp_aot_eager(self):
        self.check_fsdp_toy_model("aot_eager")

    @per_rank
    def test_fsdp_setattr(self):
        # Changed: the seed read CompileProfiler's report, retired in torch 2.5 (its graph-break
        # data now lives in dynamo's counters). Fact kept: setting `state` on the FSDP-managed
        # module and FSDP's own `_is_root` compile without graph breaking, and MutatingModel's
        # forward is compiled (an eager fallback compiles no graph): see FSDP_SETATTR_EXPECTED.
        m, inputs, correct_outputs = get_mutating_model(self.device)
        m.state = 1  # the eager reference run set it to 2 already
        fsdp_m = FSDP(m, use_orig_params=True)
        counters.clear()
        cnt = torch._dynamo.testing.CompileCounterWithBackend("eager")
        outputs = torch.compile(fsdp_m, backend=cnt)(inputs)
        self.assertTrue(same(correct_outputs, outputs))
        self.assertEqual(m.state, 2)
        measured = (cnt.frame_count, cnt.op_count, graph_break_types())
        expected = FSDP_SETATTR_EXPECTED[self.device.type]
        self.assertEqual(measured, expected, f"(frames, ops, breaks) measured: {measured}")

    @requires_triton
    @per_rank
    def test_fsdp_inductor(self):
        self.check_fsdp_toy_model("inductor")

    @requires_triton
    @per_rank
    def test_fsdp_activation_checkpointing(self):
        model, inputs = get_toy_model_for_activation_checkpointing(self.device)

        def is_inner(module):
            return isinstance(module, ToyInnerModel)

        wrap_policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=is_inner)
        model = apply_fsdp_with_checkpointing(model, wrap_policy, is_inner)
        correct_outputs = model(inputs)
        cnt = torch._dynamo.testing.CompileCounterWithBackend("inductor")
        outputs = torch.compile(model, backend=cnt)(inputs)
        self.assertTrue(same(correct_outputs, outputs))
        self.assertEqual(cnt.frame_count, 2)
        self.assertIsNotNone(find_first_node(cnt.graphs[0], tag_activation_checkpoint))

    @requires_triton
    @per_rank
    @patch.object(torch._inductor.config.triton, "cudagraphs", False)
    @patch.object(torch._inductor.config, "fallback_random", True)
    def test_hf_bert_fsdp(self):
        # The seed skipped this wherever fused SDPA kernels exist ("Inaccurate results with
        # fused SDPA kernels"), i.e. on every current GPU; math SDPA makes it comparable.
        model, inputs = get_hf_bert(self.device, rank=self.rank)

        def wrap(m):  # FSDP without recursive wrapping
            return FSDP(copy.deepcopy(m), auto_wrap_policy=None, use_orig_params=True)

        run_hf_bert_fsdp(self, model, inputs, wrap)

    @requires_triton
    @per_rank
    @patch.object(torch._inductor.config.triton, "cudagraphs", False)
    @patch.object(torch._inductor.config, "fallback_random", True)
    @patch.object(config, "guard_nn_modules", True)
    def test_hf_bert_fsdp_activation_checkpointing(self):
        from transformers.models.bert.modeling_bert import BertLayer

        model, inputs = get_hf_bert(self.device, rank=self.rank)

        def is_bert_layer(module):
            return isinstance(module, BertLayer)

        # FSDP with recursive wrapping of the BertLayer instances, each checkpointed.
        wrap_policy = functools.partial(
            transformer_auto_wrap_policy, transformer_layer_cls=(BertLayer,)
        )
        wrap = functools.partial(
            apply_fsdp_with_checkpointing, wrap_policy=wrap_policy, checkpoint_policy=is_bert_layer
        )
        run_hf_bert_fsdp(self, model, inputs, wrap)


# The seed's world size is the device count, so each larger host runs the same tests at its own
# size. A subclass's marker (the larger count wins over TestMultiProc's) alone moves them to that
# variant; the bodies and expected facts stay TestMultiProc's.
@requires_gpus(4)
class TestMultiProcX4(TestMultiProc):
    """TestMultiProc at world size 4."""


@requires_gpus(8)
class TestMultiProcX8(TestMultiProc):
    """TestMultiProc at world size 8."""


if __name__ == "__main__":
    unittest.main()
