"""Mutation testing with mutmut, module by module, resumable across sessions.

For each module named on the command line, builds ``.mutation/<dotted.module>/``: links
to ``cfopt/`` and ``tests/`` and a copy of ``pyproject.toml`` whose ``[tool.mutmut]``
mutates that one module and selects the test files of :data:`TESTS` for it. ``mutmut
run`` there generates the mutants, records which of the selected tests call each function
of the module (its stats) and runs each mutant against those tests only, one worker
process (``--max-children 1``). Its ``mutants/`` directory is the cache: a verdict is
kept until the function it mutates changes, so a run cut short by ``--max-minutes`` (or
the session's end) goes on where it stopped next time. Surviving mutants are re-run by
name at the end of every run (tests may have been added since: mutmut never re-runs a
cached verdict on its own); so are the mutants of a function whose text changed but not
its AST (mutmut's cache key), i.e. a ``# pragma: no mutate`` added or removed, which
renumbers its mutants; ``--rerun GLOB`` re-runs any others; ``--fresh`` drops a
module's cache.

Then reads the cache of every module of :data:`PACKAGES` and writes
``benchmarks/results/mutation.json``: per module the mutants by status (mutmut's own
``status_by_exit_code``), ``score`` and the surviving mutants with their diffs, and the
mutants marked equivalent in the source (``# pragma: no mutate (reason)``: mutmut
generates no mutant on such a line, so they are in no count; their reasons are listed).

``score`` = (killed + timeout) / (killed + timeout + survived + no_tests + suspicious +
segfault): a mutant is detected when its tests fail or run out of time (a mutant looping
forever); a mutant no selected test calls counts as undetected.  ``not_checked`` mutants
(a run cut short) are in no count and make the module's ``complete`` false.

    CFOPT_DATA_HOME=../shared/data python benchmarks/mutation.py cfopt/query/claims.py \\
        [more modules] [--max-minutes 60] [--fresh] [--no-retest] [--rerun GLOB]
        [--report-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
PROJECT = ROOT.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(PROJECT))

from common import environment, write  # noqa: E402

#: the packages where a wrong answer can come from (issue 38)
PACKAGES = ("cfopt/query", "cfopt/formulations", "cfopt/constraints", "cfopt/methods",
            "cfopt/models", "cfopt/space", "cfopt/solvers", "cfopt/groups")

#: the test files each module's mutants are run against (mutmut narrows them down to the
#: tests that call the mutated function)
TESTS: dict[str, list[str]] = {
    **{f"cfopt/groups/{name}.py": ["tests/test_groups.py"] for name in (
        "__init__", "actions", "request", "result", "solve", "costs", "enumeration")},
    **{f"cfopt/groups/{name}.py": ["tests/test_groups_branching.py", "tests/test_groups.py"]
       for name in ("master", "pricing", "branching")},
    "cfopt/groups/declared.py": ["tests/test_groups_declared.py"],
    "cfopt/query/claims.py": ["tests/test_query_claims.py", "tests/test_claims.py",
                              "tests/test_claims_solvers.py"],
    "cfopt/query/solution.py": ["tests/test_query_solution.py", "tests/test_query_claims.py",
                                "tests/test_claims.py", "tests/test_claims_solvers.py"],
    "cfopt/formulations/validity.py": ["tests/test_formulation_validity.py",
                                       "tests/test_claims.py", "tests/test_bad_input.py",
                                       "tests/test_explainer.py"],
    "cfopt/formulations/distances.py": ["tests/test_formulation_distances.py",
                                        "tests/test_claims.py", "tests/test_bad_input.py",
                                        "tests/test_explainer.py"],
    "cfopt/formulations/actionability.py": ["tests/test_formulation_actionability.py",
                                            "tests/test_claims.py", "tests/test_bad_input.py",
                                            "tests/test_explainer.py"],
    "cfopt/space/validate.py": ["tests/test_space_validate.py", "tests/test_bad_input.py",
                                "tests/test_features.py"],
    "cfopt/formulations/predictors/network.py": ["tests/test_formulation_network.py"],
    "cfopt/formulations/robustness.py": ["tests/test_formulation_robustness.py",
                                         "tests/test_formulation_network.py"],
    "cfopt/formulations/bound_tightening.py": ["tests/test_formulation_bound_tightening.py"],
    "cfopt/formulations/predictors/trees.py": ["tests/test_formulation_trees.py"],
    "cfopt/formulations/predictors/linear.py": ["tests/test_formulation_linear.py"],
    "cfopt/formulations/tree_cuts.py": ["tests/test_formulation_tree_cuts.py"],
    "cfopt/models/network.py": ["tests/test_models_network.py"],
    "cfopt/models/sklearn_models.py": ["tests/test_models_sklearn.py"],
    "cfopt/models/registry.py": ["tests/test_models_sklearn.py"],
    "cfopt/models/base.py": ["tests/test_models_base.py"],
    "cfopt/models/isolation.py": ["tests/test_models_isolation.py"],
    "cfopt/models/trees.py": ["tests/test_models_trees.py"],
    "cfopt/models/boosters.py": ["tests/test_models_boosters.py"],
    "cfopt/models/torch_sequential.py": ["tests/test_models_torch.py"],
    "cfopt/models/onnx_graph.py": ["tests/test_models_onnx.py"],
    "cfopt/formulations/tree_regions.py": ["tests/test_formulation_tree_regions.py"],
    "cfopt/formulations/predictors/base.py": ["tests/test_formulation_predictors.py",
                                              "tests/test_formulation_network.py"],
    "cfopt/formulations/features.py": ["tests/test_formulation_features.py"],
    "cfopt/constraints/causal.py": ["tests/test_constraints_causal.py"],
    "cfopt/constraints/blocks.py": ["tests/test_constraints_blocks.py"],
    "cfopt/constraints/composition.py": ["tests/test_constraints_composition.py"],
    "cfopt/constraints/diversity_cuts.py": ["tests/test_constraints_diversity_cuts.py"],
    "cfopt/constraints/scenarios.py": ["tests/test_constraints_scenarios.py"],
    "cfopt/constraints/rules.py": ["tests/test_constraints_rules.py"],
    "cfopt/constraints/setback.py": ["tests/test_constraints_setback.py"],
    "cfopt/models/pipeline.py": ["tests/test_models_pipeline.py"],
    "cfopt/space/perturbations.py": ["tests/test_space_perturbations.py"],
    "cfopt/space/encoding.py": ["tests/test_space_encoding.py"],
    "cfopt/space/feature.py": ["tests/test_space_feature.py", "tests/test_features.py"],
    "cfopt/space/space.py": ["tests/test_space_space.py", "tests/test_features.py",
                             "tests/test_space_validate.py"],
    "cfopt/space/infer.py": ["tests/test_space_space.py", "tests/test_features.py"],
    "cfopt/constraints/query_range.py": ["tests/test_constraints_query_range.py"],
    "cfopt/query/restrictions/relu_points.py": ["tests/test_query_restrictions_relu_points.py",
                                                "tests/test_relu_points.py"],
    "cfopt/query/ladder.py": ["tests/test_query_ladder.py"],
    "cfopt/query/supports.py": ["tests/test_query_supports.py"],
    "cfopt/query/restrictions/registry.py": ["tests/test_query_restrictions_registry.py"],
    "cfopt/query/diverse.py": ["tests/test_query_diverse.py"],
    "cfopt/query/diagnosis.py": ["tests/test_query_diagnosis.py"],
    "cfopt/constraints/trust_regions.py": ["tests/test_constraints_trust_regions.py"],
    "cfopt/constraints/isolation.py": ["tests/test_constraints_isolation.py"],
    "cfopt/constraints/custom.py": ["tests/test_constraints_custom.py"],
    "cfopt/constraints/raw.py": ["tests/test_constraints_raw.py"],
    "cfopt/query/runner.py": ["tests/test_query_runner.py"],
    "cfopt/query/restrictions/relu.py": ["tests/test_query_restrictions_relu.py"],
    "cfopt/query/restrictions/trees.py": ["tests/test_query_restrictions_trees.py"],
    "cfopt/query/restrictions/tree_walk.py": ["tests/test_query_tree_walk.py"],
    "cfopt/query/inner_radius.py": ["tests/test_query_inner_radius.py"],
    "cfopt/query/incumbents.py": ["tests/test_query_incumbents.py"],
    "cfopt/query/separable.py": ["tests/test_query_separable.py"],
    # the packages' __init__ files: public names and registrations only
    **{f"{package}/__init__.py": ["tests/test_package_imports.py"]
       for package in ("cfopt/query", "cfopt/query/restrictions", "cfopt/formulations",
                       "cfopt/formulations/predictors", "cfopt/solvers", "cfopt/constraints",
                       "cfopt/space", "cfopt/solvers/cpsat", "cfopt/methods",
                       "cfopt/methods/adversaries", "cfopt/models")},
    "cfopt/solvers/highs_start.py": ["tests/test_highs_start.py"],
    "cfopt/solvers/base.py": ["tests/test_solvers_base.py"],
    "cfopt/solvers/cpsat/levels.py": ["tests/test_solvers_cpsat_levels.py",
                                      "tests/test_solvers_cpsat_model.py"],
    "cfopt/solvers/cpsat/model.py": ["tests/test_solvers_cpsat_model.py"],
    "cfopt/solvers/cpsat/backend.py": ["tests/test_solvers_cpsat_model.py"],
    "cfopt/solvers/backends.py": ["tests/test_solvers_backends.py"],
    "cfopt/solvers/highs.py": [
        "tests/test_solvers_highs.py",
        *(f"tests/test_solvers.py::{name}" for name in (
            "test_a_cutoff_prunes_but_never_claims",
            "test_fixing_a_variable_changes_its_bounds_not_its_constraints",
            "test_removing_constraints_never_names_them",
            "test_adding_a_block_sends_its_columns_at_once_and_keeps_the_model",
            "test_removing_a_block_drops_its_columns_at_once_and_keeps_the_model",
            "test_ranges_are_the_optima_of_each_side_and_keep_the_models_objective",
            "test_an_infeasibility_is_confirmed_without_presolve"))],
    "cfopt/solvers/highs_persistent.py": [
        "tests/test_solvers_highs_persistent.py",
        *(f"tests/test_solvers.py::{name}" for name in (
            "test_fixing_a_variable_changes_its_bounds_not_its_constraints",
            "test_removing_constraints_never_names_them",
            "test_adding_a_block_sends_its_columns_at_once_and_keeps_the_model",
            "test_removing_a_block_drops_its_columns_at_once_and_keeps_the_model"))],
    "cfopt/solvers/contrib.py": ["tests/test_solvers_contrib.py", "tests/test_solvers_backends.py"],
    "cfopt/solvers/isolated.py": ["tests/test_solvers_isolated.py"],
    "cfopt/solvers/options.py": ["tests/test_solvers_options.py"],
    "cfopt/solvers/pool.py": ["tests/test_solvers_pool.py"],
    "cfopt/methods/cutting_set.py": ["tests/test_cutting_set.py"],
    "cfopt/methods/base.py": ["tests/test_methods_base.py"],
    "cfopt/methods/plausible_region.py": ["tests/test_methods_plausible_region.py"],
    "cfopt/methods/proplace.py": ["tests/test_methods_proplace.py"],
    "cfopt/methods/proplace_master.py": ["tests/test_methods_proplace_master.py",
                                         "tests/test_methods_proplace_master_solves.py"],
    "cfopt/methods/rnce.py": ["tests/test_methods_rnce.py"],
    "cfopt/methods/milp_r.py": ["tests/test_methods_milp_r.py"],
    "cfopt/methods/k_robust.py": ["tests/test_methods_k_robust.py"],
    "cfopt/methods/combined.py": ["tests/test_methods_combined.py"],
    "cfopt/methods/adversaries/k_neighbourhood.py": [
        "tests/test_methods_adversaries_k_neighbourhood.py"],
    "cfopt/methods/adversaries/model_shift.py": ["tests/test_methods_adversaries_model_shift.py"],
}

WORK = PROJECT / ".mutation"
STATUSES = ("killed", "timeout", "survived", "no tests", "suspicious", "segfault",
            "skipped", "caught by type check", "check was interrupted by user",
            "not checked")
DETECTED = ("killed", "timeout")
UNDETECTED = ("survived", "no tests", "suspicious", "segfault")
PRAGMA = re.compile(r"#\s*pragma:\s*no mutate\b(.*)$")


def dotted(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def modules() -> list[str]:
    """Every module of :data:`PACKAGES` (``__init__`` files included)."""
    return sorted(str(p.relative_to(PROJECT)) for pkg in PACKAGES
                  for p in (PROJECT / pkg).rglob("*.py"))


def mutmut_config(module: str) -> str:
    """The ``[tool.mutmut]`` table of one module: the project's, narrowed to it."""
    base = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["mutmut"]
    conf = {**base, "only_mutate": [module],
            "pytest_add_cli_args_test_selection": TESTS[module]}
    return "[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in conf.items())


def prepare(module: str, fresh: bool) -> Path:
    """``.mutation/<module>/``: links to the sources and tests, the narrowed config."""
    work = WORK / dotted(module)
    if fresh and work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("cfopt", "tests"):
        link = work / name
        if not link.exists():
            link.symlink_to(PROJECT / name)
    text = (PROJECT / "pyproject.toml").read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[)", "", text) + "\n" + mutmut_config(module)
    (work / "pyproject.toml").write_text(text)
    return work


def mutmut(work: Path, args: list[str], deadline: float) -> int | None:
    """``mutmut args`` in ``work``, stopped (SIGINT, then SIGKILL) at ``deadline``;
    ``None`` when stopped. mutmut saves each verdict as it comes, so nothing is lost."""
    exe = Path(sys.executable).parent / "mutmut"
    proc = subprocess.Popen([str(exe), *args], cwd=work, start_new_session=True)
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return None


def verdicts(module: str) -> dict[str, int | None] | None:
    meta = WORK / dotted(module) / "mutants" / (module + ".meta")
    if not meta.exists():
        return None
    return json.loads(meta.read_text())["exit_code_by_key"]


def status_of(code: int | None) -> str:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[code]


def function_texts(module: str) -> dict[str, list[str]]:
    """Per function of the module (mutmut's key: ``x_f`` or ``xǁClassǁmethod``), the
    sha256 of its source text and of its AST. mutmut keys its cache on the AST alone, so
    a ``# pragma: no mutate`` added or removed keeps the function's cached verdicts while
    renumbering its mutants: such a function's mutants must run again."""
    import ast
    import hashlib

    text = (PROJECT / module).read_text()
    lines = text.splitlines()
    out: dict[str, list[str]] = {}

    def sha(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()[:12]

    def visit(stmts: list[ast.stmt], cls: str = "") -> None:
        for node in stmts:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"x\u01c1{cls}\u01c1{node.name}" if cls else f"x_{node.name}"
                raw = "\n".join(lines[node.lineno - 1:node.end_lineno])
                out[key] = [sha(raw), sha(ast.dump(node, annotate_fields=False))]
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{cls}.{node.name}" if cls else node.name)

    visit(ast.parse(text).body)
    return out


def run(module: str, deadline: float, fresh: bool, retest: bool,
        rerun: list[str] = ()) -> None:
    if module not in TESTS:
        raise SystemExit(f"{module}: no test selection; add it to TESTS in {__file__}")
    work = prepare(module, fresh)
    print(f"== {module} in {work}", flush=True)
    before = verdicts(module) or {}
    cached = [k for k, v in before.items() if v is not None and status_of(v) == "survived"]
    texts = work / "function_texts.json"
    old = json.loads(texts.read_text()) if texts.exists() and before else {}
    now = function_texts(module)
    if mutmut(work, ["run", "--max-children", "1"], deadline) is None:
        print(f"{module}: stopped at the time limit (the cache keeps what was checked)")
        return
    # a function whose text changed but not its AST (a pragma): its verdicts are stale
    stale = [f"{dotted(module)}.{k}__mutmut_*" for k, (raw, tree) in now.items()
             if k in old and old[k][0] != raw and old[k][1] == tree]
    stale += [g for g in rerun if g.startswith(dotted(module) + ".")]
    if stale:
        print(f"{module}: re-running {stale} (pragmas changed, or --rerun)", flush=True)
        if mutmut(work, ["run", "--max-children", "1", *stale], deadline) is None:
            return
    texts.write_text(json.dumps(now))
    if retest and cached:  # verdicts that were cached before this run: tests may be new
        print(f"{module}: re-running {len(cached)} cached survivors", flush=True)
        mutmut(work, ["run", "--max-children", "1", *cached], deadline)


def diff(module: str, name: str) -> str:
    exe = Path(sys.executable).parent / "mutmut"
    out = subprocess.run([str(exe), "show", name], cwd=WORK / dotted(module),
                         capture_output=True, text=True, timeout=120).stdout
    return "\n".join(out.splitlines()[1:]).strip()  # without mutmut's "# name: status"


def equivalents(module: str) -> list[dict[str, Any]]:
    """The lines marked ``# pragma: no mutate (reason)`` in the module (a range for
    ``# pragma: no mutate start (reason)`` ... ``# pragma: no mutate end``)."""
    out: list[dict[str, Any]] = []
    start: tuple[int, str] | None = None
    for i, line in enumerate((PROJECT / module).read_text().splitlines(), 1):
        if (m := PRAGMA.search(line)) is None:
            continue
        word, _, rest = m.group(1).strip().partition(" ")
        if word == "start":
            start = (i, rest)
        elif word == "end" and start is not None:
            out.append({"lines": [start[0], i], "reason": start[1].strip(" ()") or None})
            start = None
        else:
            out.append({"lines": [i, i], "reason": m.group(1).strip(" ()") or None})
    return out


def summary(module: str) -> dict[str, Any]:
    found = verdicts(module)
    if found is None:
        return {"run": False, "tests": TESTS.get(module)}
    counts = dict.fromkeys(STATUSES, 0)
    for code in found.values():
        counts[status_of(code)] = counts.get(status_of(code), 0) + 1
    detected = sum(counts[s] for s in DETECTED)
    judged = detected + sum(counts[s] for s in UNDETECTED)
    survivors = sorted((k for k, v in found.items() if status_of(v) in UNDETECTED),
                       key=lambda k: (k.rsplit("_", 1)[0], int(k.rsplit("_", 1)[1])))
    return {"run": True, "tests": TESTS.get(module), "mutants": len(found),
            **{s.replace(" ", "_"): n for s, n in counts.items()},
            "score": round(detected / judged, 4) if judged else None,
            "complete": counts["not checked"] == 0,
            "equivalent_marked": equivalents(module),
            "surviving": [{"name": k, "status": status_of(found[k]), "diff": diff(module, k)}
                          for k in survivors]}


def _kept(out: str, report: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The entries of the last ``out`` for modules without a cache here (e.g. another
    machine's run), each with the date it was measured: a result is never dropped."""
    path = ROOT / "results" / out
    if not path.exists():
        return {}
    last = json.loads(path.read_text())
    kept = {}
    for module, entry in last.get("modules", {}).items():
        if module in report and not report[module]["run"]:
            entry.setdefault("measured", {"date": last["environment"]["date"],
                                          "note": "kept from an earlier run; no cache here"})
            kept[module] = entry
    return kept


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="paths such as cfopt/query/claims.py")
    parser.add_argument("--max-minutes", type=float, default=60.0,
                        help="time for all the modules' runs (then the report is written)")
    parser.add_argument("--fresh", action="store_true", help="drop the modules' caches first")
    parser.add_argument("--no-retest", dest="retest", action="store_false",
                        help="do not re-run the cached survivors")
    parser.add_argument("--rerun", action="append", default=[], metavar="GLOB",
                        help="mutants to run again whatever their cached verdict, e.g. "
                             "'cfopt.query.solution.x_candidates__mutmut_*' (repeatable)")
    parser.add_argument("--report-only", action="store_true", help="run nothing")
    parser.add_argument("--out", default="mutation.json")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + 60 * args.max_minutes
    os.environ.setdefault("CFOPT_PROGRESS", "0")
    if not args.report_only:
        for module in args.modules:
            if time.monotonic() < deadline:
                run(module, deadline, args.fresh, args.retest, args.rerun)
    report = {m: summary(m) for m in modules()}
    ran = {m: r for m, r in report.items() if r["run"]}
    ran.update(_kept(args.out, report))
    payload = {
        "environment": environment(),
        "tool": {"name": "mutmut", "version": _version("mutmut"),
                 "config": tomllib.loads((PROJECT / "pyproject.toml").read_text())
                 ["tool"]["mutmut"]},
        "score": "(killed + timeout) / (killed + timeout + survived + no_tests + "
                 "suspicious + segfault); not_checked mutants are in no count",
        "modules": ran,
        "not_run": [m for m, r in report.items() if not r["run"] and m not in ran],
    }
    path = write(args.out, payload)
    for m, r in ran.items():
        print(f"{m}: {r['killed']} killed, {r['survived']} survived, {r['timeout']} timeout,"
              f" {r['no_tests']} no tests, {r['not_checked']} not checked, score {r['score']}")
    print(f"-> {path}")
    return payload


def _version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
