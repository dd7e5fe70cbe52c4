"""Shared library for every test in this repository.

Modules, one job each:
  hardware       -- declare what hardware a test needs (@requires_gpus(2), @requires_nccl, ...);
                    the markers live with the runner that reads them (tools/runner/session)
  dynamo         -- dynamo test base class, compile counters, log and guard-failure capture
  distributed    -- multi-process harness: spawn ranks, rendezvous, surface every rank's failure
  dtensor        -- DTensor test base built on the harness
  numerics       -- deterministic seeding and numerics for fair eager-vs-compiled comparisons
  versions       -- expectations that differ between torch releases
"""
