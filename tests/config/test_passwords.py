"""New passwords are checked by Django's default validators, wherever they are set."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError


class TestPasswordValidation:
    @pytest.mark.parametrize(
        ("password", "reason"),
        [
            ("short1!", "This password is too short. It must contain at least 8 characters."),
            ("password", "This password is too common."),
            ("4815162342", "This password is entirely numeric."),
        ],
    )
    def test_a_weak_password_is_refused_with_the_reason(self, password, reason):
        with pytest.raises(ValidationError) as refused:
            validate_password(password)

        assert reason in refused.value.messages

    def test_a_password_like_the_username_is_refused(self):
        user = User(username="carolinemartin", email="caroline@example.com")

        with pytest.raises(ValidationError) as refused:
            validate_password("carolinemartin1", user=user)

        assert "The password is too similar to the username." in refused.value.messages

    def test_a_long_uncommon_password_is_accepted(self):
        assert validate_password("violet-harbour-tram-42") is None
