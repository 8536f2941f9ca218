"""The few private jax APIs xlabind needs, in one place, so that a jax upgrade
touches one file. Each is what jax's own callbacks and custom partitioning use.
"""

from __future__ import annotations

from jax._src import dispatch as _dispatch
from jax._src import sharding_impls as _sharding_impls
from jax._src.custom_partitioning import custom_partitioning
from jax._src.custom_partitioning_sharding_rule import ArrayMapping, SdyShardingRule

ShardingContext = _sharding_impls.ShardingContext
SPMDAxisContext = _sharding_impls.SPMDAxisContext

__all__ = ["ArrayMapping", "SdyShardingRule", "ShardingContext", "SPMDAxisContext",
           "custom_partitioning", "needs_devices_to_lower"]


def needs_devices_to_lower(primitive) -> None:
    """Makes jax lower `primitive` with the device assignment known (custom
    partitioning and one-device placement need it)."""
    _dispatch.prim_requires_devices_during_lowering.add(primitive)
