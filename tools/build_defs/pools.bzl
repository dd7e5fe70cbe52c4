"""Remote execution pools: the only place that knows pool names and property keys.

Each variant's test action carries `test.<POOL_KEY> = <pool>`; the `test.` prefix routes only
the test action to that pool, while build actions stay on the default (CPU) workers. Services
name the key differently; set POOL_KEY for yours:

    BuildBuddy   POOL_KEY = "Pool"        pools are executor pools ("gpu-1")
    EngFlow      POOL_KEY = "Pool"        pools are executor pool names
    Buildbarn    POOL_KEY = "pool"        matched against the worker's platform properties
    BuildGrid    POOL_KEY = "pool"        matched against bot capabilities (tools/remote)

A pool name should identify the hardware model too (e.g. "h200-x2"): the property is part of
the action key, so results from one GPU model never satisfy a run on another.
"""

POOL_KEY = "Pool"

POOLS = {
    "cpu": "cpu",
    "gpu": "gpu-1",
    "multi_gpu": "gpu-2",
}

def exec_properties_for(variant):
    """Execution properties for a variant's test action."""
    return {"test." + POOL_KEY: POOLS[variant]}
