"""The README's GPU figures come from the committed GPU check results, by
``benchmarks/gpu/gpu_report.py``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks.gpu import gpu_report

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "benchmarks" / "results" / "gpu" / "h200.json"


FIX = ("run python -m benchmarks.gpu.gpu_report benchmarks/results/gpu/h200.json "
       "--update-readme README.md --update-docs docs/gpu.md")


def test_readme_gpu_section_is_generated_from_the_results():
    readme = (ROOT / "README.md").read_text()
    i, j = readme.index(gpu_report.START), readme.index(gpu_report.END)
    assert readme[i:j + len(gpu_report.END)] == gpu_report.markdown(
        gpu_report.load(MANIFEST)), FIX


def test_gpu_page_figures_are_generated_from_the_results():
    page = (ROOT / "docs" / "gpu.md").read_text()
    i, j = page.index(gpu_report.DOCS_START), page.index(gpu_report.DOCS_END)
    assert page[i:j + len(gpu_report.DOCS_END)] == gpu_report.docs_markdown(
        gpu_report.load(MANIFEST)), FIX


def test_figures_follow_the_result_lines(tmp_path):
    for f in MANIFEST.parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    path = tmp_path / "h200_1_train.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for d in lines:
        if d["section"] == "go1_train":
            d.update(env_steps=12_000_000, train_seconds=60.0, env_steps_per_s=200_000.0)
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    text = gpu_report.markdown(gpu_report.load(tmp_path / "h200.json"))
    assert "12.0 M in 60 s (200 k/s)" in text
    # a section that failed is no figure: drop the robots' ok line, and no row is left
    path = tmp_path / "h200_2_robots.jsonl"
    path.write_text("\n".join(x for x in path.read_text().splitlines()
                              if '"section": "robots"' not in x) + "\n")
    text = gpu_report.markdown(gpu_report.load(tmp_path / "h200.json"))
    assert "Ant-v5 env-steps/s" not in text
