"""Cython 3.2+: names and signatures inside the compressed string blob."""
from __future__ import annotations


def read(image, tracker, imported, module):
    return [], [], [], ["Cython 3.2 string blobs are not read yet"], False
