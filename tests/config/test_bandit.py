"""Bandit finds nothing of medium severity or more in Baton's code.

What it flags and is safe stays marked in place with `# nosec BXXX # why`, so a
new finding fails here with its place and its reason, and CI (`.ci/run` runs the
suite) fails with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BANDIT = Path(sys.executable).parent / "bandit"


class TestBandit:
    def test_finds_nothing_at_medium_severity_or_above(self):
        result = subprocess.run(
            [str(BANDIT), "-r", "config", "workflows", "approvals", "-ll", "-q", "-f", "json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

        report = json.loads(result.stdout)
        findings = [
            f"{item['filename']}:{item['line_number']} {item['test_id']} {item['issue_text']}"
            for item in report["results"]
        ]
        assert findings == []
        assert report["errors"] == []
        assert result.returncode == 0
        assert report["metrics"]["_totals"]["loc"] > 1000  # it did read the code
