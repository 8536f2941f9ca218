"""Layer 3 of xlabind: how a call lowers.

rule.py             the primitive's lowering rule, per platform (the custom
                    call, jax's ordering token for effect="ordered")
partitioning.py     programs over several devices: once per program, once per
                    device with a sharding rule (custom partitioning), inside
                    shard_map, and ordered calls on the first device
status_exchange.py  how a failure on one device stops every device
"""
