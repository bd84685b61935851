"""The client's address: the peer, unless a trusted proxy in front names another."""

from __future__ import annotations

import ipaddress

import pytest
from django.test import RequestFactory

from workflows.client_address import address_from, client_address

CADDY = "172.18.0.5"


def proxies(*entries: str) -> tuple:
    return tuple(ipaddress.ip_network(entry) for entry in entries)


def resolve(peer, forwarded_for="", *, trusted=(), count=0):
    return address_from(
        peer=peer,
        forwarded_for=forwarded_for,
        trusted_proxies=trusted,
        trusted_proxy_count=count,
    )


class TestWithNoTrustedProxy:
    def test_the_peer_is_the_client(self):
        assert resolve("203.0.113.7") == "203.0.113.7"

    def test_a_forwarded_for_header_is_ignored(self):
        assert resolve("203.0.113.7", "1.1.1.1") == "203.0.113.7"

    def test_a_request_without_a_peer_has_no_address(self):
        assert resolve(None, "1.1.1.1") is None


class TestByCount:
    def test_the_client_is_the_address_the_one_proxy_appended(self):
        assert resolve(CADDY, "203.0.113.7", count=1) == "203.0.113.7"

    def test_what_the_client_wrote_before_the_proxys_entry_is_ignored(self):
        assert resolve(CADDY, "1.1.1.1, 2.2.2.2, 203.0.113.7", count=1) == "203.0.113.7"

    def test_two_proxies_name_the_client_second_from_the_right(self):
        assert resolve(CADDY, "1.1.1.1, 203.0.113.7, 10.0.0.2", count=2) == "203.0.113.7"

    def test_a_request_that_did_not_pass_the_proxy_is_its_peer(self):
        assert resolve("203.0.113.7", count=1) == "203.0.113.7"

    def test_an_entry_that_is_no_address_stops_the_walk_at_the_last_good_hop(self):
        assert resolve(CADDY, "203.0.113.7, not-an-ip", count=2) == CADDY

    def test_ipv6_and_ipv4_mapped_addresses_are_read(self):
        assert resolve("::ffff:172.18.0.5", "2001:db8::7", count=1) == "2001:db8::7"


class TestByAddress:
    def test_a_peer_that_is_a_named_proxy_is_believed(self):
        trusted = proxies("172.16.0.0/12")

        assert resolve(CADDY, "1.1.1.1, 203.0.113.7", trusted=trusted) == "203.0.113.7"

    def test_a_peer_outside_the_named_proxies_is_taken_at_its_own_address(self):
        trusted = proxies("172.16.0.0/12")

        assert resolve("198.51.100.9", "203.0.113.7", trusted=trusted) == "198.51.100.9"

    def test_a_chain_of_named_proxies_is_walked_to_the_first_hop_outside_them(self):
        trusted = proxies("172.16.0.0/12", "10.0.0.0/8")

        client = resolve(CADDY, "1.1.1.1, 203.0.113.7, 10.0.0.2", trusted=trusted)

        assert client == "203.0.113.7"

    def test_with_a_count_too_the_peer_must_still_be_a_named_proxy(self):
        trusted = proxies(CADDY)

        assert resolve("198.51.100.9", "203.0.113.7", trusted=trusted, count=1) == ("198.51.100.9")


class TestFromARequest:
    def test_reads_the_peer_and_header_with_the_settings_trust(self, settings):
        settings.BATON_TRUSTED_PROXY_COUNT = 1
        request = RequestFactory().get(
            "/", REMOTE_ADDR=CADDY, headers={"X-Forwarded-For": "1.1.1.1, 203.0.113.7"}
        )

        assert client_address(request) == "203.0.113.7"

    @pytest.mark.parametrize("header", ["X-Forwarded-For", "X-Real-IP", "Forwarded"])
    def test_by_default_no_header_changes_it(self, header):
        request = RequestFactory().get("/", REMOTE_ADDR=CADDY, headers={header: "203.0.113.7"})

        assert client_address(request) == CADDY
