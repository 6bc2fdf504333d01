"""Rules the test suite itself follows (CONTRIBUTING.md, "Style")."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _test_files() -> list[Path]:
    files = sorted((ROOT / "tests").rglob("*.py"))
    files += sorted((ROOT / "example_plugins").glob("*/tests/**/*.py"))
    return files


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in CLOCKS
        and isinstance(func.value, ast.Name)
        and func.value.id == "time"
    )


def _reads_the_clock(node: ast.AST, clock_names: set[str]) -> bool:
    for sub in ast.walk(node):
        if _is_clock_call(sub):
            return True
        if isinstance(sub, ast.Name) and (sub.id in clock_names or "elapsed" in sub.id):
            return True
    return False


def _clock_names(tree: ast.AST) -> set[str]:
    """Names assigned from an expression that reads the wall clock (``started = ...``)."""
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _reads_the_clock(node.value, names):
                for target in node.targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and sub.id not in names:
                            names.add(sub.id)
                            changed = True
    return names


def test_no_test_asserts_on_elapsed_wall_time() -> None:
    # A loaded machine makes every run slower: a test asserts what the code guarantees (the
    # outcome, the error, the state left behind), and timing claims live in bench/.
    offenders = []
    for path in _test_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        clock_names = _clock_names(tree) - {"deadline"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) and _reads_the_clock(node.test, clock_names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "assertions on elapsed wall time: " + ", ".join(offenders)


JS_TEST_FILES = (
    "tests/sandbox/test_code_handler.py",
    "tests/sandbox/test_code_escape_js.py",
    "tests/actions/test_custom_actions.py",
)
PYTEST_ARGS = ("-p", "no_mini_racer", "-p", "no:cacheprovider", "-q", "-rs")
JS_SKIP_REASON = "pip install 'agentplug[js]' (mini-racer)"


def test_javascript_code_action_tests_skip_with_a_reason_without_mini_racer(
    tmp_path: Path,
) -> None:
    # A real pytest run of the files holding JavaScript tests, in an interpreter where
    # py_mini_racer cannot be imported (as without the js extra): nothing fails, the
    # JavaScript tests are skipped and say how to run them.
    (tmp_path / "no_mini_racer.py").write_text(
        "import sys\nsys.modules['py_mini_racer'] = None  # import fails: no js extra\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *PYTEST_ARGS, *JS_TEST_FILES],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(JS_SKIP_REASON in line for line in skipped), out
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skipped) >= 20


def test_make_test_installs_the_js_extra_so_ci_runs_the_javascript_tests() -> None:
    # CI runs exactly `make test` (.ci/run); its install line must bring mini-racer.
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    stamp_rule = makefile.split("$(STAMP): ", 1)[1].split("\n\n", 1)[0]
    extras = stamp_rule.split("-e '.[", 1)[1].split("]'", 1)[0].split(",")
    assert {"test", "js", "api", "yaml"} <= set(extras)
    demo_rule = makefile.split("$(DEMO_STAMP): ", 1)[1].split("\n\n", 1)[0]
    # the demo: both distributions (the contract, hookspecs/, and the runtime), no extras
    assert "install -e hookspecs -e .\n" in demo_rule and "[test" not in demo_rule


def _module_marks(path: Path) -> set[str]:
    """Names of the marks a test module's ``pytestmark = pytest.mark.<name>`` sets."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    marks: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            for sub in ast.walk(node.value):
                parent = getattr(sub, "value", None)
                is_mark = isinstance(parent, ast.Attribute) and parent.attr == "mark"
                if isinstance(sub, ast.Attribute) and is_mark:
                    marks.add(sub.attr)
    return marks


def test_multi_process_test_modules_carry_the_stress_marker() -> None:
    modules = sorted((ROOT / "tests").rglob("*_multiprocess.py"))
    assert modules
    unmarked = [str(p.relative_to(ROOT)) for p in modules if "stress" not in _module_marks(p)]
    assert unmarked == [], "add `pytestmark = pytest.mark.stress` to these modules"


def test_make_pytest_runs_in_parallel_and_keeps_the_stress_tests() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = makefile.split("\npytest: ", 1)[1].split("\n\n", 1)[0]
    assert " -n " in rule  # pytest-xdist
    assert "not stress" not in rule  # CI runs `make test`: the stress tests run there
    # One documented flag leaves them out locally: `make test SKIP_STRESS=1`.
    assert "$(STRESS_ARGS)" in rule
    assert 'STRESS_ARGS := $(if $(SKIP_STRESS),-m "not stress",)' in makefile
    assert "SKIP_STRESS=1" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_parallel_run_prints_one_line_per_file_and_the_final_count(tmp_path: Path) -> None:
    # Even with --durations and -q: the report a person reads at the end of `make pytest`.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "-q",
            "--durations=3",
            "-p",
            "no:cacheprovider",
            "tests/test_suggest.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = done.stdout.splitlines()
    assert any(line.startswith("[  1/1] tests/test_suggest.py: ") for line in lines), done.stdout
    assert re.fullmatch(r"\d+ passed.* in [\d.]+s( \(.*\))?", lines[-1]), done.stdout


# -- polling loops ------------------------------------------------------------------------


def _calls_sleep(node: ast.AST) -> bool:
    """A ``sleep(...)`` call whose argument is not the literal ``0`` (``sleep(0)`` only
    yields to the event loop: a fixed number of them is deterministic, not a wait)."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        zero = sub.args and isinstance(sub.args[0], ast.Constant) and sub.args[0].value == 0
        if name == "sleep" and not zero:
            return True
    return False


def _leaves_early(loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    return any(isinstance(n, ast.Break | ast.Return) for b in loop.body for n in ast.walk(b))


def _mentions_the_clock(test: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and "deadline" in n.id)
        or (isinstance(n, ast.Attribute) and n.attr in CLOCKS)
        for n in ast.walk(test)
    )


def _is_polling(node: ast.AST) -> bool:
    """A loop that sleeps until something happens or a count or deadline runs out."""
    if isinstance(node, ast.For | ast.AsyncFor):
        counted = isinstance(node.iter, ast.Call) and getattr(node.iter.func, "id", "") == "range"
        return counted and _calls_sleep(node) and _leaves_early(node)
    if isinstance(node, ast.While) and _calls_sleep(node) and _mentions_the_clock(node.test):
        only_the_clock = all(
            _mentions_the_clock(v) for v in getattr(node.test, "values", [node.test])
        )
        # ``while monotonic() < deadline: work()`` is timed work, not a wait for an event.
        return not only_the_clock or _leaves_early(node)
    return False


def _checks(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` fails the test when the wait ran out (or hands the outcome back)."""
    if isinstance(stmt, ast.Assert | ast.Raise | ast.Return):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return isinstance(func, ast.Attribute) and func.attr == "fail"
    if isinstance(stmt, ast.If):
        return any(_checks(s) for s in stmt.body)
    return False


def _after(tree: ast.AST, loop: ast.stmt) -> ast.stmt | None:
    """The statement that runs after ``loop`` completes (climbing out of ``with`` and
    ``try`` blocks it ends)."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    node: ast.AST = loop
    while True:
        parent = parents.get(node)
        if parent is None:
            return None
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and node in block:
                index = block.index(node)
                if index + 1 < len(block):
                    return block[index + 1]
        if not isinstance(parent, ast.With | ast.AsyncWith | ast.Try):
            return None
        node = parent


def test_a_polling_loop_fails_when_what_it_waits_for_never_happens() -> None:
    # `for _ in range(400): ...; sleep(0.005)` followed by an action that assumes the
    # event happened fails at random on a loaded machine (issue 28). A wait ends in a
    # check: an `else:` that fails, or an assert / raise / pytest.fail / return right after.
    offenders = []
    for path in _test_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not _is_polling(node):
                continue
            assert isinstance(node, ast.For | ast.AsyncFor | ast.While)
            if any(_checks(s) for s in node.orelse):
                continue
            following = _after(tree, node)
            if following is None or not _checks(following):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "polling loops that go on whether or not the event came: " + (
        ", ".join(offenders)
    )
