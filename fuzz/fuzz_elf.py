"""ELF reader (facts/elf.py): headers, dynamic section, symbol versions, string tables."""

import sys

from _common import extract, instrumented, main

with instrumented():
    import cuaudit.facts

    cuaudit.facts.load_all()  # every extractor, instrumented, before the first input (not timed as one)
    import cuaudit.facts.elf  # noqa: F401


def test_one_input(data: bytes) -> None:
    extract(("elf",), "pkg/_ext.cpython-311-x86_64-linux-gnu.so", data)


if __name__ == "__main__":
    main(test_one_input)
