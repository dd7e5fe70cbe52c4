"""Self-tests of test_utils.hardware markers, tools.hardware's variant checks and memory cap, and
test_utils.versions expectations."""

import unittest

import pytest
import torch

from test_utils import hardware, versions
from test_utils.dynamo import guard_text
from tools.hardware import envvars, spec, variants
from tools.runner.process import memory_cap


class Base(unittest.TestCase):
    __test__ = False  # fixtures of the tests below, not tests of this file

    def test_inherited(self):
        pass


@hardware.requires_nccl
class NcclClass(Base):
    __test__ = False  # a fixture too: said in its own body, as the outcome audit requires

    @hardware.requires_gpus(2)
    def test_two(self):
        pass

    def test_one(self):
        pass


def test_markers_place_each_test_in_one_variant():
    assert hardware.requirements_of(Base.test_inherited, Base).variant == "cpu"
    assert hardware.requirements_of(NcclClass.test_one, NcclClass).variant == "gpu"
    assert hardware.requirements_of(NcclClass.test_inherited, NcclClass).variant == "gpu"
    two = hardware.requirements_of(NcclClass.test_two, NcclClass)
    assert (two.variant, two.gpus, "nccl" in two.features) == ("multi_gpu", 2, True)


def test_class_marker_does_not_leak_into_the_base_class():
    assert hardware.requirements_of(Base.test_inherited, Base) == hardware.Requirements()


def test_triton_implies_one_gpu():
    @hardware.requires_triton
    def test_kernel():
        pass

    assert hardware.requirements_of(test_kernel).min_gpus == 1


def test_unknown_variant_is_refused(monkeypatch):
    monkeypatch.setenv(*spec.Spec(variant="tpu").env().popitem())
    with pytest.raises(ValueError, match="unknown variant 'tpu'"):
        variants.current_variant()


def test_missing_hardware_message(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert variants.missing_hardware("cpu") is None
    assert variants.missing_hardware("multi_gpu") == "variant 'multi_gpu' needs 2 GPUs, found 0"


def test_gpu_memory_cap_waits_for_cuda_and_covers_every_device(monkeypatch, tmp_path):
    queued, capped = [], []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, d: capped.append((f, d))
    )
    monkeypatch.delenv(envvars.RUNTIME, raising=False)
    memory_cap.cap_gpu_memory()
    assert queued == [], "no shared GPUs, no cap"
    monkeypatch.setenv(*spec.Runtime(gpu_memory_fraction=0.5).env().popitem())
    memory_cap.cap_gpu_memory()
    assert capped == [], "nothing may touch CUDA before the test does"
    (apply,) = queued
    apply()
    assert capped == [(0.5, 0), (0.5, 1)]


def test_version_expectation_picks_newest_release_not_newer_than_torch(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.12.1+cpu")
    assert versions.by_torch_version({"2.11": "old", "2.12": "mid", "2.13": "new"}) == "mid"
    monkeypatch.setattr(torch, "__version__", "2.13.0")
    assert versions.by_torch_version({"2.11": "old", "2.12": "mid"}) == "mid"


def test_version_older_than_every_expectation_is_an_error(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.10.0")
    with pytest.raises(AssertionError, match="no expectation for torch 2.10.0"):
        versions.by_torch_version({"2.11": "x"})


def test_guard_text_strips_compile_id_and_source_comment():
    assert guard_text("0/1: len(x) == 2   # x[0] (test.py:3 in f)") == "len(x) == 2"
    assert guard_text("12/3: x is y") == "x is y"
