"""Cython C-API table readers (facts/cython.py, _cython_blob.py, extension_strings.py) on an extension module."""

from _common import extract, instrumented, main

with instrumented():
    import cuaudit.facts

    cuaudit.facts.load_all()  # every extractor, instrumented, before the first input (not timed as one)
    import cuaudit.facts.cython  # noqa: F401
    import cuaudit.facts.extension_strings  # noqa: F401


def test_one_input(data: bytes) -> None:
    extract(("cython-capi", "extension_strings"), "pkgprov/prov.cpython-311-x86_64-linux-gnu.so", data)


if __name__ == "__main__":
    main(test_one_input)
