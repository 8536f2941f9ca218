"""Static keyword arguments are compared by type and value all the way down:
distinct values reach the function as themselves, equal ones hit the cache."""

import gc
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind
from xlabind._primitive.static_kwargs import StaticKwargs
from xlabind._runtime import extension as _extension


def recording_op():
    seen = []
    op = xlabind.callback(lambda x, **kw: seen.append(kw) or x, lambda x, **_: x)
    return op, seen


def test_signed_zeros_stay_distinct():
    op, seen = recording_op()
    op(jnp.ones(1), s=0.0)
    op(jnp.ones(1), s=-0.0)
    assert [math.copysign(1.0, kw["s"]) for kw in seen] == [1.0, -1.0]
    jitted = jax.jit(lambda x, s: op(x, s=s), static_argnums=1)
    jitted(jnp.ones(1), -0.0)
    assert math.copysign(1.0, seen[-1]["s"]) == -1.0


def test_nested_values_keep_their_types():
    op, seen = recording_op()
    op(jnp.ones(1), flags=(True,))
    op(jnp.ones(1), flags=(1,))
    op(jnp.ones(1), flags=(1.0,))
    op(jnp.ones(1), flags=frozenset({1}))
    op(jnp.ones(1), flags=frozenset({True}))
    assert [type(next(iter(kw["flags"]))) for kw in seen] == [bool, int, float, int, bool]
    op(jnp.ones(1), scale=np.float32(2))
    op(jnp.ones(1), scale=np.float64(2))
    assert [type(kw["scale"]) for kw in seen[-2:]] == [np.float32, np.float64]


def test_a_nan_kwarg_hits_the_cache():
    op, seen = recording_op()
    gc.collect()  # the entries of earlier tests' functions, which are gone
    before = _extension.live_callback_count()
    nan = float("nan")
    for _ in range(5):
        op(jnp.ones(1), s=nan)
    for _ in range(5):
        op(jnp.ones(1), s=float("nan"))  # another NaN object, the same bits
    assert len(seen) == 10 and all(math.isnan(kw["s"]) for kw in seen)
    assert _extension.live_callback_count() == before + 1  # one entry, compiled once
    assert len(op.definition._eager) == 1


def test_keys():
    assert StaticKwargs((("a", 0.0),)) != StaticKwargs((("a", -0.0),))
    assert StaticKwargs((("a", float("nan")),)) == StaticKwargs((("a", float("nan")),))
    assert StaticKwargs((("a", (1, (2.0, True))),)) == StaticKwargs((("a", (1, (2.0, True))),))
    assert StaticKwargs((("a", (1, (2.0, True))),)) != StaticKwargs((("a", (1, (2.0, 1))),))
    assert StaticKwargs((("a", complex(1, 0.0)),)) != StaticKwargs((("a", complex(1, -0.0)),))
    assert hash(StaticKwargs((("a", (0.0,)),))) == hash(StaticKwargs((("a", (0.0,)),)))


def test_unhashable_nested_values_are_refused():
    op, _ = recording_op()
    with pytest.raises(TypeError, match=r"keyword argument 'k' must be hashable"):
        op(jnp.ones(1), k=(1, [2]))
