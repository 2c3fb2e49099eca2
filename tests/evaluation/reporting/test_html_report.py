"""report.html in a real browser: Debian's headless Chromium (driven by Playwright) opens the page from disk with
the network off and checks what a user would see."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 - Playwright's Browser
    if not Path(CHROMIUM).is_file():
        pytest.skip("no Chromium: install Debian's chromium package (.ci/run does: apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install -e '.[dev]'")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def test_the_page_opens_offline_without_errors_and_shows_the_answer_and_its_evidence(browser, evaluated: Path,
                                                                                      tmp_path: Path) -> None:
    context = browser.new_context(offline=True, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: None if request.url.startswith(("file:", "data:")) else
            problems.append(f"network request: {request.url}"))
    page.goto((evaluated / "report.html").as_uri())
    assert problems == []
    assert "yolov5n at batch 1:" in page.inner_text("#recommendation ~ p.verdict")
    for figure in ("heatmap", "latency", "pareto", "memory"):
        assert page.eval_on_selector(f"#{figure} img", "image => image.naturalWidth") > 300, figure
        assert (evaluated / f"{figure}.svg").is_file() and (evaluated / f"{figure}.png").is_file()
    matrix = json.loads((evaluated / "results.json").read_text())["matrix"]
    assert page.locator("#matrix tbody tr").count() == len(matrix)
    screenshot = tmp_path / "report.png"
    page.screenshot(path=str(screenshot), full_page=True)
    from PIL import Image

    pixels = np.asarray(Image.open(screenshot).convert("L"), dtype=float)
    assert pixels.shape[0] > 2000 and pixels.std() > 20, "a blank or nearly blank page"
    context.close()


def test_the_matrix_sorts_by_a_clicked_column(browser, evaluated: Path) -> None:
    context = browser.new_context(offline=True)
    page = context.new_page()
    page.goto((evaluated / "report.html").as_uri())
    header = page.locator("#matrix th[data-key='latency_b1_p50_ms']")
    column = page.locator("#matrix th").all_inner_texts().index(header.inner_text())

    def latencies() -> list[float]:
        return [float(v) for v in page.eval_on_selector_all(
            f"#matrix tbody tr td:nth-child({column + 1})", "cells => cells.map(cell => cell.dataset.value)")]

    header.click()
    assert latencies() == sorted(latencies())
    header.click()
    assert latencies() == sorted(latencies(), reverse=True)
    context.close()


# 22 rows at b1 and b8: bench/results/zen4/fastest_artifact/results.json with each row's first round and five samples
# a batch size kept (what the page shows needs no more)
WIDE_REPORT = Path(__file__).parent / "wide_report"


def test_at_1400_px_the_page_never_scrolls_sideways_and_the_matrix_scrolls_in_its_own_box(browser,
                                                                                           tmp_path: Path) -> None:
    """The widest saved report (22 rows, two batch sizes, utilization: its matrix is far wider than the page)
    written again and opened at 1400 px: the page itself is no wider than the window; the matrix scrolls inside
    its box to its last column with the artifact column kept in view; snippets wrap rather than scroll."""
    from yolo_optimize.evaluation.reporting.report import load_report, write_report

    write_report(load_report(WIDE_REPORT), tmp_path)
    context = browser.new_context(offline=True, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto((tmp_path / "report.html").as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    box = page.locator("#matrix").locator("xpath=..")
    assert box.evaluate("box => box.scrollWidth > box.clientWidth"), "the matrix fits: nothing to check"
    artifact = page.locator("#matrix th[data-key='artifact']")
    before = artifact.bounding_box()
    box.evaluate("box => { box.scrollLeft = box.scrollWidth; }")
    note = page.locator("#matrix th[data-key='note']").bounding_box()
    assert note["x"] + note["width"] <= 1400 - 20, "the last column is not reachable"
    assert artifact.bounding_box()["x"] == pytest.approx(before["x"], abs=1), "the artifact column scrolled away"
    for snippet in page.locator("pre").all():
        assert snippet.evaluate("pre => pre.scrollWidth <= pre.clientWidth")
    context.close()
