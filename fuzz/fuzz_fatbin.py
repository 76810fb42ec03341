"""Fat binary reader (facts/fatbin.py): .nv_fatbin containers and their entries, in an ELF or bare."""

from _common import extract, instrumented, main

with instrumented():
    import cuaudit.facts

    cuaudit.facts.load_all()  # every extractor, instrumented, before the first input (not timed as one)
    import cuaudit.facts.fatbin  # noqa: F401


def test_one_input(data: bytes) -> None:
    extract(("fatbin",), "pkg/libkernels.so", data)


if __name__ == "__main__":
    main(test_one_input)
