"""Opt-in probes (``--probe``): subprocess runs that import audited code, with a timeout.

Nothing here runs unless the user asks for it; each run is recorded with
``RuleContext.record_probe`` so reports say what was executed.
"""
