"""Every committed study table is what its committed records give, byte for byte (bench/rebuild_tables.py).

The tables of bench/results/study, study_controls, study_confirmation and mml_study are rewritten from their runs'
records with --tables_only in a temporary copy, and the confirmation and STS-B rerun pages from the tables; each must
equal the committed file. A table edited by hand, a record changed or missing, or a change to how tables are written
without rewriting them (python bench/rebuild_tables.py --write) fails here, with the file named.

Run: python -m pytest -q tests/studies/test_committed_tables.py   (offline, about two minutes: marked slow)
"""

from pathlib import Path

import pytest
from conftest import bench_script

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_every_committed_table_is_rebuilt_byte_for_byte_from_its_records():
    rebuild = bench_script("rebuild_tables")
    texts = rebuild.rebuilt()
    texts.update(rebuild.pages())
    assert {"study/table.md", "study_controls/table.md", "mml_study/table1.md", "study_controls/confirmation.md"} <= set(texts)
    for rel, text in texts.items():
        committed = (BENCH / "results" / rel).read_text()
        assert committed == text, (f"bench/results/{rel} is not what its records give: run python bench/rebuild_tables.py "
                                   "to see the difference, and --write to rewrite it if the change is meant")
