"""Runnable examples of binding real libraries with xlabind (ducc0, SciPy)."""
