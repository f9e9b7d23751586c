"""Generated ids are version-4 UUIDs in their canonical text form."""

from __future__ import annotations

import uuid

from contracts.ids import new_uuid


def test_new_uuid_is_a_random_rfc_4122_uuid_in_canonical_form() -> None:
    made = [new_uuid() for _ in range(2_000)]
    assert len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
    # Every variant digit (8, 9, a, b) turns up: the bits come from the random byte.
    assert {text[19] for text in made} == set("89ab")
