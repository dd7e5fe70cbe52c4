"""Shared library for every test in this repository.

Modules, one job each:
  hardware       -- declare what hardware a test needs (@requires_gpus(2), @requires_nccl, ...)
  pytest_plugin  -- picks the tests of the current variant and refuses all-skipped runs
  outcome_audit  -- a target passes only for tests that ran (skips, xfails, uncollected tests)
  expectations   -- reads a target's declared expected outcomes (torch_test's expectations)
  dynamo         -- dynamo test base class, compile counters, log and guard-failure capture
  distributed    -- multi-process harness: spawn ranks, rendezvous, surface every rank's failure
  dtensor        -- DTensor test base built on the harness
  numerics       -- deterministic seeding and numerics for fair eager-vs-compiled comparisons
  versions       -- expectations that differ between torch releases
  releases       -- torch release keys ("2.13") as versions and expectations name them
"""
