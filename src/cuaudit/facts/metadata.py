"""Distribution metadata (METADATA / PKG-INFO): name, version, requirements, tags."""

from __future__ import annotations

from dataclasses import dataclass

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member, MemberKind


@dataclass(frozen=True)
class DistMetadata:
    name: str
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str
    provides_extra: tuple[str, ...]
    classifiers: tuple[str, ...]


class MetadataExtractor(Extractor):
    name = "metadata"
    version = 1

    def applies(self, member: Member) -> bool:
        if member.kind is not MemberKind.METADATA:
            return False
        base = member.path.rsplit("/", 1)[-1]
        # the sdist's own PKG-INFO, or the .dist-info's METADATA (not nested egg-info copies)
        return base == "METADATA" or member.path in ("PKG-INFO",) or member.path.count("/") <= 1 and base == "PKG-INFO"

    def extract(self, reader: MemberReader) -> DistMetadata:
        # here: email is 5 ms of start-up that a cached audit never needs; the parser's default
        # policy is email.policy.compat32, without importing email.policy (2.5 ms more)
        from email.parser import Parser

        text = reader.text(limit=8 * 1024 * 1024)
        msg = Parser().parsestr(text, headersonly=True)
        name = (msg.get("Name") or "").strip()
        if not name:
            raise InputError("CU002", f"{reader.path}: metadata without a Name field")
        return DistMetadata(
            name=name,
            version=(msg.get("Version") or "").strip(),
            requires_dist=tuple(v.strip() for v in msg.get_all("Requires-Dist") or ()),
            requires_python=(msg.get("Requires-Python") or "").strip(),
            provides_extra=tuple(v.strip() for v in msg.get_all("Provides-Extra") or ()),
            classifiers=tuple(v.strip() for v in msg.get_all("Classifier") or ()),
        )
