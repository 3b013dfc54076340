"""Charts of one scenario run, the Jepsen look: records delivered per second and the backlog over time, with
every fault's window shaded and labelled (an instant fault, such as a kill, is a line). Rendered with matplotlib
as inline SVG text: the page that holds them needs no network."""

from __future__ import annotations

import io
from typing import Any

from streamcert.harness.run.history import fault_windows

__all__ = ["fault_windows", "run_timeline_svg", "series_svg"]

_COLOURS = {"driver": "#d62728", "executor": "#ff7f0e", "kafka": "#1f77b4", "postgres": "#9467bd"}


def run_timeline_svg(run: dict[str, Any], title: str = "") -> str | None:
    """An SVG of the run's per-second deliveries and backlog with its faults, or None without a timeline."""
    timeline = (run.get("metrics") or {}).get("timeline") or {}
    seconds = timeline.get("second") or []
    if not seconds:
        return None
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a tenth of the size, selectable
    import matplotlib.pyplot as plt

    figure, (rate, backlog) = plt.subplots(2, 1, figsize=(11.0, 2.9), sharex=True,
                                           gridspec_kw={"height_ratios": [3, 2], "hspace": 0.08})
    rate.fill_between(seconds, timeline.get("delivered") or [0] * len(seconds), step="mid", color="#2ca02c",
                      alpha=0.75, lw=0, label="delivered / s")
    backlog.fill_between(seconds, timeline.get("backlog") or [0] * len(seconds), step="mid", color="#7f7f7f",
                         alpha=0.5, lw=0, label="backlog")
    history = run.get("history") or []
    # to the run's last event: faults and a stall after the last delivery belong on the chart
    end = max(seconds[-1], history[-1]["time"] - history[0]["time"] if history else 0)
    for index, window in enumerate(fault_windows(run)):
        colour = _COLOURS.get(window["target"], "#8c564b")
        start, stop = window["start_s"], window["stop_s"] if window["stop_s"] is not None else end
        for axes in (rate, backlog):
            if stop - start >= 0.5:
                axes.axvspan(start, stop, color=colour, alpha=0.15, lw=0)
            else:
                axes.axvline(start, color=colour, lw=1.0, alpha=0.8)
        rate.annotate(window["fault"], xy=(start, 1.0), xycoords=("data", "axes fraction"),
                      xytext=(2, -4 - 9 * (index % 3)), textcoords="offset points", fontsize=7, color=colour,
                      va="top")
    rate.set_ylabel("records/s", fontsize=8)
    backlog.set_ylabel("backlog", fontsize=8)
    backlog.set_xlabel("seconds since the run began", fontsize=8)
    for axes in (rate, backlog):
        axes.tick_params(labelsize=7)
        axes.spines[["top", "right"]].set_visible(False)
        axes.set_xlim(0, max(end, 1))
    if title:
        rate.set_title(title, fontsize=9, loc="left")
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def series_svg(panels: list[dict[str, Any]], faults: list[dict[str, Any]] | None = None, title: str = "",
               xlabel: str = "seconds since the run began") -> str | None:
    """Stacked panels sharing the time axis, each ``{"ylabel": ..., "lines": [{"label", "x", "y", "colour"?,
    "alpha"?}]}`` (a None in ``y`` is a gap); ``faults`` (as :func:`fault_windows` gives them) shaded on every
    panel. None when no line has a point."""
    if not any(any(v is not None for v in line["y"]) for panel in panels for line in panel["lines"]):
        return None
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    figure, axes_list = plt.subplots(len(panels), 1, figsize=(11.0, 1.5 + 1.35 * len(panels)), sharex=True,
                                     squeeze=False, gridspec_kw={"hspace": 0.1})
    end = max((line["x"][-1] for panel in panels for line in panel["lines"] if line["x"]), default=1)
    for axes, panel in zip(axes_list[:, 0], panels, strict=True):
        for line in panel["lines"]:
            y = [float("nan") if v is None else v for v in line["y"]]
            axes.plot(line["x"], y, lw=1.2, color=line.get("colour"), alpha=line.get("alpha", 0.9),
                      label=line.get("label"), drawstyle="steps-mid")
        for window in faults or []:
            colour = _COLOURS.get(window["target"], "#8c564b")
            stop = window["stop_s"] if window["stop_s"] is not None else end
            if stop - window["start_s"] >= 0.5:
                axes.axvspan(window["start_s"], stop, color=colour, alpha=0.15, lw=0)
            else:
                axes.axvline(window["start_s"], color=colour, lw=1.0, alpha=0.8)
        axes.set_ylabel(panel["ylabel"], fontsize=8)
        axes.tick_params(labelsize=7)
        axes.spines[["top", "right"]].set_visible(False)
        axes.set_xlim(0, max(end, 1))
        axes.set_ylim(bottom=0)
        labelled = [line for line in panel["lines"] if line.get("label")]
        if len(labelled) > 3:  # inside, that many names sit on the lines
            axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        elif labelled:
            axes.legend(fontsize=7, loc="upper right", frameon=False, ncol=len(labelled))
    for window in faults or []:
        axes_list[0, 0].annotate(window["fault"], xy=(window["start_s"], 1.0), xycoords=("data", "axes fraction"),
                                 xytext=(2, -4), textcoords="offset points", fontsize=7,
                                 color=_COLOURS.get(window["target"], "#8c564b"), va="top")
    axes_list[-1, 0].set_xlabel(xlabel, fontsize=8)
    if title:
        axes_list[0, 0].set_title(title, fontsize=9, loc="left")
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]
