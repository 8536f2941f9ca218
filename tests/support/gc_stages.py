"""A jitted program run stage by stage (trace, lower, compile, call) with the
garbage collector between every stage and nothing of the program kept but
what the next stage holds: what frees a callback too early shows here
(tests/runtime/test_lifetime.py, tests/transforms/test_trust_sweep.py)."""

import gc


def run_in_stages(held: list, x):
    """program(x) through `program.trace(x).lower().compile()`, collecting
    between; the program is taken out of the one-item list `held`, so that
    nothing but its traced stage keeps it once traced."""
    traced = held.pop().trace(x)
    gc.collect()
    lowered = traced.lower()
    del traced
    gc.collect()
    compiled = lowered.compile()
    del lowered
    gc.collect()
    out = compiled(x)
    del compiled
    gc.collect()
    return out
