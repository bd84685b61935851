"""workflows.personal: which fields are personal, sealing and opening them, erasing,
rotating and digesting the envelopes in a stored document."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, Field

from workflows import personal
from workflows.personal import ENVELOPE, PERSONAL, TOMBSTONE


class Claim(BaseModel):
    title: str
    email: str = Field(json_schema_extra=PERSONAL)
    iban: str = Field(default="", json_schema_extra={"personal": True, "format": "iban"})
    note: str = Field(default="", json_schema_extra={"format": "text"})


@pytest.fixture
def keys(settings):
    settings.BATON_DATA_KEYS = [Fernet.generate_key().decode()]
    return settings


class TestPersonalFields:
    def test_names_the_marked_fields_in_schema_order(self):
        assert personal.personal_fields(Claim) == ("email", "iban")

    def test_no_schema_has_none(self):
        assert personal.personal_fields(None) == ()


class TestSealing:
    def test_a_sealed_value_is_an_envelope_that_opens_to_the_value(self, keys):
        envelope = personal.seal({"iban": "DE89370400440532013000"})

        assert list(envelope) == [ENVELOPE]
        assert "DE89" not in envelope[ENVELOPE]
        assert personal.open_envelope(envelope) == {"iban": "DE89370400440532013000"}

    def test_a_document_without_envelopes_is_returned_itself(self, keys):
        data = {"title": "T", "items": [{"sku": "A"}]}

        assert personal.reveal_fields(data) is data

    def test_reveal_opens_envelopes_however_deep(self, keys):
        data = {"a": [{"b": personal.seal("x")}], "c": personal.seal(3)}

        assert personal.reveal(data) == {"a": [{"b": "x"}], "c": 3}

    def test_an_unchanged_value_keeps_its_previous_envelope(self, keys):
        before = personal.seal_fields({"email": "a@b.c", "title": "T"}, ["email"])

        again = personal.seal_fields({"email": "a@b.c", "title": "U"}, ["email"], previous=before)
        changed = personal.seal_fields({"email": "z@b.c"}, ["email"], previous=before)

        assert again["email"] == before["email"]
        assert changed["email"] != before["email"]
        assert personal.open_envelope(changed["email"]) == "z@b.c"

    def test_none_and_the_tombstone_are_not_sealed(self, keys):
        data = personal.seal_fields({"email": None, "iban": TOMBSTONE}, ["email", "iban"])

        assert data == {"email": None, "iban": TOMBSTONE}


class TestKeys:
    def test_without_keys_sealing_is_refused_saying_what_to_set(self, settings):
        settings.BATON_DATA_KEYS = []
        settings.BATON_DATA_KEYS_DERIVED = False

        with pytest.raises(ImproperlyConfigured, match="Set BATON_DATA_KEYS"):
            personal.seal("x")

    def test_the_derived_key_follows_the_secret_key(self, settings):
        settings.BATON_DATA_KEYS = []
        settings.BATON_DATA_KEYS_DERIVED = True
        envelope = personal.seal("x")
        settings.SECRET_KEY = "another-secret-key-" + "y" * 40

        with pytest.raises(personal.UnreadablePersonalData):
            personal.open_envelope(envelope)

    def test_every_key_of_the_set_opens_the_first_seals(self, settings):
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        settings.BATON_DATA_KEYS = [old]
        sealed_old = personal.seal("old")
        settings.BATON_DATA_KEYS = [new, old]

        sealed_new = personal.seal("new")

        assert personal.open_envelope(sealed_old) == "old"
        assert Fernet(new).decrypt(sealed_new[ENVELOPE].encode()) == b'"new"'


class TestWalks:
    def test_erase_tombstones_every_envelope_and_says_what_it_held(self, keys):
        found: list = []
        data = {"a": personal.seal("x"), "b": [personal.seal("y"), "z"], "c": "keep"}

        erased, count = personal.erase(data, found=found)

        assert erased == {"a": TOMBSTONE, "b": [TOMBSTONE, "z"], "c": "keep"}
        assert (count, sorted(found)) == (2, ["x", "y"])

    def test_erase_needs_no_key(self, keys):
        data = {"a": personal.seal("x")}
        keys.BATON_DATA_KEYS = [Fernet.generate_key().decode()]

        erased, count = personal.erase(data, found=[])

        assert (erased, count) == ({"a": TOMBSTONE}, 1)

    def test_rotate_seals_again_only_what_an_older_key_sealed(self, settings):
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        settings.BATON_DATA_KEYS = [old]
        data = {"a": personal.seal("x")}
        settings.BATON_DATA_KEYS = [new, old]

        rotated, count = personal.rotate(data)
        again, second = personal.rotate(rotated)

        assert count == 1
        assert (again, second) == (rotated, 0)
        assert Fernet(new).decrypt(rotated["a"][ENVELOPE].encode()) == b'"x"'

    def test_a_digest_is_keyed_and_holds_no_value(self, keys):
        data = {"form_values": [{}, {"payee": personal.seal("Ada"), "ref": "R-1"}]}

        digested = personal.digested(data, key=b"k1")

        [_, values] = digested["form_values"]
        assert values["ref"] == "R-1"
        assert values["payee"] == personal.digest("Ada", key=b"k1")
        assert values["payee"] != personal.digest("Ada", key=b"k2")
        assert "Ada" not in str(digested)
