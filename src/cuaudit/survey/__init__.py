"""``cuaudit survey``: every release of a set of packages, audited once on Dask, compared release to release.

``spec.py`` (what to survey) -> ``index.py`` (listing, wheel choice, download)
-> ``run.py`` (the Dask run) -> ``work.py`` (one task on a worker) ->
``store/`` (the database) -> ``report.py`` (regressions, compatibility
matrix) -> ``render.py`` (text, JSON, HTML).
"""
