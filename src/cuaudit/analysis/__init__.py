"""Derived models: what several rules (and commands) share, built from facts.

Nothing here reads a file: every model is computed from facts the engine
extracted (or took from the cache).  ``module_tree`` is the package/import
model (CU1xx), ``loader`` the dynamic loader's search (CU2xx, ``libs``),
``libraries`` the catalog of CUDA libraries, ``capi_index``/``capi_diff`` who
provides which Cython C-API and what changed between two versions (CU3xx,
``diff``).
"""
