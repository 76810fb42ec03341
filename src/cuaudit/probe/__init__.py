"""Opt-in probes: subprocesses that import audited code (only with --probe, config.probe)."""
