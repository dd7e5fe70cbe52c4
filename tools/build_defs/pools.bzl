"""Remote execution pools: the only place that knows the pool property key.

Pool names are a column of the variant table (variants.bzl). Each variant's test action carries
`test.<POOL_KEY> = <pool>` (plus POOL_EXTRA_PROPERTIES); the
`test.` prefix routes only the test action to that pool, while build actions stay on the
service's default workers. The properties are part of the action key, so a result from one pool
never satisfies a run on another: name a pool after its hardware ("gpu-h200-x2", not
"gpu-big"). Remotely, that is what ties a GPU result to the GPU model (locally, in
host-interpreter mode, the environment fingerprint does; see tools/python/pypi.bzl).

Services spell the key and the pools differently; edit POOL_KEY here and the "pool" column of
variants.bzl for yours:

    BuildBuddy  POOL_KEY = "Pool"   pools = executor pools (the executors' MY_POOL)
    EngFlow     POOL_KEY = "Pool"   pools = executor pool names of the cluster config
    Buildbarn   POOL_KEY = "pool"   bb_worker's `platform` must list exactly the same
                                    properties (the scheduler queues by the whole platform)
    BuildGrid   POOL_KEY = "Pool"   any key: the rig (tools/remote) declares it in a static
                                    property set, with POOL_KEY exclusive to its pool workers

e.g. EngFlow with container images per pool:

    POOL_EXTRA_PROPERTIES = {"container-image": "docker://registry.example/torch-tests@sha256:..."}

tools/remote/rig.sh reads POOL_KEY from this file and the pools from variants.bzl
(tools/remote/pools.py; both files stay Python-parsable: plain literals assigned to names), so
the rig's workers follow any edit.
"""

load(":variants.bzl", "VARIANTS")

POOL_KEY = "Pool"

# Properties every test action carries in addition to the pool (image, isolation, ...).
POOL_EXTRA_PROPERTIES = {}

def exec_properties_for(variant):
    """Execution properties for a variant's test action."""
    properties = {"test." + key: value for key, value in POOL_EXTRA_PROPERTIES.items()}
    properties["test." + POOL_KEY] = VARIANTS[variant]["pool"]
    return properties
