"""One process of test_multiprocess: jax's multi-controller runtime on this
machine only (2 processes x 4 virtual CPU devices, gloo collectives over
loopback). Runs every case, in the same order as the other process, and
writes what it saw as JSON: results as numbers, and per case the calls this
process made and the shapes they saw.

    python multiprocess_worker.py PROCESS_ID COORDINATOR_PORT OUTPUT_JSON
"""

import json
import os
import sys
import time
import traceback

PROCESSES, LOCAL_DEVICES = 2, 4
process_id, port, output = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={LOCAL_DEVICES}"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def gloo_on_loopback() -> None:
    """Makes gloo listen on 127.0.0.1. jax 0.9.1-0.12 have no setting for its
    address (it resolves the host's name, which may be a public interface):
    the one private hook is the function jax's CPU client creates gloo with."""
    from jax._src import xla_bridge

    module = getattr(xla_bridge, "_jax", None) or xla_bridge.xla_client._xla
    make = module.make_gloo_tcp_collectives

    def on_loopback(distributed_client, **_):
        return make(distributed_client=distributed_client, hostname="127.0.0.1")

    module.make_gloo_tcp_collectives = on_loopback


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
gloo_on_loopback()
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}",
    coordinator_bind_address=f"127.0.0.1:{port}",
    num_processes=PROCESSES,
    process_id=process_id,
    initialization_timeout=60,
)
assert jax.process_count() == PROCESSES and jax.device_count() == PROCESSES * LOCAL_DEVICES

from call_log import Calls, recorded_matmul

import xlabind
from xlabind.ops import map_coordinates

MESH = Mesh(np.array(jax.devices()), ("d",))


calls = Calls()


def global_array(values, spec=P("d")):
    """`values` (the same on every process) as one array over both processes."""
    values = np.asarray(values)
    sharding = NamedSharding(MESH, spec)
    return jax.make_array_from_callback(values.shape, sharding, lambda index: values[index])


def gathered(x) -> list:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True)).tolist()


def doubled(x):
    calls.record(x)
    return 2 * np.asarray(x)


ROWS = np.arange(64.0).reshape(16, 4)


def case_no_rule():
    op = xlabind.callback(doubled, lambda x: x)
    return {"y": gathered(jax.jit(op)(global_array(ROWS)))}


def case_rule():
    op = xlabind.callback(doubled, lambda x: x, sharding_rule="b n -> b n")
    y = jax.jit(op)(global_array(ROWS))
    return {"y": gathered(y), "spec": str(y.sharding.spec)}


def case_grad():
    op = xlabind.linear(doubled, doubled, lambda x: x, sharding_rule="b n -> b n")
    g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(op(x)))))(global_array(ROWS))
    return {"g": gathered(g)}


def case_contraction():
    op = recorded_matmul(calls)
    a, b = np.arange(48.0).reshape(3, 16) / 16, np.arange(32.0).reshape(16, 2) / 16
    a_, b_ = global_array(a, P(None, "d")), global_array(b, P("d"))
    y = jax.jit(op)(a_, b_).block_until_ready()
    forward = sorted(calls.take())
    ga, gb = jax.jit(jax.grad(lambda a, b: jnp.sum(jnp.sin(op(a, b))), argnums=(0, 1)))(a_, b_)
    return {"y": gathered(y), "forward_calls": forward, "ga": gathered(ga), "gb": gathered(gb)}


def case_vmap(method):
    def cumsum(x):
        calls.record(x)
        return np.cumsum(np.asarray(x), axis=-1)

    def cumsum_native(x, *, batch_axes):
        calls.record(x)
        axis = -1 if batch_axes[0] == (None,) or batch_axes[0][-1] != x.ndim - 1 else -2
        return np.cumsum(np.asarray(x), axis=axis)

    def native_shape(x, *, batch_axes):
        if batch_axes is None:
            return x
        return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])

    if method == "native":
        op = xlabind.callback(
            cumsum_native, native_shape, vmap_method=method, sharding_rule="n -> n"
        )
    else:
        op = xlabind.callback(cumsum, lambda x: x, vmap_method=method, sharding_rule="n -> n")
    y = jax.jit(jax.vmap(op))(global_array(ROWS))
    return {"y": gathered(y), "spec": str(y.sharding.spec)}


def case_shard_map():
    op = xlabind.linear(doubled, doubled, lambda x: x)
    f = jax.shard_map(op, mesh=MESH, in_specs=P("d"), out_specs=P("d"))
    x = global_array(ROWS)
    y = jax.jit(f)(x).block_until_ready()
    forward = sorted(calls.take())
    g = jax.jit(jax.grad(lambda x: jnp.sum(f(x) ** 2)))(x)
    return {"y": gathered(y), "forward_calls": forward, "g": gathered(g)}


GRID = np.sin(np.arange(6 * 7 * 5.0)).reshape(6, 7, 5)
COORDS = [np.linspace(-0.5, s - 0.3, 64) for s in GRID.shape]


def case_map_coordinates(mode):
    def loss(grid, *coords):
        return jnp.sum(jnp.sin(map_coordinates(grid, list(coords), 1, mode, cval=0.5)))

    grid, coords = global_array(GRID, P()), [global_array(c) for c in COORDS]
    values = jax.jit(lambda g, *c: map_coordinates(g, list(c), 1, mode, cval=0.5))(grid, *coords)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(grid, *coords)
    return {
        "values": gathered(values),
        "spec": str(values.sharding.spec),
        "grads": [gathered(g) for g in grads],
    }


def case_different_registry_keys():
    # Process 1 has bound more functions: the same op has another key there.
    if process_id == 1:
        spare = [xlabind.callback(doubled, lambda x: x) for _ in range(3)]
        for s in spare:
            s(np.ones(2))
        calls.take()
    op = xlabind.callback(doubled, lambda x: x, sharding_rule="b n -> b n")
    return {"y": gathered(jax.jit(lambda x: op(x) + 1)(global_array(ROWS)))}


def case_failure(rule, failing_process):
    def refuses(x):
        calls.record(x)
        if jax.process_index() == failing_process:
            raise ValueError(f"refused on process {failing_process}")
        return np.asarray(x)

    op = xlabind.callback(refuses, lambda x: x, sharding_rule=rule, name="refuses")
    start = time.monotonic()
    try:
        jax.jit(lambda x: jnp.sum(op(x)) + x)(global_array(ROWS)).block_until_ready()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "seconds": time.monotonic() - start}
    return {"error": None, "seconds": time.monotonic() - start}


CASES = [
    ("no_rule", case_no_rule),
    ("rule", case_rule),
    ("grad", case_grad),
    ("contraction", case_contraction),
    *((f"vmap_{m}", lambda m=m: case_vmap(m)) for m in xlabind.VMAP_METHODS),
    ("shard_map", case_shard_map),
    *((f"map_coordinates_{m}", lambda m=m: case_map_coordinates(m)) for m in ("constant", "wrap")),
    ("different_registry_keys", case_different_registry_keys),
    # Failures last: the runtime goes on after them, but nothing else needs it.
    ("failure_with_rule", lambda: case_failure("b n -> b n", failing_process=1)),
    # Without a rule the call runs on the first device, which process 0 has.
    ("failure_without_rule", lambda: case_failure(None, failing_process=0)),
]


def main() -> None:
    report = {"process": jax.process_index(), "cases": {}}
    only = os.environ.get("XLABIND_MULTIPROCESS_CASES")
    for name, case in CASES:
        if only and name not in only.split(","):
            continue
        try:
            result = case()
        except Exception:
            result = {"exception": traceback.format_exc()}
        jax.effects_barrier()
        result["calls"] = sorted(calls.take())
        report["cases"][name] = result
        with open(output, "w") as f:  # after every case: a hang still shows how far it got
            json.dump(report, f)
    report["done"] = True
    with open(output, "w") as f:
        json.dump(report, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
