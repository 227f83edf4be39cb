"""models.builder.validate: the agreement measure of the int8 check."""

from __future__ import annotations

import pytest

from models.builder.validate import _agreement


@pytest.mark.parametrize(
    ("a", "b", "agreement"),
    [
        ([], [], 1.0),
        ([1, 2], [1, 2], 1.0),
        ([1, 2], [1, 3], 0.5),
        ([1], [], 0.0),
        ([1, 2, 3, 4], [1, 2], 0.5),
    ],
)
def test_agreement_of_two_outputs(a, b, agreement):
    assert _agreement(a, b) == agreement
