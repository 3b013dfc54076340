"""When the query read each record, from the checkpoint's offsets log: the planned time of the first batch whose
range (the previous batch's end offsets to its own) holds the record's offset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from streamcert.harness.run.arrival import arrival_times

TOPIC = "in-topic"


def _offsets_log(checkpoint: Path, batches: dict[int, tuple[float, dict[str, int] | None]]) -> Path:
    """``offsets/N`` as Spark writes it: version, metadata with ``batchTimestampMs``, one line per source (a rate
    source's number beside the Kafka source's offsets)."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True)
    for batch_id, (planned, ends) in batches.items():
        source = json.dumps({TOPIC: ends}) if ends is not None else "-"
        (folder / str(batch_id)).write_text(
            f"v1\n{json.dumps({'batchWatermarkMs': 0, 'batchTimestampMs': int(planned * 1000), 'conf': {}})}\n"
            f"{source}\n{batch_id * 7}")
    return checkpoint


def _ledger(rows: list[tuple[int, int]]) -> pd.DataFrame:
    return pd.DataFrame({"id": range(len(rows)), "partition": [p for p, _ in rows], "offset": [o for _, o in rows]})


def test_each_record_arrives_when_the_batch_that_read_it_was_planned(tmp_path):
    checkpoint = _offsets_log(tmp_path, {0: (100.0, {"0": 0, "1": 0}), 1: (105.0, {"0": 3, "1": 2}),
                                         2: (110.0, {"0": 5, "1": 2})})
    ledger = _ledger([(0, 0), (0, 2), (1, 1), (0, 3), (0, 4), (0, 9), (1, 2)])
    arrived = arrival_times(ledger, checkpoint, TOPIC)
    assert arrived[:5].tolist() == [105.0, 105.0, 105.0, 110.0, 110.0]
    assert np.isnan(arrived[5:]).all()  # never read


def test_a_batch_whose_predecessor_was_purged_says_nothing_and_other_topics_are_not_read(tmp_path):
    checkpoint = _offsets_log(tmp_path, {7: (100.0, {"0": 10}), 8: (105.0, {"0": 20})})
    arrived = arrival_times(_ledger([(0, 5), (0, 15)]), checkpoint, TOPIC)
    assert np.isnan(arrived[0]) and arrived[1] == 105.0  # batch 7's start is unknown: it claims nothing
    assert np.isnan(arrival_times(_ledger([(0, 15)]), checkpoint, "another-topic")).all()
    assert np.isnan(arrival_times(pd.DataFrame({"id": [0]}), checkpoint, TOPIC)).all()  # no offsets in the ledger
