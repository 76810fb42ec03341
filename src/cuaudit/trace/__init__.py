"""The promotion tracer: run the user's own program and record every NumPy/CuPy
operation whose result differs between legacy (NumPy 1.x value-based) and
NEP 50 (NumPy 2) promotion.  Opt-in only (`cuaudit trace`, the pytest plugin).
"""
