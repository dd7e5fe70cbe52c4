"""Infrastructure failures: what the host or a side's build caused, not torch's code.

A gated case or target whose failure is INFRA is neither a regression nor a pass: it could not
be compared, so the gate reports it in its own section with the evidence and exits 4
(incomplete) at best, never 0. The table is narrow on purpose: an infra verdict must never hide
a torch regression, so each row is one exact text (or one typed fact), never a keyword.

| cause                    | evidence (where)                                                  |
| ------------------------ | ----------------------------------------------------------------- |
| no_nvidia_driver         | a case's failure `RuntimeError: Found no NVIDIA driver on your    |
|                          | system.` (c10's CUDA device count: a CUDA build, no driver)       |
| no_visible_gpu           | a case's failure `RuntimeError: No CUDA GPUs are available` (a     |
|                          | CUDA build that sees no GPU: none on the host, or hidden from it) |
| cuda_out_of_memory       | a case's failure `torch.OutOfMemoryError: CUDA out of memory.     |
|                          | Tried to allocate ` (torch.cuda.OutOfMemoryError before 2.5)      |
| nccl_rendezvous_timeout  | a case's failure `torch.distributed.DistStoreError: Timed out     |
|                          | after N seconds waiting for clients. M/N clients joined.` (the    |
|                          | TCPStore rendezvous of init_process_group: ranks never joined)    |
| gpu_lease_refused        | the shard's record: `infrastructure` (the runner leased no GPUs:  |
|                          | "variant 'multi_gpu' needs 2 GPUs, found 0", no free GPU within   |
|                          | the timeout; no test ran)                                         |
| remote_execution_failure | Bazel's error for the target's test action: `(Exit 34): Remote    |
|                          | Execution Failure: ` (a worker or its pool lost, e.g. "Failed     |
|                          | Precondition: no live worker in pool ..."; no test ran)           |

The rule (`judge`). Where no test ran on a side (a refused lease, a lost remote worker), no torch
code ran there: INFRA always. A case's failure text comes from torch's own code, which a torch
change can also cause (an allocator that now takes more memory, a rendezvous that now hangs, a
build that looks for the driver elsewhere), so it is INFRA only when it cannot be the candidate's
doing: the baseline's run of the same case failed with such a cause too, or the sides did not run
on the same hardware and build kind (`difference`: a CPU build against a CUDA build, other GPUs).
Evidence on one side only, on the same hardware and build kind, is suspicious: the case stays
what the regression rule makes it (a regression, for a case that passed on the baseline), and
the report adds the evidence ("infra-like, on the candidate only").
"""

import dataclasses
import re

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["difference", "judge"]


@dataclasses.dataclass(frozen=True)
class Cause:
    name: str
    why: str  # for people: what the host or the build did
    pattern: re.Pattern | None = None  # a case's first failure line, matched from its start
    ran_no_test: bool = False  # no torch code ran on that side: never torch's doing


CASE_CAUSES = (
    Cause(
        "no_nvidia_driver",
        "a CUDA build of torch on a host without an NVIDIA driver",
        re.compile(r"RuntimeError: Found no NVIDIA driver on your system\."),
    ),
    Cause(
        "no_visible_gpu",
        "a CUDA build of torch that sees no GPU",
        re.compile(r"RuntimeError: No CUDA GPUs are available$"),
    ),
    Cause(
        "cuda_out_of_memory",
        "CUDA out of memory",
        re.compile(r"torch\.(cuda\.)?OutOfMemoryError: CUDA out of memory\. Tried to allocate "),
    ),
    Cause(
        "nccl_rendezvous_timeout",
        "the process group's rendezvous timed out: not every rank joined",
        re.compile(
            r"torch\.distributed\.DistStoreError: Timed out after \d+ seconds waiting for "
            r"clients\. \d+/\d+ clients joined\."
        ),
    ),
)
GPU_LEASE_REFUSED = Cause(
    "gpu_lease_refused", "the host could not lease the GPUs the variant needs", ran_no_test=True
)
REMOTE_EXECUTION_FAILURE = Cause(
    "remote_execution_failure",
    "remote execution lost the test action (a worker or its pool gone)",
    re.compile(r"\(Exit 34\): Remote Execution Failure: "),
    ran_no_test=True,
)


def case_cause(message: str) -> Cause | None:
    """The cause a case's failure (`Type: message`, its first line) names, or None."""
    return next((c for c in CASE_CAUSES if c.pattern.match(message or "")), None)


def target_evidence(infrastructure: str | None, bazel_error: str = "") -> tuple | None:
    """(cause, evidence) where a side ran no test of a target for the host's sake: the runner's
    record says so (a refused GPU lease), or Bazel's error for its test action is a remote
    execution failure; else None."""
    if infrastructure:
        return GPU_LEASE_REFUSED, infrastructure
    if bazel_error and REMOTE_EXECUTION_FAILURE.pattern.match(bazel_error):
        return REMOTE_EXECUTION_FAILURE, bazel_error
    return None


def difference(baseline: dict, candidate: dict) -> str | None:
    """How the sides' hardware or build kind differ (fingerprints: `cuda`, torch's CUDA or None;
    `gpus`, the GPUs it ran with), or None where they are the same."""

    def kind(fp):
        return f"CUDA {fp['cuda']} build" if fp.get("cuda") else "CPU build"

    found = []
    if bool(baseline.get("cuda")) != bool(candidate.get("cuda")):
        found.append(f"baseline torch is a {kind(baseline)}, candidate a {kind(candidate)}")
    gpus = [sorted(fp.get("gpus") or []) for fp in (baseline, candidate)]
    if gpus[0] != gpus[1]:
        names = ["; ".join(g) or "none" for g in gpus]
        found.append(f"GPUs differ (baseline {names[0]}, candidate {names[1]})")
    return ", ".join(found) or None


def judge(old_message: str | None, new_message: str | None, differ: str | None) -> dict | None:
    """The rule for one case, from each side's failure text (None: it did not fail there) and
    `difference`: {"cause", "why", "side", "evidence"} and "infra": True where the case is INFRA,
    False where the evidence is on one side only on the same hardware (suspicious); None where
    no failure names a cause."""
    causes = {
        side: (cause, message)
        for side, message in (("baseline", old_message), ("candidate", new_message))
        if message is not None and (cause := case_cause(message)) is not None
    }
    if not causes:
        return None
    side = "candidate" if "candidate" in causes else "baseline"
    cause, message = causes[side]
    item = {"cause": cause.name, "why": cause.why, "side": side, "evidence": message}
    if len(causes) == 2:  # neither side ran it for the test's own sake
        return dict(item, infra=True, side="both", rule="infra-like failures on both sides")
    if differ:
        return dict(item, infra=True, rule=f"the sides differ: {differ}")
    return dict(
        item,
        infra=False,
        rule=f"infra-like, on the {side} only, on the same hardware and build kind as the "
        f"{'baseline' if side == 'candidate' else 'candidate'}: not taken for infrastructure",
    )
