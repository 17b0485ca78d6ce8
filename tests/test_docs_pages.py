"""Every command the README and the pages in docs/ show is run here, as a reader would
type it, and what the page says of it is checked: its exit code and the lines quoted under
it.

A page shows commands in ```console blocks: `$ command` (a line ending in `\\` goes on),
then the lines it prints, in order, with `...` for lines left out; a quoted line ending in
`...` stands for any line that begins with it, one after `...` for any that ends with it,
one between two `...` for any that holds it. A command that exits other than 0 says so
at its end (`# exit 1`). A command ending in `&` is started in the background (a server);
the next one waits until the lines quoted under it are printed, and it is stopped when the
page is done. Shell blocks are not allowed in the pages (their commands would go unrun);
Python blocks are run, each in a fresh interpreter, unless the block's first line names
the test that runs it instead (`# fuzz_refsim.py -- run by tests/test_hypofuzz.py`)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/host-author.md", "docs/spec-author.md", "docs/fuzzing.md",
         "docs/teaching.md", "docs/reference.md")
# A page's commands together: a server it starts is stopped after this long at most.
COMMAND_SECONDS = 600
BACKGROUND_WAIT = 60.0
_FENCE = re.compile(r"^```(\w*)\s*$")
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")

pytestmark = pytest.mark.xdist_group("docs")  # the pages' fixed ports, one page at a time


@attrs.frozen
class Command:
    line: int
    text: str
    code: int
    background: bool
    quoted: tuple[str, ...]


@attrs.frozen
class Block:
    lang: str
    line: int
    body: tuple[str, ...]


def blocks(text: str) -> list[Block]:
    out: list[Block] = []
    lang: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if lang is None and fence is not None:
            lang, start, body = fence.group(1), number, []
        elif lang is not None and line.startswith("```"):
            out.append(Block(lang, start, tuple(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"a block opened at line {start} is never closed"
    return out


def commands(block: Block) -> list[Command]:
    out: list[Command] = []
    lines = list(block.body)
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), (f"line {block.line + 1 + i}: a console block starts "
                                       f"with a command ($ ...), not {line!r}")
        start = block.line + 1 + i
        text = line[2:]
        while text.endswith("\\"):
            i += 1
            text = text[:-1] + " " + lines[i].strip()
        i += 1
        quoted = []
        while i < len(lines) and not lines[i].startswith("$ "):
            quoted.append(lines[i])
            i += 1
        code = 0
        found = _EXIT.search(text)
        if found is not None:
            code, text = int(found.group(1)), text[:found.start()]
        background = text.rstrip().endswith("&")
        out.append(Command(start, text.rstrip().removesuffix("&").rstrip(), code, background,
                           tuple(quoted)))
    return out


def _holds(line: str, want: str) -> bool:
    """Whether a printed line is the quoted one: the same, or, where the quote begins or
    ends with `...`, one that ends with, begins with or holds the rest."""
    head, tail = want.startswith(("...", "…")), want.endswith(("...", "…"))
    stem = want.strip(".…").strip()
    if line == want or not stem:
        return line == want
    if head and tail:
        return stem in line
    if head:
        return line.endswith(stem)
    return tail and line.startswith(stem)


def missing(quoted: tuple[str, ...], printed: str) -> str | None:
    """The first quoted line not printed (in order), or None."""
    lines = [ln.strip() for ln in printed.splitlines()]
    at = 0
    for want in (q.strip() for q in quoted):
        if want in ("", "...", "…"):
            continue
        found = next((i for i in range(at, len(lines)) if _holds(lines[i], want)), None)
        if found is None:
            return want
        at = found + 1
    return None


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    for name in ("OPENWOP_BASE_URL", "OPENWOP_API_KEY", "OPENWOP_TEST_TENANT_B_API_KEY"):
        env.pop(name, None)
    return env


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def run_page(page: str, tmp_path: Path, root: Path = ROOT) -> list[str]:
    """Every command of `page` (under `root`), run in order in `tmp_path`; what went wrong,
    one line each."""
    text = (root / page).read_text(encoding="utf-8")
    env = _env(tmp_path)
    wrong: list[str] = []
    started: list[subprocess.Popen[str]] = []
    try:
        for block in blocks(text):
            if block.lang in ("sh", "bash", "shell") and page != "README.md":
                wrong.append(f"{page}:{block.line}: a shell block; show it as console")
            if block.lang == "python":
                if block.body and "run by tests/" in block.body[0]:
                    named = block.body[0].split("run by ", 1)[1].strip()
                    if not (root / named).is_file():
                        wrong.append(f"{page}:{block.line}: {named} does not exist")
                    continue
                done = subprocess.run([sys.executable, "-c", "\n".join(block.body)],
                                      cwd=tmp_path, env=env, capture_output=True, text=True,
                                      timeout=COMMAND_SECONDS)
                if done.returncode != 0:
                    wrong.append(f"{page}:{block.line}: the Python block exited "
                                 f"{done.returncode}: {done.stderr[-400:]}")
            if block.lang != "console":
                continue
            for command in commands(block):
                where = f"{page}:{command.line}: `{command.text}`"
                if command.background:
                    log = tmp_path / f"background-{command.line}.log"
                    process = subprocess.Popen(
                        ["bash", "-c", f"exec {command.text}"], cwd=tmp_path, env=env,
                        stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                        start_new_session=True)
                    started.append(process)
                    deadline = time.monotonic() + BACKGROUND_WAIT
                    while missing(command.quoted, log.read_text()) is not None:
                        if process.poll() is not None or time.monotonic() > deadline:
                            wrong.append(f"{where} never printed "
                                         f"{missing(command.quoted, log.read_text())!r}: "
                                         f"{log.read_text()[-400:]}")
                            break
                        time.sleep(0.1)
                    continue
                done = subprocess.run(["bash", "-c", command.text], cwd=tmp_path, env=env,
                                      capture_output=True, text=True,
                                      timeout=COMMAND_SECONDS)
                said = done.stdout + done.stderr
                if done.returncode != command.code:
                    wrong.append(f"{where} exited {done.returncode}, the page says "
                                 f"{command.code}: {said[-600:]}")
                    continue
                absent = missing(command.quoted, said)
                if absent is not None:
                    wrong.append(f"{where} did not print {absent!r}: {said[-600:]}")
    finally:
        for process in started:
            _stop(process)
    return wrong


# -- the harness itself ------------------------------------------------------------------------

def test_a_transcript_reads_commands_codes_and_quoted_lines() -> None:
    page = ("text\n```console\n$ refsim serve --port 1 &\nserving...\n$ refsim check \\\n"
            "    --base-url x  # exit 1\nA\n...\nB\n```\n")
    (block,) = blocks(page)
    serve, check = commands(block)
    assert serve == Command(3, "refsim serve --port 1", 0, True, ("serving...",))
    assert check == Command(5, "refsim check  --base-url x", 1, False, ("A", "...", "B"))


def test_quoted_lines_match_in_order_with_prefixes() -> None:
    printed = "one\n  two and more\nthree\n"
    assert missing(("one", "...", "three"), printed) is None
    assert missing(("two and...",), printed) is None
    assert missing(("three", "one"), printed) == "one"  # out of order
    assert missing(("two",), printed) == "two"  # a whole line unless it ends in ...
    assert missing(("...and mo...",), printed) is None  # held anywhere in a line
    assert missing(("...and less...",), printed) == "...and less..."
    assert missing(("...more",), printed) is None and missing(("...two",), printed)


def test_the_runner_fails_a_wrong_exit_code_and_a_line_not_printed(tmp_path: Path) -> None:
    """The harness itself can fail: a page that quotes what is not printed, or claims
    another exit code, is reported."""
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "bad.md"
    page.write_text("```console\n$ echo hello\nhello\n$ echo hi\nhello\n$ false\n"
                    "$ exit 3  # exit 3\n```\n", encoding="utf-8")
    wrong = run_page("docs/bad.md", tmp_path, root=tmp_path)
    assert len(wrong) == 2, wrong
    assert "`echo hi` did not print 'hello'" in wrong[0]
    assert "`false` exited 1, the page says 0" in wrong[1]


# -- the pages ---------------------------------------------------------------------------------

def test_every_page_is_linked_from_the_readme_and_the_readme_is_a_first_screen() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    first = blocks(readme)[0]
    assert first.lang == "sh" and "refsim check" in first.body[0]  # the main job first
    assert "pytest" in first.body[1]  # then the tests
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    assert pages == sorted(p for p in PAGES if p.startswith("docs/"))
    for page in pages:
        assert f"]({page})" in readme, page


@pytest.mark.parametrize("page", [p for p in PAGES if p not in ("docs/host-author.md",
                                                                 "docs/fuzzing.md")])
def test_the_commands_of_a_page_do_what_it_says(page: str, tmp_path: Path) -> None:
    wrong = run_page(page, tmp_path)
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["docs/host-author.md", "docs/fuzzing.md"])
def test_the_commands_of_a_long_page_do_what_it_says(page: str, tmp_path: Path) -> None:
    if "redis-server" in (ROOT / page).read_text(encoding="utf-8") and not shutil.which(
            "redis-server"):
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (.ci/run installs it)")
        pytest.skip("redis-server is not installed")
    wrong = run_page(page, tmp_path)
    assert not wrong, "\n\n".join(wrong)
