"""Write a certification's reports beside (or away from) its ``results.json``: ``report.html``, ``junit.xml``
and ``summary.md``."""

from __future__ import annotations

from pathlib import Path

from streamcert.reports.certification import load_certification
from streamcert.reports.html import report_html
from streamcert.reports.junit import junit_xml
from streamcert.reports.summary import summary_markdown

__all__ = ["MATRIX_FILES", "REPORT_FILES", "render_certification", "render_matrix"]

REPORT_FILES = ("report.html", "junit.xml", "summary.md")
MATRIX_FILES = ("matrix.html", "matrix.md")


def render_certification(results: Path | str, out: Path | str | None = None) -> list[Path]:
    """Render the reports of the certification at ``results`` (its results.json or folder) into ``out`` (default:
    the folder of results.json); the paths written."""
    certification = load_certification(results)
    folder = Path(out) if out is not None else certification.folder
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"report.html": report_html(certification), "junit.xml": junit_xml(certification),
             "summary.md": summary_markdown(certification)}
    written = []
    for name in REPORT_FILES:
        path = folder / name
        path.write_text(pages[name], encoding="utf-8")
        written.append(path)
    return written


def render_matrix(results: list[Path | str], out: Path | str) -> list[Path]:
    """The capability matrix of the certifications at ``results`` into ``out`` (matrix.html, matrix.md)."""
    from streamcert.reports.matrix import matrix_html, matrix_markdown

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"matrix.html": matrix_html(results, folder), "matrix.md": matrix_markdown(results, folder)}
    written = []
    for name in MATRIX_FILES:
        (folder / name).write_text(pages[name], encoding="utf-8")
        written.append(folder / name)
    return written
