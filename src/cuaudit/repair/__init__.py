"""Repairs: source edits from findings' fixes (``source.py``) and binary rewrites of wheels."""
