"""Personal data in a run's documents: which fields hold it, sealed at rest, opened, erased.

A workflow type marks input and form fields personal with pydantic's
`Field(json_schema_extra=PERSONAL)`. Validating them (`Workflow.validate_input`,
`Approval.validate_form`) seals each such value into an envelope,
`{"$personal": "<Fernet token>"}`, so that every copy Baton keeps of the document (the
run's input, a signal's payload, a decision's step result, a task's form values, a
revision's changes) holds the envelope, never the plaintext: a copy nobody thought of
leaks ciphertext, not the value. Readers open envelopes where they need the value:
`reveal_fields` for an activity's context, a condition or a title, `shown` for a page
or the API; `erase` swaps them for the TOMBSTONE; `rotate` re-encrypts them under the
newest key.

Keys are `BATON_DATA_KEYS` (MultiFernet: the first encrypts, each decrypts), or one
derived from SECRET_KEY where `BATON_DATA_KEYS_DERIVED` allows it (demo, tests). A type
without personal fields never reaches a key: its documents hold no envelope, and
`reveal_fields` looks at nothing but their top-level values.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import logging
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import pydantic
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.crypto import salted_hmac

# `Field(json_schema_extra=PERSONAL)`: the field holds personal data.
PERSONAL: dict[str, Any] = {"personal": True}
# The key of a sealed value's envelope.
ENVELOPE = "$personal"
# The key of a personal value's keyed digest in an audit entry (approvals.audit).
DIGEST = "$personal_hmac"
# What an erased personal value reads as, wherever it was kept.
TOMBSTONE = "[erased]"
# What a page shows for a sealed value none of the keys opens.
UNREADABLE = "[unreadable: its key is not in BATON_DATA_KEYS]"
_DERIVED_SALT = "baton.personal-data-key"
logger = logging.getLogger("baton.personal")


class UnreadablePersonalData(ImproperlyConfigured):
    """A sealed value that none of BATON_DATA_KEYS opens (its key was dropped too soon)."""


@cache
def personal_fields(schema: type[pydantic.BaseModel] | None) -> tuple[str, ...]:
    """Return the names of `schema`'s top-level fields marked personal, in schema order."""
    if schema is None:
        return ()
    return tuple(
        name
        for name, info in schema.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("personal")
    )


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------


def keys() -> MultiFernet:
    """Return the key set personal values are sealed and opened with; raise
    ImproperlyConfigured, saying what to set, when there is none."""
    return _key_set()[0]


def _key_set() -> tuple[MultiFernet, Fernet]:
    """The key set, and its first key (the one that encrypts)."""
    return _keys(
        tuple(settings.BATON_DATA_KEYS), settings.BATON_DATA_KEYS_DERIVED, settings.SECRET_KEY
    )


@cache
def _keys(
    configured: tuple[str, ...], derived: bool, secret_key: str
) -> tuple[MultiFernet, Fernet]:
    if configured:
        fernets = []
        for position, key in enumerate(configured, start=1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                raise ImproperlyConfigured(
                    f"BATON_DATA_KEYS: key {position} is not a Fernet key (32 url-safe "
                    'base64-encoded bytes); make one with `python -c "from '
                    'cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.'
                ) from None
        return MultiFernet(fernets), fernets[0]
    if derived:
        digest = salted_hmac(_DERIVED_SALT, "personal data", secret=secret_key, algorithm="sha256")
        fernet = Fernet(base64.urlsafe_b64encode(digest.digest()))
        return MultiFernet([fernet]), fernet
    raise ImproperlyConfigured(
        "BATON_DATA_KEYS is not set, and a registered workflow type marks fields personal: "
        "their values are encrypted at rest with it. Set BATON_DATA_KEYS to a Fernet key (see "
        "SECURITY.md, 'Personal data'); BATON_DATA_KEYS_DERIVED=true derives one from "
        "DJANGO_SECRET_KEY, for a demo or tests only."
    )


def key_source() -> str:
    """Say, for operators, where the keys come from."""
    if settings.BATON_DATA_KEYS:
        return f"BATON_DATA_KEYS ({len(settings.BATON_DATA_KEYS)} key(s), the first encrypting)"
    if settings.BATON_DATA_KEYS_DERIVED:
        return "a key derived from DJANGO_SECRET_KEY (BATON_DATA_KEYS_DERIVED=true)"
    return "none (BATON_DATA_KEYS is not set)"


# ---------------------------------------------------------------------------
# Sealing and opening
# ---------------------------------------------------------------------------


def seal(value: Any) -> dict[str, str]:
    """Return `value` (JSON) encrypted under the newest key, as an envelope."""
    plain = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return {ENVELOPE: keys().encrypt(plain).decode()}


def is_sealed(value: Any) -> bool:
    """Whether `value` is an envelope `seal` made."""
    return type(value) is dict and ENVELOPE in value


def open_envelope(envelope: Mapping[str, str]) -> Any:
    """Return the value sealed in `envelope`; raise UnreadablePersonalData if no key opens it."""
    try:
        plain = keys().decrypt(envelope[ENVELOPE].encode())
    except InvalidToken:
        raise UnreadablePersonalData(
            "A personal value was sealed with a key that is not in BATON_DATA_KEYS any more: "
            "put the old key back after the new one, and run `manage.py rotate_data_keys`."
        ) from None
    return json.loads(plain)


def seal_fields(
    data: dict[str, Any], fields: Iterable[str], *, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return `data` with each of `fields` it holds sealed (None and the tombstone stay as
    they are). A value equal to what `previous` holds sealed keeps that envelope, so
    validating a stored document again changes nothing in it."""
    for name in fields:
        value = data.get(name)
        if value is None or value == TOMBSTONE or is_sealed(value):
            continue
        before = previous.get(name) if previous is not None else None
        if is_sealed(before) and open_envelope(before) == value:
            data[name] = before
        else:
            data[name] = seal(value)
    return data


def reveal_fields(data: Any) -> Any:
    """Return `data` with its top-level envelopes opened (`data` itself when it has none,
    as every document of a type without personal fields: nothing is copied then)."""
    if type(data) is not dict or not any(is_sealed(value) for value in data.values()):
        return data
    return {
        name: open_envelope(value) if is_sealed(value) else value for name, value in data.items()
    }


def shown(value: Any) -> Any:
    """Return `value` with every envelope in it opened, however deep, for a page or the API:
    one that no key opens reads as UNREADABLE and is logged, so the page still answers
    (an activity, which must not go on with a wrong value, uses `reveal` and fails)."""

    def opened(envelope: dict[str, str]) -> Any:
        try:
            return open_envelope(envelope)
        except UnreadablePersonalData as error:
            logger.error("personal.unreadable", extra={"reason": str(error)})
            return UNREADABLE

    return _walk(value, opened)[0]


def reveal(value: Any) -> Any:
    """Return `value` with every envelope in it opened, however deep; raise
    UnreadablePersonalData for one that no key opens."""
    if type(value) is dict:
        if ENVELOPE in value:
            return open_envelope(value)
        return {name: reveal(item) for name, item in value.items()}
    if type(value) is list:
        return [reveal(item) for item in value]
    return value


# ---------------------------------------------------------------------------
# Erasing, rotating, digesting: walks over a stored document
# ---------------------------------------------------------------------------


def erase(value: Any, *, found: list[Any] | None = None) -> tuple[Any, int]:
    """Return `value` with every envelope in it replaced by the TOMBSTONE, and how many;
    append to `found` what each sealed, where a key still opens it (no key is needed to
    erase: an envelope whose key was lost is erased all the same)."""

    def tombstone(envelope: dict[str, str]) -> str:
        if found is not None:
            with contextlib.suppress(UnreadablePersonalData):
                found.append(open_envelope(envelope))
        return TOMBSTONE

    return _walk(value, tombstone)


def rotate(value: Any) -> tuple[Any, int]:
    """Return `value` with every envelope the newest key did not seal sealed again under
    it, and how many (0 for a document already rotated: nothing needs writing)."""
    everyone, newest = _key_set()

    def again(envelope: dict[str, str]) -> Any:
        token = envelope[ENVELOPE].encode()
        try:
            newest.decrypt(token)
        except InvalidToken:
            try:
                return {ENVELOPE: everyone.rotate(token).decode()}
            except InvalidToken:
                raise UnreadablePersonalData(
                    "A personal value was sealed with a key that is not in BATON_DATA_KEYS: "
                    "put every key still in use in it before rotating."
                ) from None
        return _UNCHANGED

    return _walk(value, again)


def digest(value: Any, *, key: bytes) -> dict[str, str]:
    """Return a keyed HMAC-SHA256 of `value` (JSON), in place of it: whoever holds the key
    and the value can show they match, and nobody can read the value from it."""
    plain = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return {DIGEST: hmac.new(key, b"baton.personal\n" + plain, hashlib.sha256).hexdigest()}


def digested(value: Any, *, key: bytes) -> Any:
    """Return `value` with every envelope in it replaced by the digest of what it seals."""
    return _walk(value, lambda envelope: digest(open_envelope(envelope), key=key))[0]


_UNCHANGED = object()


def _walk(value: Any, replace: Any) -> tuple[Any, int]:
    """Return `value` with `replace(envelope)` for each envelope (_UNCHANGED keeps it), and
    how many were replaced; containers without one come back as they were."""
    if type(value) is dict:
        if ENVELOPE in value:
            new = replace(value)
            return (value, 0) if new is _UNCHANGED else (new, 1)
        count = 0
        items = {}
        for name, item in value.items():
            items[name], found = _walk(item, replace)
            count += found
        return (items, count) if count else (value, 0)
    if type(value) is list:
        count = 0
        items_list = []
        for item in value:
            new_item, found = _walk(item, replace)
            items_list.append(new_item)
            count += found
        return (items_list, count) if count else (value, 0)
    return value, 0
