"""Rules the test suite itself follows (CONTRIBUTING.md, "Style")."""

from __future__ import annotations

import ast
import os
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
