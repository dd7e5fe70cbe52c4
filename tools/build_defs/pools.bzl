"""Remote execution pools: the only place that knows pool names and property keys.

Each variant's test action carries `test.<POOL_KEY> = <pool>` (plus POOL_EXTRA_PROPERTIES); the
`test.` prefix routes only the test action to that pool, while build actions stay on the
service's default workers. The properties are part of the action key, so a result from one pool
never satisfies a run on another: name a pool after its hardware ("h200-x2", not "gpu-big").

Services spell the key and the pools differently; edit POOL_KEY / POOLS for yours:

    BuildBuddy  POOL_KEY = "Pool"   POOLS values = executor pools (the executors' MY_POOL)
    EngFlow     POOL_KEY = "Pool"   POOLS values = executor pool names of the cluster config
    Buildbarn   POOL_KEY = "pool"   bb_worker's `platform` must list exactly the same
                                    properties (the scheduler queues by the whole platform)
    BuildGrid   POOL_KEY = "Pool"   any key: the rig (tools/remote) declares it in a static
                                    property set, with POOL_KEY exclusive to its pool workers

e.g. EngFlow with container images per pool:

    POOLS = {"cpu": "default", "gpu": "gpu-l4", "multi_gpu": "gpu-h200-x2"}
    POOL_EXTRA_PROPERTIES = {"container-image": "docker://registry.example/torch-tests@sha256:..."}

tools/remote/rig.sh reads POOL_KEY and POOLS from this file (the file stays Python-parsable:
plain literals assigned to these names), so the rig's workers follow any edit here.
"""

POOL_KEY = "Pool"

POOLS = {
    "cpu": "cpu",
    "gpu": "gpu-1",
    "multi_gpu": "gpu-2",
}

# Properties every test action carries in addition to the pool (image, isolation, ...).
POOL_EXTRA_PROPERTIES = {}

def exec_properties_for(variant):
    """Execution properties for a variant's test action."""
    properties = {"test." + key: value for key, value in POOL_EXTRA_PROPERTIES.items()}
    properties["test." + POOL_KEY] = POOLS[variant]
    return properties
