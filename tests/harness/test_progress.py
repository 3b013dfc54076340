"""Unit tests: a step's end line says whether it worked (a failed step is never printed as done)."""

from __future__ import annotations

import pytest
from rich.console import Console

from streamcert.harness import progress
from streamcert.harness.stack.process import run_logged


@pytest.fixture
def plain_output(monkeypatch):
    monkeypatch.delenv("STREAMCERT_QUIET", raising=False)
    monkeypatch.setattr(progress, "console", Console(stderr=True, force_terminal=False))


def test_a_step_that_worked_is_done(plain_output, capsys):
    with progress.step("Fetching things"):
        pass
    err = capsys.readouterr().err
    assert "Fetching things ..." in err and "Fetching things done (" in err and "failed" not in err


def test_a_tool_that_exits_non_zero_is_a_failed_step_not_done(plain_output, capsys):
    code, output = run_logged(["sh", "-c", "echo working; exit 3"], description="Building a thing", timeout=30)
    err = capsys.readouterr().err
    assert code == 3 and output == "working"
    assert "Building a thing failed: exit code 3" in err and "done" not in err


def test_a_step_that_raises_says_failed_with_the_error(plain_output, capsys):
    with pytest.raises(ValueError):
        with progress.step("Parsing a thing"):
            raise ValueError("bad")
    err = capsys.readouterr().err
    assert "Parsing a thing failed: ValueError" in err and "done" not in err


def test_a_failed_step_on_a_terminal_gets_a_cross_not_a_tick(monkeypatch, capsys):
    monkeypatch.delenv("STREAMCERT_QUIET", raising=False)
    monkeypatch.setattr(progress, "console", Console(stderr=True, force_terminal=True, color_system=None))
    with progress.step("Formatting storage") as current:
        current.fail("exit code 1")
    err = capsys.readouterr().err
    assert "✗ Formatting storage failed: exit code 1" in err and "✓" not in err
