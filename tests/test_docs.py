"""The documentation cannot go stale: every ```python block of README.md and the reference
runs, generated sections equal their generators' output, links resolve, and the public
docstrings carry every argument.

Snippet convention (also in docs/README.md):

- Every fenced ```python block of a page runs, in order, in one namespace per page (a block
  may use names an earlier block of its page defined), on this machine's default device.
  Blocks are written small (a few to a few thousand envs) so the suite runs them on a CPU.
- ``<!-- requires: mod, ... -->`` on the line before a block: skipped (with that reason)
  when a module is not installed (an optional extra).
- ``<!-- skip: reason -->`` on the line before a block: never run here (it needs CUDA,
  ``torchrun``, or a long training run); reported as skipped with the reason.
- Shell commands go in ```bash blocks and expected output in ```text blocks: not run.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import linecache
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpuparam as gp

ROOT = Path(__file__).resolve().parents[1]
PAGES = (
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
    "benchmarks/README.md",
    "benchmarks/gpu/README.md",
    "examples/README.md",
)
BLOCK = re.compile(
    r"(?:<!--\s*(?P<marker>skip|requires):\s*(?P<arg>.*?)\s*-->[ \t]*\n)?"
    r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$",
    re.S | re.M,
)


def _blocks(page: str) -> list[tuple[str | None, str, str]]:
    text = (ROOT / page).read_text()
    return [(m["marker"], m["arg"] or "", m["code"]) for m in BLOCK.finditer(text)]


SNIPPETS = [(page, i) for page in PAGES for i in range(len(_blocks(page)))]
_namespaces: dict[str, dict] = {}
_failed: dict[str, str] = {}


def test_every_page_exists_and_has_a_heading():
    for page in PAGES:
        assert (ROOT / page).read_text().startswith("# "), page


@pytest.mark.parametrize(("page", "index"), SNIPPETS,
                         ids=[f"{p}:{i}" for p, i in SNIPPETS])
def test_snippet_runs(page, index, tmp_path, monkeypatch):
    marker, arg, code = _blocks(page)[index]
    if marker == "skip":
        pytest.skip(arg)
    if marker == "requires":
        missing = [m.strip() for m in arg.split(",") if importlib.util.find_spec(m.strip())
                   is None]
        if missing:
            pytest.skip(f"needs {', '.join(missing)} (an optional extra)")
    if page in _failed:
        pytest.skip(f"an earlier block of {page} failed ({_failed[page]})")
    module = "snippets_" + re.sub(r"\W", "_", page)
    ns = _namespaces.setdefault(page, {"__name__": module})
    monkeypatch.chdir(tmp_path)  # a snippet writes nothing into the checkout
    torch.manual_seed(0)
    # registered with linecache so inspect.getsource finds it (Warp reads kernels' source)
    filename = f"<{page} python block {index}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        exec(compile(code, filename, "exec"), ns)  # noqa: S102
    except BaseException:
        _failed[page] = f"block {index}"
        raise
    assert list(tmp_path.iterdir()) == [], "a snippet wrote files"


# ----------------------------------------------------------------------------- generated
@pytest.mark.skipif(importlib.util.find_spec("mujoco_warp") is None,
                    reason="docs/params.md covers the robots: needs gpuparam[mujoco]")
def test_params_page_is_current():
    from docs.params import PAGE, render

    assert PAGE.read_text() == render(), "docs/params.md is stale: run python -m docs.params"


def test_params_page_covers_every_built_in_env():
    """docs/params.md has a section for every built-in env ``gp.make`` knows."""
    # a fresh interpreter: snippets of other pages register envs of their own in this one
    out = subprocess.run([sys.executable, "-c", "import gpuparam as gp; print(*gp.registered())"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    built_in = out.stdout.split()
    assert "Go1JoystickFlatTerrain-v1" in built_in, out.stdout
    sections = re.findall(r"^## (\S+)$", (ROOT / "docs/params.md").read_text(), flags=re.M)
    assert [n for n in built_in if n not in sections] == [], "run python -m docs.params"


def test_performance_sections_come_from_the_results_file():
    from benchmarks import report

    res = json.loads((ROOT / "benchmarks/results/cpu.json").read_text())
    readme = (ROOT / "README.md").read_text()
    reference = (ROOT / report.REFERENCE).read_text()
    fix = ("run python -m benchmarks.report benchmarks/results/cpu.json --update-readme "
           "README.md --update-reference benchmarks/README.md")
    assert report.summary_markdown(res) in readme, fix
    assert report.full_markdown(res) in reference, fix
    start = readme.index(report.START)
    section = readme[start:readme.index(report.END) + len(report.END)]
    assert len(section.splitlines()) <= 40, "the README's performance section is a summary"


# ----------------------------------------------------------------------------- the README
def test_readme_commands_are_what_ci_runs():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci/run").read_text()
    ci = ci.replace("python -m pip install -q", "pip install")  # CI's quieter spelling
    for cmd in ("pip install torch==2.13.0", 'pip install -e ".[dev]"', "ruff check .",
                "python -m pytest -q"):
        assert cmd in readme, f"README lacks {cmd!r}"
        assert cmd in ci, f".ci/run lacks {cmd!r}"


README_MAX_WORDS = 2500  # counted as ``wc -w README.md`` counts them


def test_readme_is_a_guide():
    text = (ROOT / "README.md").read_text()
    lines, words = text.splitlines(), len(text.split())
    assert len(lines) <= 260, f"README.md has {len(lines)} lines: move reference to docs/"
    assert words <= README_MAX_WORDS, (
        f"README.md has {words} words, expected at most {README_MAX_WORDS}: move reference "
        "to docs/ (docs/README.md indexes it)")


def test_readme_states_the_test_time_cold_and_warm():
    """The suite's time depends on Warp's kernel cache: both figures, in the README and in
    docs/install.md."""
    for page in ("README.md", "docs/install.md"):
        text = re.sub(r"\s+", " ", (ROOT / page).read_text())
        for phrase in ("about 8.5 minutes", "warm", "44 minutes",
                       "empty"):
            assert phrase in text, f"{page} lacks {phrase!r} (the test time, cold and warm)"


def _masked(text: str) -> list[str]:
    """Output lines with measured rates replaced (they vary from run to run)."""
    return [re.sub(r"[\d,]+ env-steps/s", "<rate> env-steps/s", ln.rstrip())
            for ln in text.strip().splitlines()]


def test_quickstart_prints_what_the_readme_shows():
    text = (ROOT / "README.md").read_text()
    shown = re.search(r"```bash\npython examples/quickstart.py\n```\n.*?```text\n(.*?)```",
                      text, flags=re.S)
    assert shown, "README: the quickstart command and its output (```text) are missing"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "examples/quickstart.py", "--device", "cpu"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _masked(out.stdout) == _masked(shown.group(1))


# ----------------------------------------------------------------------------- links, todos
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_resolve():
    bad = []
    for page in PAGES:
        base = (ROOT / page).parent
        for target in LINK.findall((ROOT / page).read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            dest = (base / path).resolve()
            if not dest.exists():
                bad.append(f"{page}: {target}")
            elif anchor and dest.suffix == ".md":
                heads = {_anchor(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(),
                                                         flags=re.M)}
                if anchor not in heads:
                    bad.append(f"{page}: {target} (no such heading)")
    assert bad == []


# Absolute paths a page about the GPU may name: scratch folders and the caches of Warp and
# of the kit's downloads, which exist on any machine; nothing of the machine this project
# is developed on, nor of the machinery that reaches a GPU.
ALLOWED_PATHS = ("/tmp/", "~/.cache/warp/", "~/.cache/gpuparam/")
ABSOLUTE = re.compile(r"(?<![\w.:/~-])(~?/[\w.+-]+(?:/[\w.+<>-]*)*)")
MACHINERY = ("/work", ".library", "device tool", "`device`", "`run`", "give_back", "run(",
             "carry=", "device call", "device-minute", "device session")


def test_gpu_pages_name_no_path_outside_the_repository():
    """docs/gpu.md and benchmarks/gpu/README.md describe the GPU machine by its properties:
    no absolute path but scratch and cache folders, no relative link leaving the
    repository, no name of the machinery used to reach a GPU."""
    bad = []
    for page in ("docs/gpu.md", "benchmarks/gpu/README.md"):
        text = (ROOT / page).read_text()
        for path in ABSOLUTE.findall(re.sub(r"https?://\S+", "", text)):
            if not path.startswith(ALLOWED_PATHS):
                bad.append(f"{page}: {path}")
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
                dest = ((ROOT / page).parent / target.partition("#")[0]).resolve()
                if not dest.is_relative_to(ROOT):
                    bad.append(f"{page}: link {target}")
        bad += [f"{page}: {word!r}" for word in MACHINERY if word in text]
    for path in sorted((ROOT / "benchmarks" / "gpu").iterdir()):  # and the kit's files
        if path.is_file() and path.suffix in (".py", ".sh", ".md"):
            text = path.read_text()
            bad += [f"{path.relative_to(ROOT)}: {word!r}" for word in MACHINERY
                    if word in text and word != "run("]
    assert bad == []


def test_one_list_of_rendering_packages():
    """Every page and example naming the system packages of headless rendering (EGL,
    OSMesa) names the same ones."""
    files = [*PAGES, *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "examples").glob("*.py")))]
    lists = {f: sorted(set(re.findall(r"\blib(?:egl|gl|osmesa)[\w.-]*\b",
                                      (ROOT / f).read_text())))
             for f in files}
    lists = {f: v for f, v in lists.items() if v}
    assert len({tuple(v) for v in lists.values()}) <= 1, lists


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def test_nothing_left_for_later():
    """A runtime nobody measured yet is written TODO(lead): this fails until it is filled."""
    todo = [f"{p}:{i + 1}" for p in PAGES
            for i, ln in enumerate((ROOT / p).read_text().splitlines()) if "TODO(lead)" in ln]
    assert todo == [], f"unmeasured or unfinished: {todo}"


# ----------------------------------------------------------------------------- docstrings
PUBLIC = list(gp.__all__)


def _public(name: str):
    if name in ("Push", "RobotEnv") and importlib.util.find_spec("mujoco_warp") is None:
        pytest.skip("needs gpuparam[mujoco]")
    return getattr(gp, name)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstring_mentions_every_argument(name):
    obj = _public(name)
    assert callable(obj), name
    if inspect.isclass(obj):
        docs = [c.__doc__ or "" for c in obj.__mro__ if c.__module__.startswith("gpuparam")]
        init = obj.__init__
        if init is object.__init__:
            params = []
        else:
            docs.append(init.__doc__ or "")
            params = list(inspect.signature(init).parameters.values())[1:]
    else:
        docs = [obj.__doc__ or ""]
        params = list(inspect.signature(obj).parameters.values())
    text = "\n".join(docs)
    assert docs[0].strip(), f"gp.{name} has no docstring"
    missing = [p.name for p in params if not re.search(rf"\b{re.escape(p.name)}\b", text)]
    assert missing == [], f"gp.{name}: its docstring does not mention {missing}"


def test_integrations_docstrings_mention_every_argument():
    """The adapters users construct: every argument documented."""
    names = {"torchrl": ("TorchRLEnv", "ObsNormTransform"), "gymnasium": ("GymnasiumVectorEnv",),
             "rsl_rl": ("RslRlVecEnv",), "skrl": ("SkrlWrapper", "ObsNormPreprocessor", "wrap"),
             "sb3": ("SB3VecEnv",)}
    missing = {}
    for mod, objs in names.items():
        try:
            m = importlib.import_module(f"gpuparam.integrations.{mod}")
        except ImportError:
            continue
        for n in objs:
            obj = getattr(m, n)
            fn = obj.__init__ if inspect.isclass(obj) else obj
            text = (obj.__doc__ or "") + (fn.__doc__ or "")
            params = [p for p in list(inspect.signature(fn).parameters)
                      if p not in ("self", "args", "kwargs")]
            gone = [p for p in params if not re.search(rf"\b{re.escape(p)}\b", text)]
            if gone:
                missing[f"{mod}.{n}"] = gone
    assert missing == {}
