"""Fat binaries (.nv_fatbin containers and their entries, in an ELF or bare) through the fatbin extractor."""

from _common import fuzz_extractors

if __name__ == "__main__":
    fuzz_extractors(("fatbin",), "pkg/libkernels.so")
