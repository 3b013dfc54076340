"""The pages, opened in real headless Chromium (installed when missing): they draw something (the screenshot is
not blank) and say nothing on the console; a page with a broken resource does (the check can fail)."""

from __future__ import annotations

import pytest
from PIL import Image, ImageStat

from streamcert.reports.browser import screenshot
from streamcert.reports.render import render_certification, render_matrix
from tests.reports.fixtures import write_certification

pytestmark = pytest.mark.integration


def _drawn(png) -> bool:
    """More than one colour, and not nearly all white."""
    image = Image.open(png).convert("L")
    return image.getextrema()[0] < 200 and ImageStat.Stat(image).stddev[0] > 5


def test_the_report_and_the_matrix_draw_and_say_nothing_on_the_console(tmp_path):
    results = write_certification(tmp_path / "cert")
    render_certification(results)
    render_matrix([results], tmp_path / "matrix")
    for page in (tmp_path / "cert" / "report.html", tmp_path / "matrix" / "matrix.html"):
        shot = screenshot(page, tmp_path / f"{page.stem}.png")
        assert _drawn(shot.png), page
        assert shot.console == [], shot.console


def test_a_blank_page_and_a_console_error_are_seen(tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    assert not _drawn(screenshot(blank, tmp_path / "blank.png", height=400).png)
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><h1>x</h1><script>console.error('boom');</script></body></html>")
    shot = screenshot(broken, tmp_path / "broken.png", height=400)
    assert any("boom" in line for line in shot.console), shot.console
