"""The JSON Schema files streamcert publishes in ``harness/schemas/`` (results, scenarios, fault schedules).

Each model module renders its schema with :func:`render` and offers the same command through
:func:`schema_command`: ``python -m <module> --schema`` prints it, ``--write-schema`` rewrites the committed
file; a test in each module's suite checks that the committed file is what the code renders.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SCHEMAS_DIR", "render", "schema_command"]

SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"


def render(schema: dict[str, Any], file_name: str) -> str:
    """``schema`` as the committed file holds it: with its ``$id``, sorted keys, two-space indent, final newline."""
    schema = {**schema, "$id": f"https://streamcert.dev/schemas/{file_name}"}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schema_command(argv: list[str], rendered: Callable[[], str], path: Path, module: str) -> int:
    """``--schema``: print the schema; ``--write-schema``: rewrite ``path``; anything else: usage, exit 2."""
    if argv == ["--schema"]:
        sys.stdout.write(rendered())
    elif argv == ["--write-schema"]:
        path.write_text(rendered())
    else:
        sys.stderr.write(f"usage: python -m {module} --schema | --write-schema\n")
        return 2
    return 0
