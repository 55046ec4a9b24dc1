"""Placeholder: replaced by the report writers."""

import json
from pathlib import Path


def write_all(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
