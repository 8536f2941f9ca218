"""Layer 1 of xlabind: the one `xlabind_call` primitive, what a bound function
is (its Definition), and the rules jax transforms it by.

  primitive.py       the primitive and its parameter, Call (a leaf)
  definition.py      Definition (what a bound function is) and BoundFunction
  static_kwargs.py   keyword arguments as hashable static values
  factors.py         sharding rules as factors (the algebra: a leaf)
  batching.py        the vmap rule, one function per vmap_method
  derivatives.py     the JVP and transpose rules (LinearityRules)
  derived_layouts.py calling a transpose or JVP on natively batched arrays
  traced_rules.py    JVP rules written in JAX (xlabind.traceable)
  signatures.py, trees.py

It imports nothing of the layers above (_runtime, _lowering): how a call runs
and lowers is the Definition's implementation object, which it only holds.
"""
