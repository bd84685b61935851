"""Baton says under which licence it may be used, in the repository and in its metadata."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class TestLicence:
    def test_the_repository_carries_the_mit_licence_text(self) -> None:
        text = (ROOT / "LICENSE").read_text()

        assert text.startswith("MIT License\n")
        assert "Permission is hereby granted, free of charge" in text

    def test_the_package_metadata_names_the_same_licence_and_file(self) -> None:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

        assert project["license"] == "MIT"
        assert project["license-files"] == ["LICENSE"]
