"""Write a certification's reports beside (or away from) its ``results.json``: ``report.html``, ``junit.xml``
and ``summary.md``; a benchmark's ``bench.html`` from its ``bench.json``; the capability matrix."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from streamcert.harness.errors import ConfigurationError
from streamcert.reports.certification import load_certification
from streamcert.reports.html import report_html
from streamcert.reports.junit import junit_xml
from streamcert.reports.summary import summary_markdown

__all__ = ["MATRIX_FILES", "REPORT_FILES", "render_bench", "render_certification", "render_matrix",
           "render_bench_page", "render_reports", "render_results"]

_log = logging.getLogger(__name__)

REPORT_FILES = ("report.html", "junit.xml", "summary.md")
MATRIX_FILES = ("matrix.html", "matrix.md")


def render_reports(out: Path) -> None:
    """report.html, junit.xml and summary.md beside ``out/results.json``, for a certification or a merge that just
    saved it: a report that cannot be rendered must not cost the results (``streamcert report`` renders them
    again)."""
    try:
        render_certification(Path(out) / "results.json")
    except Exception as exc:  # noqa: BLE001 - results.json is written; the reports are a rendering of it
        _log.warning("The reports of %s were not rendered (%s: %s); `streamcert report %s` tries again.", out,
                     type(exc).__name__, exc, Path(out) / "results.json")


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


def render_results(results: Path | str, out: Path | str | None = None) -> list[Path]:
    """Render whatever ``results`` is: a certification's results.json, a benchmark's bench.json, the mutation
    score's mutants.json, or a folder holding one; the paths written."""
    path = Path(results)
    if not path.exists():
        raise ConfigurationError(f"No results file at {path}.",
                                 hint="Give the results.json that `streamcert certify --out DIR` wrote, or the "
                                      "bench.json of `streamcert bench --out DIR` (or DIR itself).")
    if path.is_dir() and not (path / "results.json").exists() and (path / "bench.json").exists():
        path = path / "bench.json"
    if path.is_file() and path.name != "results.json":
        data = _read_json(path)
        if isinstance(data, dict) and data.get("kind") == "bench":
            return [_write_bench_page(data, Path(out) if out is not None else path.parent)]
        if isinstance(data, dict) and data.get("kind") == "mutation-score":
            from streamcert.reports.mutants_html import write_mutants_html

            folder = Path(out) if out is not None else path.parent
            folder.mkdir(parents=True, exist_ok=True)
            return [write_mutants_html(data, folder / (path.stem + ".html"))]
    return render_certification(path, out)  # it also says what is wrong with anything else


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def render_bench_page(out: Path) -> None:
    """``bench.html`` beside ``out/bench.json``, for a benchmark that just saved it: a page that cannot be rendered
    must not cost the measurements (``streamcert report`` renders it again)."""
    try:
        render_bench(Path(out) / "bench.json")
    except Exception as exc:  # noqa: BLE001 - bench.json is written; the page is a rendering of it
        _log.warning("bench.html of %s was not rendered (%s: %s)", out, type(exc).__name__, exc)


def render_bench(results: Path | str, out: Path | str | None = None) -> list[Path]:
    """Render ``bench.html`` from a benchmark's ``bench.json`` into ``out`` (default: beside it), the figures
    derived from its measurements computed afresh (a page of an older benchmark gets today's judgements)."""
    path = Path(results)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} is not a readable JSON object.",
                                 hint="Give the bench.json that `streamcert bench --out DIR` wrote.")
    return [_write_bench_page(data, Path(out) if out is not None else path.parent)]


def _write_bench_page(data: dict, folder: Path) -> Path:
    from streamcert.benchmarks.bench import with_derived_figures
    from streamcert.reports.bench_html import bench_html

    folder.mkdir(parents=True, exist_ok=True)
    page = folder / "bench.html"
    page.write_text(bench_html(with_derived_figures(data)), encoding="utf-8")
    return page
