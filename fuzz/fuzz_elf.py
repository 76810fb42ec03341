"""ELF image (formats/elf.py) through the elf extractor: headers, dynamic section, symbol versions, string tables."""

from _common import fuzz_extractors

if __name__ == "__main__":
    fuzz_extractors(("elf",), "pkg/_ext.cpython-311-x86_64-linux-gnu.so")
