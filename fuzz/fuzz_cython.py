"""Cython C-API tables and extension strings of an extension module."""

from _common import fuzz_extractors

if __name__ == "__main__":
    fuzz_extractors(("cython-capi", "extension_strings"), "pkgprov/prov.cpython-311-x86_64-linux-gnu.so")
