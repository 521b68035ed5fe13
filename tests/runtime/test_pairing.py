"""Pairing codes: easy to read aloud, and read back however the owner types them."""

from __future__ import annotations

from bruce.runtime.pairing import CODE_LENGTH, new_code, normalized_code


def test_a_code_typed_with_spaces_dashes_or_lower_case_is_the_stored_code():
    code = new_code()
    assert len(code) == CODE_LENGTH
    typed = f" {code[:4].lower()}-{code[4:]} "
    assert normalized_code(typed) == code
    assert normalized_code("ab cd\tef-gh") == "ABCDEFGH"
