"""How much a call through xlabind costs, next to the alternatives, in one run.

    tools/bazel run //tools:benchmark -- --json /tmp/bench.json
    tools/bazel run //tools:benchmark -- --quick      # a few seconds, for smoke tests
    tools/bazel run //tools:benchmark -- --grid-sweep # map_coordinates on 32^3 to 96^3 grids

Every case is a jitted function of one float64 array (jax_enable_x64 is on),
timed on the CPU:

  * the jit dispatch floor: ``jax.jit(jnp.copy)``;
  * a native no-op FFI call (xlabind's ``NOOP_TARGET`` through
    ``jax.ffi.ffi_call``): the cost of any custom call, and the unit of the
    "vs native" column;
  * no-op host callbacks: ``jax.pure_callback``,
    ``jax.experimental.buffer_callback`` (where this jax has it), and
    ``xlabind.callback`` in place (no copy) and returning (one copy), at
    n = 1 and n = 10^6. The in-place no-ops run with the unwritten-result
    check off: a function that writes nothing is refused with it on;
  * an in-place callback that writes its result once (``out[...] = x``)
    with the check on and off (what the check costs), against a native copy
    (``xlabind_copy``, one memcpy), at n = 1 and n = 10^6;
  * the primal call of a differentiable op (``xlabind.linear``) next to the
    same no-op as a plain ``xlabind.callback``;
  * ``jax.vmap`` over a batch of 64 vectors of an elementwise ``np.sin``,
    with ``vmap_method="native"`` (one call) and ``"sequential"`` (64 calls);
  * ``xlabind.ops.map_coordinates`` and jax's, called eagerly (no jit around
    them) on 8 points: what one dispatch of the op costs;
  * ``xlabind.ops.map_coordinates`` against ``jax.scipy.ndimage.map_coordinates``
    (2^20 points in a 64^3 float64 grid, order 1): the values, and the
    gradient in the grid. These take milliseconds a call and get rounds of
    their own (a twentieth as many, at least 5), each comparison (ours and
    jax's values; ours and jax's gradients) interleaved within itself: jax's
    gradient churns through hundreds of megabytes, which would evict the
    coordinates between two calls of the values and time the refill instead;
  * ``xlabind.ops.map_coordinates`` of order 3 against SciPy and a jnp
    reference (``_cubic_by_gathers``), values and the gradient in the grid,
    the same way. In these groups each timed call follows an untimed call of
    the same case: XLA hands a call's temporaries back after its result is
    ready, and for the jnp gradient (half a gigabyte of gathered nodes) that
    work runs on into the next call. On 2 cores it took a core from whichever
    case came next: xlabind's order-3 gradient measured 84 ms right after the
    jnp one and 42 ms after one of its own. So each case is timed the way a
    loop of it runs, after a call of its own kind. (A pause instead of the
    untimed call was tried: an idle pause let XLA's threads fall asleep, and
    jax's order-1 values took 9 ms after one against 6.6 ms without.)

Three more measurements run in processes of their own (each needs a fresh jax):

  * ``sharded``: on 8 virtual CPU devices (and on as many as there are
    cores, where no device waits for a core), a no-op ``xlabind.callback`` once
    per device (with a sharding rule) and once per program, each with and
    without the exchange of the calls' status that stops every device when
    one fails (python/xlabind/_lowering/call_status.py): what that collective costs;
  * ``map_coordinates_sharded``: map_coordinates on 2^22 points (2^20 with
    --quick) sharded over 8 virtual CPU devices, 64^3 float64 grid: values and
    the grid's gradient split by points (the op's sharding rule) against once
    per program, and one grid's all-reduce (what the split gradient adds);
  * ``map_coordinates_threads``: map_coordinates (2^20 points, 64^3 float64
    grid) with its CPU loops on XLA's intra-op thread pool and on threads of
    its own (the handler reads XLABIND_MAP_COORDINATES_OWN_THREADS on every
    call): alone, beside a 768×768 matmul in the same program, and split over
    8 virtual CPU devices whose calls all share one pool;
  * ``lifetime``: how much the process grows over a loop that creates, jits,
    calls and drops bound functions closing over 1 MB each, next to the same
    loop written with ``jax.pure_callback`` (1,000 each; 50 with --quick).

``--spline-orders`` measures only map_coordinates of orders 2 to 5 (mirror,
2^20 points in a 64^3 float64 grid, prefilter included): xlabind's values
against SciPy's, and xlabind's gradient in the grid.

``--grid-sweep`` measures only the map_coordinates values, ours against jax's,
on cubic float64 grids from 32^3 to 96^3 (2^20 points each): as a grid
outgrows the L2 caches (1 MiB a core on the benchmark's machines; a 64^3
grid is 2 MiB), both sides pay about the same extra time for the misses, which is
what bounds the 64^3 ratio.

Method: every case is compiled and called a few times first. Then, for many
rounds, each case in turn (in a fresh random order each round) is called a few
times, each call timed alone as ``f(x).block_until_ready()`` with
``time.perf_counter``. The table gives the median over all timed calls; the
JSON adds percentiles. glibc malloc is told to keep freed memory (see
`pin_malloc`), so that page faults do not drown the large cases. The ratios in
the summary are what the issue sets targets for; nothing here asserts on them,
since timings depend on the machine.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import importlib
import json
import os
import platform
import random
import sys
import time
from typing import Any, Callable

# xlabind's callbacks run on the CPU only; on a machine with an accelerator jax
# would otherwise put the arrays (and the computation) there.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the platform choice above)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import xlabind  # noqa: E402
from xlabind._runtime import extension as _extension  # noqa: E402

try:
    from jax.experimental.buffer_callback import buffer_callback
except ImportError:  # older jax: the case is reported as missing
    buffer_callback = None

SMALL = 1
LARGE = 10**6
BATCH = 64
VECTOR = 1000

DEFAULT_ROUNDS = 1000
QUICK_ROUNDS = 20
CALLS_PER_ROUND = 5
WARMUP_CALLS = 3


@dataclasses.dataclass
class Case:
    key: str  # stable name for the JSON and the ratio lines
    label: str
    fn: Callable[[jax.Array], Any]  # already jitted
    x: jax.Array
    expected: np.ndarray | None = None  # checked once, so a broken case is not timed
    times: list[float] = dataclasses.field(default_factory=list)
    #: Whether in-place results are checked to be written during this case
    #: (a no-op leaves its result unwritten, which the check refuses).
    checks_unwritten: bool = True

    @property
    def n(self) -> int:
        return int(self.x.size)

    @property
    def size_label(self) -> str:
        return "x".join(str(d) for d in self.x.shape) if self.x.ndim > 1 else str(self.n)


def _like(x) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _vector(n: int) -> jax.Array:
    # Values in [0, 1): every case sees finite, ordinary numbers.
    return jnp.asarray(np.random.default_rng(n).random(n))


# -- the cases ---------------------------------------------------------------
def jit_floor(n: int) -> Case:
    return Case("jit_copy", "jax.jit(jnp.copy) (dispatch floor)", jax.jit(jnp.copy), _vector(n))


def native_noop(n: int) -> Case:
    def f(x):
        # The handler writes nothing: the result is whatever XLA allocated.
        return jax.ffi.ffi_call(_extension.NOOP_TARGET, _like(x))(x)

    return Case(f"native_noop_{n}", "native no-op (jax.ffi.ffi_call)", jax.jit(f), _vector(n))


def pure_callback_noop(n: int) -> Case:
    def f(x):
        return jax.pure_callback(lambda a: np.asarray(a), _like(x), x)

    x = _vector(n)
    return Case(f"pure_callback_{n}", "jax.pure_callback no-op", jax.jit(f), x, np.asarray(x))


def buffer_callback_noop(n: int) -> Case | None:
    if buffer_callback is None:
        return None

    def f(x):
        # Like xlabind's in-place no-op: the callback leaves `out` unwritten.
        return buffer_callback(lambda ctx, out, a: None, _like(x))(x)

    return Case(f"buffer_callback_{n}", "jax buffer_callback no-op", jax.jit(f), _vector(n))


def _noop_into(x, *, out):
    del x, out


def xlabind_in_place(n: int) -> Case:
    op = xlabind.callback(_noop_into, lambda x: x, in_place=True)
    return Case(f"xlabind_in_place_{n}", "xlabind.callback no-op, in place (unchecked)",
                jax.jit(op), _vector(n), checks_unwritten=False)


def xlabind_returning(n: int) -> Case:
    op = xlabind.callback(lambda x: x, lambda x: x)
    x = _vector(n)
    return Case(f"xlabind_returning_{n}", "xlabind.callback no-op, returning (1 copy)",
                jax.jit(op), x, np.asarray(x))


def xlabind_linear(n: int) -> Case:
    op = xlabind.linear(_noop_into, _noop_into, lambda x: x, in_place=True)
    return Case(f"xlabind_linear_{n}", "xlabind.linear no-op, in place (primal, unchecked)",
                jax.jit(op), _vector(n), checks_unwritten=False)


def _copy_into(x, *, out):
    out[...] = x


def xlabind_in_place_copy(n: int, checked: bool = True) -> Case:
    # The jaxbind drop-in's like-for-like baseline: it must write its result.
    # Unchecked: what the unwritten-result check costs.
    op = xlabind.callback(_copy_into, lambda x: x, in_place=True)
    x = _vector(n)
    suffix = "" if checked else "_unchecked"
    return Case(f"xlabind_in_place_copy{suffix}_{n}",
                "xlabind.callback in place, out[...] = x" + ("" if checked else " (unchecked)"),
                jax.jit(op), x, np.asarray(x), checks_unwritten=checked)


def native_copy(n: int) -> Case:
    def f(x):
        return jax.ffi.ffi_call("xlabind_copy", _like(x))(x)

    x = _vector(n)
    return Case(f"native_copy_{n}", "native copy (memcpy, jax.ffi.ffi_call)", jax.jit(f), x,
                np.asarray(x))


def _jaxbind_copy(out, args, kwargs_dump):
    del kwargs_dump
    out[0][...] = args[0]  # jaxbind callbacks must write their results (one element here)


def jaxbind_noop(n: int) -> Case:
    from xlabind import jaxbind

    def abstract(x):
        return ((x.shape, x.dtype),)

    op = jaxbind.get_linear_call(_jaxbind_copy, _jaxbind_copy, abstract, abstract)
    x = _vector(n)
    return Case(f"jaxbind_{n}", "xlabind.jaxbind get_linear_call, out[0][...] = args[0]",
                jax.jit(lambda x: op(x)[0]), x, np.asarray(x))


def _sin_native(x, *, out, batch_axes):
    del batch_axes  # elementwise: the layout of x is the layout of out
    np.sin(x, out=out)


def _sin_native_spec(x, *, batch_axes):
    if batch_axes is None:
        return x
    # The result keeps the operand's layout, so its newest batch axis too.
    return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])


def _sin_into(x, *, out):
    np.sin(x, out=out)


def _batch() -> jax.Array:
    return jnp.asarray(np.random.default_rng(BATCH).random((BATCH, VECTOR)))


def vmap_native() -> Case:
    op = xlabind.callback(_sin_native, _sin_native_spec, in_place=True, vmap_method="native")
    x = _batch()
    return Case("vmap_native", "vmap(np.sin), vmap_method='native'", jax.jit(jax.vmap(op)), x,
                np.sin(np.asarray(x)))


def vmap_sequential() -> Case:
    op = xlabind.callback(_sin_into, lambda x: x, in_place=True, vmap_method="sequential")
    x = _batch()
    return Case("vmap_sequential", "vmap(np.sin), vmap_method='sequential'",
                jax.jit(jax.vmap(op)), x, np.sin(np.asarray(x)))


def eager_map_coordinates(who: str) -> Case:
    """One eager call (no jax.jit around it) on a few points: what dispatch costs
    when xlabind.ops are called like NumPy functions."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    grid = jnp.asarray(np.sin(np.arange(64.0)))
    f = ours if who == "xlabind" else jax_map
    x = jnp.asarray(np.linspace(0.5, 60.5, 8))
    return Case(f"eager_map_coordinates_{who}", f"eager map_coordinates, 8 points, {who}",
                lambda c: f(grid, [c], 1, "mirror"), x, np.asarray(jax_map(grid, [x], 1, "mirror")))


# -- native ops (their own, slower section) ----------------------------------
def _map_coordinates_problem(side: int, points: int, seed: int):
    """A side^3 float64 grid and `points` random points inside it."""
    rng = np.random.default_rng(seed)
    grid = jnp.asarray(rng.standard_normal((side, side, side)))
    coords = [jnp.asarray(rng.uniform(0.0, side - 1.0, points)) for _ in range(3)]
    return grid, coords


def _map_coordinates_values(grid: jax.Array, coords: list[jax.Array], tag: str) -> list[Case]:
    """Ours and jax's values at `coords`, order 1, as two cases keyed by `tag`."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    expected = np.asarray(jax_map(grid, coords, 1))
    cases = []
    for who, f in (("xlabind", ours), ("jax", jax_map)):
        # The coordinates are arguments, not constants XLA could fold the work into.
        forward = jax.jit(lambda g, c, f=f: f(g, c, 1))
        cases.append(Case(f"{tag}_{who}", f"{tag}, {who}",
                          lambda g, forward=forward: forward(g, coords), grid, expected))
    return cases


def map_coordinates_groups() -> list[list[Case]]:
    """xlabind.ops.map_coordinates against jax.scipy.ndimage.map_coordinates, on
    2^20 points in a 64^3 float64 grid, order 1: the values and the gradient in
    the grid (a scatter-add in both), as two groups to be measured apart."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    grid, coords = _map_coordinates_problem(64, 1 << 20, seed=64)
    grad_expected = np.asarray(jax.grad(lambda g: jax_map(g, coords, 1).sum())(grid))
    gradients = []
    for who, f in (("xlabind", ours), ("jax", jax_map)):
        grad = jax.jit(jax.grad(lambda g, c, f=f: f(g, c, 1).sum()))
        gradients.append(Case(f"map_coordinates_grad_{who}",
                              f"map_coordinates grad in input, {who}",
                              lambda g, grad=grad: grad(g, coords), grid, grad_expected))
    return [_map_coordinates_values(grid, coords, "map_coordinates"), gradients]


class _Ready:
    """A NumPy result where the timing loop expects a jax array."""

    def __init__(self, value):
        self.value = value

    def block_until_ready(self):
        return self.value


def _cubic_by_gathers(coefficients: jax.Array, coords: list[jax.Array]) -> jax.Array:
    """The pure-jnp reference: order-3 B-spline interpolation of coefficients
    already filtered (mirror mode), each point's 4^3 = 64 nodes gathered
    with their weights. What a user writes without xlabind."""
    n = coefficients.shape
    weights, indices = [], []
    for axis, c in enumerate(coords):
        base = jnp.floor(c)
        t = c - base
        w = jnp.stack([(1 - t) ** 3 / 6, (3 * t**3 - 6 * t**2 + 4) / 6,
                       (-3 * t**3 + 3 * t**2 + 3 * t + 1) / 6, t**3 / 6], axis=-1)
        period = 2 * (n[axis] - 1)
        i = jnp.mod(base.astype(jnp.int32)[:, None] + jnp.arange(-1, 3, dtype=jnp.int32), period)
        indices.append(jnp.where(i >= n[axis], period - i, i))
        weights.append(w)
    flat = (indices[0][:, :, None, None] * (n[1] * n[2])
            + indices[1][:, None, :, None] * n[2] + indices[2][:, None, None, :])
    w = weights[0][:, :, None, None] * weights[1][:, None, :, None] * weights[2][:, None, None, :]
    return jnp.sum(coefficients.reshape(-1)[flat] * w, axis=(1, 2, 3))


def _scipy_spline(host_coords: np.ndarray, order: int) -> Callable[[jax.Array], _Ready]:
    """SciPy's map_coordinates of `order` (mirror, its prefilter) at
    host_coords, as a case's function."""
    import scipy.ndimage

    return lambda g: _Ready(scipy.ndimage.map_coordinates(np.asarray(g), host_coords,
                                                          order=order, mode="mirror"))


def spline_groups() -> list[list[Case]]:
    """xlabind.ops.map_coordinates of order 3 (mirror) on 2^20 points in a 64^3
    float64 grid: the values against SciPy's (prefilter included on both
    sides) and the pure-jnp reference above (given the coefficients: its
    prefilter not timed), then the gradient in the grid against the
    reference's (xlabind's through the prefilter's transpose too)."""
    from xlabind.ops import map_coordinates as ours
    from xlabind.ops import spline_filter

    grid, coords = _map_coordinates_problem(64, 1 << 20, seed=3)
    coefficients = spline_filter(grid, 3, "mirror")
    host_coords = np.stack([np.asarray(c) for c in coords])
    scipy_values = _scipy_spline(host_coords, 3)
    expected = scipy_values(grid).value
    forward = jax.jit(lambda g, c: ours(g, c, 3, "mirror"))
    reference = jax.jit(_cubic_by_gathers)
    values = [
        Case("spline_xlabind", "map_coordinates order 3, xlabind",
             lambda g: forward(g, coords), grid, expected),
        Case("spline_scipy", "map_coordinates order 3, SciPy", scipy_values, grid, expected),
        Case("spline_jnp", "map_coordinates order 3, jnp gathers (coefficients given)",
             lambda g: reference(coefficients, coords), grid, expected),
    ]
    grad = jax.jit(jax.grad(lambda g, c: jnp.sum(ours(g, c, 3, "mirror") ** 2)))
    reference_grad = jax.jit(jax.grad(lambda k, c: jnp.sum(_cubic_by_gathers(k, c) ** 2)))
    gradients = [
        Case("spline_grad_xlabind", "map_coordinates order 3 grad in input, xlabind",
             lambda g: grad(g, coords), grid),
        Case("spline_grad_jnp", "map_coordinates order 3 grad in coefficients, jnp gathers",
             lambda g: reference_grad(coefficients, coords), grid),
    ]
    return [values, gradients]


# Grid sides for --grid-sweep: from well inside one core's L2 (1 MiB on the
# machines the targets were set for) to well past it; 64^3 float64 is 2 MiB.
SWEEP_SIDES = (32, 48, 56, 60, 64, 72, 96)


def map_coordinates_sweep(sides=SWEEP_SIDES, points: int = 1 << 20) -> list[list[Case]]:
    """The values comparison of map_coordinates_groups on side^3 grids, one
    group per side: how the ratio to jax moves as the grid outgrows a cache."""
    return [_map_coordinates_values(*_map_coordinates_problem(side, points, seed=side),
                                    f"map_coordinates_{side}cubed")
            for side in sides]


def print_sweep(groups: list[list[Case]], results: dict[str, dict]) -> None:
    print(f"{'grid':>6}  {'MiB':>6}  {'xlabind ms':>10}  {'jax ms':>8}  {'jax / xlabind':>13}")
    for ours, theirs in groups:
        side = ours.x.shape[0]
        mine, jax_ms = (results[c.key]["median_us"] / 1e3 for c in (ours, theirs))
        print(f"{side:>4}^3  {ours.x.nbytes / 2**20:>6.2f}  {mine:>10.2f}  {jax_ms:>8.2f}  "
              f"{jax_ms / mine:>13.2f}")


def spline_orders_groups(points: int = 1 << 20) -> list[list[Case]]:
    """For each spline order 2 to 5 (mirror, 2^`points` in a 64^3 float64
    grid, prefilter included): xlabind's values against SciPy's, and
    xlabind's gradient in the grid (nothing else differentiates these)."""
    from xlabind.ops import map_coordinates as ours

    grid, coords = _map_coordinates_problem(64, points, seed=3)
    host_coords = np.stack([np.asarray(c) for c in coords])
    groups = []
    for order in (2, 3, 4, 5):
        scipy_values = _scipy_spline(host_coords, order)
        expected = scipy_values(grid).value
        values = jax.jit(lambda g, c, k=order: ours(g, c, k, "mirror"))
        grad = jax.jit(jax.grad(lambda g, c, k=order: jnp.sum(ours(g, c, k, "mirror") ** 2)))
        groups.append([
            Case(f"spline{order}_xlabind", f"order {order}, xlabind",
                 lambda g, f=values: f(g, coords), grid, expected),
            Case(f"spline{order}_scipy", f"order {order}, SciPy", scipy_values, grid, expected),
            Case(f"spline{order}_grad_xlabind", f"order {order} grad, xlabind",
                 lambda g, f=grad: f(g, coords), grid),
        ])
    return groups


def print_spline_orders(groups: list[list[Case]], results: dict[str, dict]) -> None:
    print(f"{'order':>5}  {'xlabind ms':>10}  {'SciPy ms':>9}  {'SciPy / xlabind':>15}  "
          f"{'xlabind grad ms':>15}")
    for ours, scipy_case, grad in groups:
        mine, theirs, slope = (results[c.key]["median_us"] / 1e3
                               for c in (ours, scipy_case, grad))
        order = ours.key[len("spline")]
        print(f"{order:>5}  {mine:>10.1f}  {theirs:>9.1f}  {theirs / mine:>15.2f}  {slope:>15.1f}")


def all_cases() -> tuple[list[Case], list[str]]:
    """The cases in table order, and notes on those this jax cannot run."""
    makers = [
        lambda: jit_floor(SMALL),
        lambda: native_noop(SMALL),
        lambda: native_noop(LARGE),
        lambda: pure_callback_noop(SMALL),
        lambda: pure_callback_noop(LARGE),
        lambda: buffer_callback_noop(SMALL),
        lambda: buffer_callback_noop(LARGE),
        lambda: xlabind_in_place(SMALL),
        lambda: xlabind_in_place(LARGE),
        lambda: xlabind_returning(LARGE),
        lambda: xlabind_linear(SMALL),
        lambda: native_copy(SMALL),
        lambda: native_copy(LARGE),
        lambda: xlabind_in_place_copy(SMALL),
        lambda: xlabind_in_place_copy(SMALL, checked=False),
        lambda: xlabind_in_place_copy(LARGE),
        lambda: xlabind_in_place_copy(LARGE, checked=False),
        lambda: jaxbind_noop(SMALL),
        vmap_native,
        vmap_sequential,
        lambda: eager_map_coordinates("xlabind"),
        lambda: eager_map_coordinates("jax"),
    ]
    cases = [c for c in (make() for make in makers) if c is not None]
    notes = [] if buffer_callback is not None else [
        f"jax {jax.__version__} has no jax.experimental.buffer_callback: its cases are skipped"]
    return cases, notes


# -- in processes of their own ----------------------------------------------
# 8 devices on this machine's cores (the tests' setting), and as many as it has
# cores (no device waits for a core in a collective).
SHARDED_DEVICES = (8, min(os.cpu_count() or 1, 8))


def sharded_worker(rounds: int, calls: int) -> dict:
    """Medians (µs) of the sharded cases, in this process (on all its devices)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from xlabind._lowering import call_status

    devices = len(jax.devices())
    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.device_put(_vector(devices * 4).reshape(devices, 4),
                       NamedSharding(mesh, PartitionSpec("d")))
    cases = [Case("sharded_jnp", "jnp (x + 1)", jax.jit(lambda x: x + 1), x,
                  checks_unwritten=False)]
    for exchange in (True, False):
        call_status._EXCHANGE_STATUS = exchange  # read when lowering: compile now
        tag = "" if exchange else "_unchecked"
        label = "" if exchange else ", without the status exchange"
        for key, rule in (("per_device", "r c -> r c"), ("once", None)):
            op = xlabind.callback(_noop_into, lambda x: x, in_place=True, sharding_rule=rule)
            f = jax.jit(op)
            f.lower(x).compile()
            # The no-op leaves its result unwritten: timed with that check off.
            cases.append(Case(f"sharded_{key}{tag}", f"no-op callback, {key.replace('_', ' ')}"
                              f"{label}", f, x, checks_unwritten=False))
        warm_up(cases[-2:])
    call_status._EXCHANGE_STATUS = True
    warm_up(cases[:1])
    measure(cases, rounds, calls)
    return {"devices": devices,
            "results": {c.key: {"label": c.label, **summarize(c)} for c in cases}}


def map_coordinates_sharded_worker(points: int, rounds: int) -> dict:
    """Medians (µs) of map_coordinates on `points` points sharded over this
    process's devices (64³ float64 grid, order 1): values and the grid's
    gradient, split by points (the op's sharding rule) and once per program
    (without it), and the all-reduce of one grid (what the split gradient adds)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    # The module (xlabind.ops exports the function under the same name).
    module = importlib.import_module("xlabind.ops.map_coordinates")
    mesh = Mesh(np.array(jax.devices()), ("d",))
    grid, coords = _map_coordinates_problem(64, points, seed=3)
    coords = [jax.device_put(c, NamedSharding(mesh, PartitionSpec("d"))) for c in coords]
    grid = jax.device_put(grid, NamedSharding(mesh, PartitionSpec()))

    def values(g, *c):
        return module.map_coordinates(g, list(c), 1, "nearest")

    def grid_gradient(g, *c):
        return jax.grad(lambda g: jnp.sum(values(g, *c) ** 2))(g)

    cases = []
    for sharded in (True, False):
        module._SHARDED = sharded  # read when tracing: compile now
        tag = "split" if sharded else "once"
        for name, fn in (("values", values), ("grid_gradient", grid_gradient)):
            f = jax.jit(fn)  # traced (reading _SHARDED) by warm_up below
            cases.append(Case(f"mc_{name}_{tag}", f"{name.replace('_', ' ')}, "
                              f"{'split by points' if sharded else 'once per program'}",
                              lambda x, f=f: f(x, *coords), grid))
        warm_up(cases[-2:])
    module._SHARDED = True
    reduce = jax.jit(jax.shard_map(lambda g: jax.lax.psum(g, "d"), mesh=mesh,
                                   in_specs=PartitionSpec(), out_specs=PartitionSpec(),
                                   check_vma=False))
    cases.append(Case("mc_all_reduce", "all-reduce of one grid (64³ float64)", reduce, grid))
    warm_up(cases[-1:])
    np.testing.assert_allclose(cases[0].fn(grid), cases[2].fn(grid), rtol=1e-12)
    np.testing.assert_allclose(cases[1].fn(grid), cases[3].fn(grid), rtol=1e-9, atol=1e-9)
    measure(cases, rounds, 1)
    return {"devices": len(jax.devices()), "points": points,
            "results": {c.key: {"label": c.label, **summarize(c)} for c in cases}}


# Read by the CPU map_coordinates handlers on every call (cpu_handlers.cc):
# set, they start threads of their own instead of using XLA's intra-op pool.
OWN_THREADS_VARIABLE = "XLABIND_MAP_COORDINATES_OWN_THREADS"


def map_coordinates_threads_worker(points: int, rounds: int) -> dict:
    """Medians (µs) of map_coordinates (64³ float64 grid, order 1) with its
    loops on XLA's intra-op pool and on threads of its own: alone; beside a
    matmul XLA runs in the same program; split over this process's devices
    (each device's call on the same pool)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    module = importlib.import_module("xlabind.ops.map_coordinates")
    grid, coords = _map_coordinates_problem(64, points, seed=5)
    mesh = Mesh(np.array(jax.devices()), ("d",))
    split = [jax.device_put(c, NamedSharding(mesh, PartitionSpec("d"))) for c in coords]
    matrix = jax.random.normal(jax.random.key(0), (768, 768), jnp.float64)

    def values(g, c):
        return module.map_coordinates(g, list(c), 1, "nearest")

    def grid_gradient(g, c):
        return jax.grad(lambda g: jnp.sum(values(g, c) ** 2))(g)

    # Coordinates and matrix are arguments: as constants XLA would fold the matmul.
    programs = {
        "values": (jax.jit(values), coords),
        "grid_gradient": (jax.jit(grid_gradient), coords),
        # One result: the sum keeps both computations, which XLA may run at once.
        "values_beside_matmul": (jax.jit(lambda g, c, m: jnp.sum(values(g, c))
                                         + jnp.sum(m @ m)), coords, matrix),
        "grid_gradient_beside_matmul": (jax.jit(lambda g, c, m: grid_gradient(g, c)
                                                + jnp.sum(m @ m)), coords, matrix),
        "values_split": (jax.jit(values), split),
        "grid_gradient_split": (jax.jit(grid_gradient), split),
    }

    def on(own: bool, f, *args):
        def call(g):
            if own:
                os.environ[OWN_THREADS_VARIABLE] = "1"
            else:
                os.environ.pop(OWN_THREADS_VARIABLE, None)
            return f(g, *args)
        return call

    cases = []
    for name, (f, *args) in programs.items():
        for own in (False, True):
            who = "own threads" if own else "XLA's pool"
            cases.append(Case(f"mc_{name}_{'own' if own else 'pool'}",
                              f"{name.replace('_', ' ')}, {who}", on(own, f, *args), grid))
    warm_up(cases)
    for pool, own in zip(cases[::2], cases[1::2]):  # the same numbers either way
        np.testing.assert_array_equal(pool.fn(grid), own.fn(grid))
    measure(cases, rounds, 1)
    os.environ.pop(OWN_THREADS_VARIABLE, None)
    return {"devices": len(jax.devices()), "points": points,
            "results": {c.key: {"label": c.label, **summarize(c)} for c in cases}}


def print_map_coordinates_threads(report: dict) -> None:
    results = report["results"]
    print(f"\nmap_coordinates on {report['points']:,} points, 64³ float64 grid, {os.cpu_count()} "
          f"cores: XLA's intra-op pool against threads of its own (median µs; split: over "
          f"{report['devices']} CPU devices):")
    for row in results.values():
        print(f"  {row['label']:<58} {row['median_us']:>10.1f}")
    names = dict.fromkeys(key[3:].rsplit("_", 1)[0] for key in results)
    for name in names:
        ratio = results[f"mc_{name}_own"]["median_us"] / results[f"mc_{name}_pool"]["median_us"]
        print(f"  {name.replace('_', ' ')}: own threads / XLA's pool = {ratio:.2f}x")


def print_map_coordinates_sharded(report: dict) -> None:
    results = report["results"]
    print(f"\nmap_coordinates on {report['points']:,} points sharded over {report['devices']} "
          f"CPU devices, {os.cpu_count()} cores, 64³ float64 grid (median µs):")
    for row in results.values():
        print(f"  {row['label']:<58} {row['median_us']:>10.1f}")
    for name in ("values", "grid_gradient"):
        ratio = results[f"mc_{name}_once"]["median_us"] / results[f"mc_{name}_split"]["median_us"]
        print(f"  {name.replace('_', ' ')}: once per program / split = {ratio:.2f}x")
    share = results["mc_all_reduce"]["median_us"] / results["mc_grid_gradient_split"]["median_us"]
    print(f"  the reduction (one grid's all-reduce) is {100 * share:.1f}% of the split gradient")


def lifetime_worker(kind: str, loops: int) -> dict:
    """RSS growth (MiB) over `loops` bound functions made, jitted, called and
    dropped, each closing over 1 MiB, in this process."""
    x = jnp.ones(4)

    def rss_mib() -> float:
        gc.collect()
        _extension.collect_released_callbacks()
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def one(i):
        payload = np.full(1 << 17, float(i))  # 1 MiB the function keeps

        def fn(a):
            return np.asarray(a) + payload[0]

        if kind == "xlabind":
            op = xlabind.callback(fn, lambda a: a)
            return jax.jit(lambda a: op(a) + 1)(x)
        return jax.jit(lambda a: jax.pure_callback(fn, jax.ShapeDtypeStruct(a.shape, a.dtype),
                                                   a) + 1)(x)

    for i in range(20):  # jax's own caches and allocator warmed up first
        one(i).block_until_ready()
    before = rss_mib()
    for i in range(loops):
        np.testing.assert_allclose(np.asarray(one(i)), i + 2.0)
    after = rss_mib()
    return {"kind": kind, "loops": loops, "growth_mib": after - before, "rss_mib": after,
            "live_callbacks": _extension.live_callback_data_count()}


def run_worker(args: list[str], env: dict | None = None) -> dict:
    """Runs this file as a worker in a fresh process; returns what it prints."""
    import subprocess

    out = subprocess.run([sys.executable, os.path.abspath(__file__), *args], check=True,
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_sharded(report: dict) -> None:
    results = report["results"]
    print(f"\nOn {report['devices']} CPU devices, {os.cpu_count()} cores (median µs):")
    for key, row in results.items():
        print(f"  {row['label']:<58} {row['median_us']:>8.1f}")
    for key in ("per_device", "once"):
        ratio = (results[f"sharded_{key}"]["median_us"]
                 / results[f"sharded_{key}_unchecked"]["median_us"])
        print(f"  status exchange, {key.replace('_', ' ')}: {ratio:.3f}x the call without it")


def print_lifetime(rows: list[dict]) -> None:
    print("\nProcess growth over a loop of bound functions (1 MiB closures) made, jitted, "
          "called, dropped:")
    for row in rows:
        print(f"  {row['kind']:<14} {row['loops']:>5} loops: {row['growth_mib']:+8.1f} MiB "
              f"(RSS {row['rss_mib']:.0f} MiB)")


# -- timing ------------------------------------------------------------------
def pin_malloc() -> bool:
    """Stops glibc malloc from handing freed memory back to the kernel.

    Every n = 10^6 call allocates an 8 MB result. With glibc's defaults, once
    the process has run a while, freeing it returns the pages to the kernel
    and the next call faults them back in: millions of page faults whose cost
    grows over the run and swamps what the cases differ in (a 400-round run
    measured 3.6 million faults, and 2-3x slower large cases, than with this).
    Returns whether it applied (glibc only).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    # 32 MiB is the largest mmap threshold glibc accepts on 64-bit machines.
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_threshold, 32 << 20))


def warm_up(cases: list[Case]) -> None:
    """Compiles every case, checks its result once, and runs it a few times."""
    for case in cases:
        _extension.set_checks_unwritten_results(case.checks_unwritten)
        result = case.fn(case.x).block_until_ready()
        if case.expected is not None:
            np.testing.assert_allclose(np.asarray(result), case.expected, rtol=1e-12, atol=1e-12,
                                       err_msg=f"benchmark case {case.key} computes a wrong result")
        for _ in range(WARMUP_CALLS):
            case.fn(case.x).block_until_ready()
    _extension.set_checks_unwritten_results(True)


def measure(cases: list[Case], rounds: int, calls: int, seed: int = 0,
            after_itself: bool = False) -> None:
    """Appends `rounds * calls` timings to every case, the cases interleaved;
    with `after_itself`, each timed call follows an untimed one of its case."""
    order = list(cases)
    rng = random.Random(seed)  # a fresh order each round, so no case always follows another
    clock = time.perf_counter
    for _ in range(rounds):
        rng.shuffle(order)
        # A collection inside a timed call would land on whichever case made
        # the garbage overflow; between rounds it lands on none.
        gc.disable()
        try:
            for case in order:
                f, x, times = case.fn, case.x, case.times
                _extension.set_checks_unwritten_results(case.checks_unwritten)
                for _ in range(calls):
                    if after_itself:
                        f(x).block_until_ready()
                    start = clock()
                    f(x).block_until_ready()
                    times.append(clock() - start)
        finally:
            gc.enable()
            _extension.set_checks_unwritten_results(True)


# -- reporting ---------------------------------------------------------------
def _us(seconds: float) -> float:
    return seconds * 1e6


def summarize(case: Case) -> dict:
    times = np.asarray(case.times)
    p10, p25, median, p75, p90 = np.percentile(times, [10, 25, 50, 75, 90])
    return {"key": case.key, "case": case.label, "n": case.n, "shape": list(case.x.shape),
            "calls": len(times), "median_us": _us(median), "p10_us": _us(p10),
            "p25_us": _us(p25), "p75_us": _us(p75), "p90_us": _us(p90),
            "min_us": _us(times.min())}


TARGETS = [
    # (name, numerator key, denominator key, target maximum or None)
    ("xlabind no-op / native no-op", f"xlabind_in_place_{SMALL}", f"native_noop_{SMALL}", 1.10),
    ("jaxbind drop-in / native no-op", f"jaxbind_{SMALL}", f"native_noop_{SMALL}", 1.15),
    ("jaxbind drop-in / in place, the same write", f"jaxbind_{SMALL}",
     f"xlabind_in_place_copy_{SMALL}", None),
    ("AD-wrapped / plain", f"xlabind_linear_{SMALL}", f"xlabind_in_place_{SMALL}", 1.05),
    ("in place, one write: checked / unchecked", f"xlabind_in_place_copy_{SMALL}",
     f"xlabind_in_place_copy_unchecked_{SMALL}", None),
    ("in place, one write / native copy", f"xlabind_in_place_copy_{SMALL}",
     f"native_copy_{SMALL}", None),
    ("in place, one write / native copy, n = 10^6", f"xlabind_in_place_copy_{LARGE}",
     f"native_copy_{LARGE}", None),
    (f"native vmap / sequential vmap (batch {BATCH})", "vmap_native", "vmap_sequential", None),
    ("eager map_coordinates, xlabind / jax", "eager_map_coordinates_xlabind",
     "eager_map_coordinates_jax", None),
]
SPEEDUPS = [
    # (name, jax's key, xlabind's key, target minimum): how many times faster xlabind is
    ("map_coordinates forward, jax / xlabind", "map_coordinates_jax", "map_coordinates_xlabind",
     1.5),
    ("map_coordinates grad in input, jax / xlabind", "map_coordinates_grad_jax",
     "map_coordinates_grad_xlabind", 5.0),
    ("order-3 forward, SciPy / xlabind", "spline_scipy", "spline_xlabind", 2.0),
    ("order-3 forward, jnp gathers / xlabind", "spline_jnp", "spline_xlabind", 4.0),
    ("order-3 grad in input, jnp gathers / xlabind", "spline_grad_jnp", "spline_grad_xlabind",
     10.0),
]


def ratios(results: dict[str, dict]) -> list[dict]:
    out = []
    for name, num, den, target in TARGETS:
        if num in results and den in results:
            value = results[num]["median_us"] / results[den]["median_us"]
            out.append({"name": name, "numerator": num, "denominator": den, "ratio": value,
                        "target_max": target, "target_min": None})
    for name, num, den, target in SPEEDUPS:
        if num in results and den in results:
            value = results[num]["median_us"] / results[den]["median_us"]
            out.append({"name": name, "numerator": num, "denominator": den, "ratio": value,
                        "target_max": None, "target_min": target})
    return out


def print_report(cases: list[Case], results: dict[str, dict], ratio_rows: list[dict],
                 notes: list[str], elapsed: float) -> None:
    unit = results[f"native_noop_{SMALL}"]["median_us"]
    width = max(len(c.label) for c in cases)
    print(f"{'case':<{width}}  {'n':>8}  {'median µs':>10}  {'vs native':>9}")
    print("-" * (width + 33))
    for case in cases:
        median = results[case.key]["median_us"]
        print(f"{case.label:<{width}}  {case.size_label:>8}  {median:>10.1f}  "
              f"{median / unit:>9.2f}")
    print()
    for row in ratio_rows:
        target = ""
        if row["target_max"] is not None:
            target = f" (target ≤ {row['target_max']:.2f})"
        elif row["target_min"] is not None:
            target = f" (target ≥ {row['target_min']:.2f})"
        print(f"{row['name'] + target + ':':<60} {row['ratio']:.3f}")
    for note in notes:
        print(f"note: {note}")
    calls = len(cases[0].times)
    slow = [c for c in cases if c.key.startswith(("map_coordinates", "spline"))]
    slow_calls = f", {len(slow[0].times)} per native-op case" if slow else ""
    print(f"\n{calls} timed calls per case{slow_calls}, {elapsed:.1f} s; jax {jax.__version__}, "
          f"{os.cpu_count()} CPUs")


def environment(malloc_pinned: bool) -> dict:
    import jaxlib

    return {"python": platform.python_version(), "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "numpy": np.__version__,
            "xlabind": xlabind.__version__, "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "devices": [str(d) for d in jax.devices()],
            "malloc_pinned": malloc_pinned}


def _output_path(path: str) -> str:
    # `bazel run` starts the program in its runfiles; a relative path means the
    # directory the user ran bazel from.
    return os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", ""), path)


def write_json(path: str, report: dict) -> None:
    with open(_output_path(path), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"rounds of interleaved calls (default {DEFAULT_ROUNDS}, "
                             f"{QUICK_ROUNDS} with --quick)")
    parser.add_argument("--calls-per-round", type=int, default=CALLS_PER_ROUND,
                        help=f"timed calls of each case per round (default {CALLS_PER_ROUND})")
    parser.add_argument("--quick", action="store_true",
                        help="a few rounds only: a smoke test, not a measurement")
    parser.add_argument("--json", metavar="PATH", help="also write every result to PATH as JSON")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--grid-sweep", action="store_true",
                        help="only map_coordinates' values against jax's, on grids from 32^3 "
                             "to 96^3 (where the grid outgrows a core's L2)")
    parser.add_argument("--spline-orders", action="store_true",
                        help="only map_coordinates of orders 2 to 5 (64^3 float64 grid, "
                             "2^20 points): values against SciPy's, and the gradient")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS
    if args.rounds < 1 or args.calls_per_round < 1:
        parser.error("--rounds and --calls-per-round must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    malloc_pinned = pin_malloc()
    start = time.perf_counter()
    if args.worker:
        kind, *rest = args.worker
        if kind == "sharded":
            report = sharded_worker(args.rounds, args.calls_per_round)
        elif kind == "map_coordinates_sharded":
            report = map_coordinates_sharded_worker(int(rest[0]), args.rounds)
        elif kind == "map_coordinates_threads":
            report = map_coordinates_threads_worker(int(rest[0]), args.rounds)
        else:
            report = lifetime_worker(rest[0], int(rest[1]))
        print(json.dumps(report))
        return 0
    if args.grid_sweep or args.spline_orders:
        return sweep_main(args, malloc_pinned, start)
    cases, notes = all_cases()
    warm_up(cases)
    measure(cases, args.rounds, args.calls_per_round)
    # The native ops take milliseconds a call: fewer rounds, each comparison
    # interleaved within itself (see the module docstring).
    for group in map_coordinates_groups() + spline_groups():
        warm_up(group)
        measure(group, max(5, args.rounds // 20), 1, after_itself=True)
        cases += group
    sharded = [run_worker(["--worker", "sharded", "--rounds", str(max(5, args.rounds // 10)),
                           "--calls-per-round", str(args.calls_per_round)],
                          {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={devices}"})
               for devices in dict.fromkeys(SHARDED_DEVICES)]
    points = 1 << (20 if args.quick else 22)
    mc_sharded = run_worker(["--worker", "map_coordinates_sharded", str(points),
                             "--rounds", str(max(5, args.rounds // 20))],
                            {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8"})
    mc_threads = run_worker(["--worker", "map_coordinates_threads", str(1 << 20),
                             "--rounds", str(max(5, args.rounds // 20))],
                            {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8"})
    loops = 50 if args.quick else 1000
    lifetime = [run_worker(["--worker", "lifetime", kind, str(loops)])
                for kind in ("xlabind", "pure_callback")]
    elapsed = time.perf_counter() - start

    results = {case.key: summarize(case) for case in cases}
    ratio_rows = ratios(results)
    print_report(cases, results, ratio_rows, notes, elapsed)
    for report in sharded:
        print_sharded(report)
    print_map_coordinates_sharded(mc_sharded)
    print_map_coordinates_threads(mc_threads)
    print_lifetime(lifetime)
    if args.json:
        report = {"results": list(results.values()), "ratios": ratio_rows, "notes": notes,
                  "sharded": sharded, "map_coordinates_sharded": mc_sharded,
                  "map_coordinates_threads": mc_threads,
                  "lifetime": lifetime,
                  "rounds": args.rounds, "calls_per_round": args.calls_per_round,
                  "quick": args.quick, "seconds": elapsed,
                  "environment": environment(malloc_pinned)}
        write_json(args.json, report)
    return 0


def sweep_main(args: argparse.Namespace, malloc_pinned: bool, start: float) -> int:
    """--grid-sweep and --spline-orders: one table of native-op groups."""
    if args.grid_sweep:
        groups, report = map_coordinates_sweep(), print_sweep
    else:
        groups = spline_orders_groups(1 << (18 if args.quick else 20))
        report = print_spline_orders
    for group in groups:
        warm_up(group)
        measure(group, max(5, args.rounds // 20), 1, after_itself=True)
    results = {case.key: summarize(case) for group in groups for case in group}
    report(groups, results)
    calls = len(groups[0][0].times)
    print(f"\n{calls} timed calls per case, {time.perf_counter() - start:.1f} s; "
          f"jax {jax.__version__}, {os.cpu_count()} CPUs")
    if args.json:
        write_json(args.json, {"results": list(results.values()), "rounds": args.rounds,
                               "quick": args.quick, "environment": environment(malloc_pinned)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
