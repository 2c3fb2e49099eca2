"""The suite's turns (tests/workers.py), on real processes and real file locks: a test that must be alone never
overlaps another, and shared ones do run at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.workers import ALONE, SHARED

TURNS = """
import json, sys, time
from pathlib import Path
from tests.workers import Turns
turns, log = Turns(Path(sys.argv[1])), []
for mode in map(int, sys.argv[2].split(",")):
    with turns.taking(mode):
        started = time.monotonic()
        time.sleep(0.3)
        log.append([mode, started, time.monotonic()])
print(json.dumps(log))
"""


def test_an_alone_turn_overlaps_no_other_and_shared_turns_overlap_each_other(tmp_path: Path) -> None:
    plans = [[SHARED, ALONE, SHARED, SHARED], [SHARED, SHARED, ALONE, SHARED]]
    workers = [subprocess.Popen([sys.executable, "-c", TURNS, str(tmp_path), ",".join(map(str, plan))],
                                stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1]) for plan in plans]
    turns = [(worker, *turn) for worker, process in enumerate(workers)
             for turn in json.loads(process.communicate(timeout=60)[0])]
    overlapping = [(a, b) for a in turns for b in turns if a[0] < b[0] and a[2] < b[3] and b[2] < a[3]]
    assert len(turns) == 8
    assert not [pair for pair in overlapping if ALONE in (pair[0][1], pair[1][1])], overlapping
    assert overlapping, "two workers' shared turns never ran at once"


KEPT = """
import json, sys, time
from pathlib import Path
from tests.workers import ALONE, Turns
turns, log = Turns(Path(sys.argv[1])), []
time.sleep(0.2)  # the other worker is in its shared turns
for _ in range(2):  # two tests marked alone, one after the other: the turn is kept between them
    turns.keep(ALONE)
    started = time.monotonic()
    time.sleep(0.3)
    log.append([started, time.monotonic()])
turns.drop()
print(json.dumps(log))
"""


def test_a_run_of_alone_turns_lets_no_other_turn_in_between(tmp_path: Path) -> None:
    shared = subprocess.Popen([sys.executable, "-c", TURNS, str(tmp_path), ",".join([str(SHARED)] * 12)],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    kept = subprocess.Popen([sys.executable, "-c", KEPT, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parents[1])
    alone_turns = json.loads(kept.communicate(timeout=60)[0])
    others = json.loads(shared.communicate(timeout=60)[0])
    first, last = alone_turns[0][0], alone_turns[-1][1]
    assert len(alone_turns) == 2 and not [turn for turn in others if turn[1] < last and first < turn[2]], others
    assert any(turn[2] <= first for turn in others) and any(turn[1] >= last for turn in others), "around, not in"
