"""Every disagreement the differential harness showed while it was built (issue 16), with
its fix; ``benchmarks/differential.py`` writes them as ``findings`` in
``benchmarks/results/differential.json``. Seeds are those of
``tests.differential.make_instance`` (``python -c "from tests.differential import
make_instance, run_instance; print(run_instance(make_instance(SEED,
later_cases=False)))"``: without the ``custom`` and ``narrowed`` cases, which came later);
"first run" is the harness on the code before issue 16 (commit a7d68d2, 500 instances:
``benchmarks/results/differential_before.json``).
"""

from __future__ import annotations

FINDINGS: list[dict[str, object]] = [
    {
        "class": "multiclass target sets: false infeasibility",
        "seen": "seeds 94 (LightGBM, target None), 5093 (logistic, target [0, 1]); "
                "tests/test_claims.py: 30 false InfeasibleErrors of 30 queries on a 3-class "
                "XGBoost and a torch net, an OPTIMAL 1.083 where 0.75 is reachable (MLP)",
        "cause": "the pairwise validity big-M mu + u_j - l_c is negative when class j can "
                 "never beat class c, so a switched-off constraint still cut",
        "fix": "M = mu + max(0, u_j - l_c) (cfopt/formulations/validity.py)",
    },
    {
        "class": "false OPTIMAL after verification retries (float32 trees)",
        "seen": "seeds 146 (extra trees: 0.333 claimed, 0.209 true), 205, 457, 1129, 1409 "
                "(XGBoost), 75 (random forest, every solver: 1.0 vs 1.5e-8); GMC XGBoost rows "
                "11487, 11683, 12997 (7x and 42x the optimum)",
        "cause": "the solver's point sat a tolerance on the wrong side of a split one float32 "
                 "ulp wide; the retry raised the margin (another problem) and its optimum "
                 "and bound were reported as OPTIMAL",
        "fix": "no gap: a cut binary per split point shared by the trees, and decoding moves "
               "the point into the box of the sides the solver chose (cfopt/query/solution.py); "
               "one verdict (cfopt/query/claims.py): OPTIMAL only within the gap of the first "
               "solve's bound, which is valid for the declared problem",
    },
    {
        "class": "decoding snapped optimal moves away",
        "seen": "seeds 11 (linear regression), 25, 1205 (linear SVM: a 2.1e-7 move snapped, "
                "OPTIMAL at 10x), 380 (sklearn MLP); an integer move of 1 on a range of 1e6 "
                "failed verification on every solver",
        "cause": "any move <= 1e-6 x max(1, range) was set back to the factual before "
                 "verification, then the retry raised the margin",
        "fix": "integral codes are only rounded; a continuous move is snapped only in a "
               "first candidate, the unsnapped point is tried if that one fails "
               "(cfopt/query/solution.py)",
    },
    {
        "class": "the split gap excluded values the model allows",
        "seen": "seeds 106, 1058 (HistGradientBoosting, immutable factual beside a split: "
                "false infeasibility on every solver), 92 (0.386 vs 0.314); 77 of the 99 "
                "first-run wrong optima (seeds 10, 22: LightGBM and HistGradientBoosting "
                "optima 1e-4 above the true ones)",
        "cause": "a band of 1e-4 x input width around each continuous split was excluded",
        "fix": "sides overlap by the input's rounding (a relaxation) and the factual within "
               "it keeps the library's side (cfopt/formulations/trees.py)",
    },
    {
        "class": "a bound above the optimum by half a float32 step",
        "seen": "seed 298 (decision tree, HiGHS, 1.04e-6 over)",
        "cause": "the gap's floor excluded the last float32 values going right",
        "fix": "no gap (as above)",
    },
    {
        "class": "badly scaled features misled the solvers",
        "seen": "seeds 1232 (logistic, Gurobi: 0.4815 vs 0.4537), 1025 (torch MLP), 1877 "
                "(linear SVM, Gurobi: 0.0996 vs 0.000109), 1890 (logistic, Gurobi: 1.1 vs "
                "1.0), 2279 (linear regression, Gurobi: 0.174 vs 0.120); HiGHS: 0.274 vs "
                "0.058 and 0.244 vs 0.012 (tests/test_claims_solvers.py), a 1.7 % gap "
                "reported as optimal under mip_gap 1e-4 (torch MLP)",
        "cause": "rows in raw units: a feature of range 1e-3 beside one of range 1e6 (an "
                 "absolute tolerance of 1e-6 was a 1e-3 objective error; Gurobi's presolve "
                 "mishandled a raw-unit column); the solver's optimality claim was taken "
                 "at its word",
        "fix": "continuous feature variables in units of their range, rows divided by the "
               "widths, linear models on normalized inputs (cfopt/formulations/features.py, "
               "distances.py, predictors.py); the gap is recomputed from the verified "
               "point (cfopt/query/claims.py)",
    },
    {
        "class": "grid value on a threshold in the library's arithmetic",
        "seen": "seeds 1198 (HistGradientBoosting, every solver, +1/997), 1464 (bound)",
        "cause": "an integer code whose library input is one ulp above a threshold was put "
                 "on theta's side by the MILP's arithmetic",
        "fix": "a grid value within rounding of a threshold takes the side of the "
               "library's own computation of it (library_input)",
    },
    {
        "class": "CBC statuses and bounds read wrongly",
        "seen": "seed 1215 (crash: No value for uninitialized VarData changed[cont0]); "
                "CBC stopped on time without an integer solution reported as "
                "VERIFICATION_FAILED; seed 404 and 2980 (bound above the optimum: Pyomo "
                "reports CBC's objective as its bound)",
        "cause": "values missing after an 'optimal' CBC run were not detected; the LP "
                 "relaxation's values were decoded; a parsed bound was trusted",
        "fix": "missing values give ERROR, no integer solution gives NO_SOLUTION, CBC's "
               "bound is its objective minus its gap (cfopt/solvers/backends.py)",
    },
    {
        "class": "CBC proved wrong optima",
        "seen": "a restricted tree query (0.0528 'optimal' where 0.0414 is feasible) by "
                "CBC's preprocessing; seeds 210, 1426, 1442, 2340 (e.g. 8.216e-5 'optimal' "
                "where 8.106e-5 is feasible) by CBC's objective increment; seeds 1025 "
                "(torch MLP, restricted query: 1.0 'optimal' where 0.374 is feasible) and "
                "813 (multiclass linear SVM) by CBC's cuts",
        "cause": "CBC 2.10.8's preprocessing fixed 12 binaries wrongly (cf. coin-or/Cbc#283, "
                 "#724); its default increment pruned nodes that could improve the incumbent "
                 "by less than its estimate; its cuts, with the objective cut-off row of a "
                 "restricted query, cut the optimum off (a primal tolerance of 1e-9 fixed "
                 "those two but made CBC prove a feasible tree query infeasible)",
        "fix": "CBC runs with preprocess off, increment 0, cuts off and integerTolerance 1e-8 "
               "by default (the last: seed 3657, a raw-unit network with big-M constants of "
               "4e5 proved infeasible at 1e-7)",
    },
    {
        "class": "a tolerance-sized move crossed a split for free",
        "seen": "seed 116 (decision tree, L0, factual 1.5e-8 of the input's width left of a "
                "split: the solvers took the other side at zero change, HiGHS then returned "
                "a point costing 1 as FEASIBLE with bound 0, CBC at a 1e-9 tolerance "
                "proved the query infeasible)",
        "cause": "a solver may put the factual's value a tolerance beyond the side of a "
                 "cut it chose, so crossing a split that close cost nothing in the MILP",
        "fix": "for every cut whose other side is within the solvers' reach (1e-4 x input "
               "width) of the factual, the library's side is known exactly: crossing counts "
               "as a change (L0, max_changes) or is forbidden (immutable, monotone)",
    },
    {
        "class": "CBC crashes",
        "seen": "seeds 332, 1169, 1191, 1285, 1493 (infeasible queries: CBC segfaults, "
                "exit code -11, writing the solution after 'Problem is infeasible - "
                "tightenPrimalBounds' with preprocessing off)",
        "cause": "a CBC 2.10.8 bug; the exception ended the query",
        "fix": "a crashed solver process is an ERROR status (no claim), not an exception",
    },
    {
        "class": "HiGHS's own settings proved wrong claims on raw-unit models",
        "seen": "seed 4791 (torch MLP on raw units, presolve off, MIP feasibility tolerance "
                "1e-6: OPTIMAL 0.39668 where 0.39658 is feasible), 2352 (logistic with an "
                "integer feature of range 1e6, presolve off, 1e-7: proven infeasible), 5259 "
                "(XGBoost, presolve on, 1e-6: OPTIMAL 2 where 1 is feasible)",
        "cause": "HiGHS numerics on models whose own scale is extreme (logits of 1e4, an "
                 "integer column of 1e6 that no solver rescales)",
        "fix": "HiGHS with presolve on and a MIP feasibility tolerance of 1e-7, the one "
               "combination with no wrong claim on the 6000 instances; with presolve on, "
               "none of the 250 Adult queries that once showed presolve's wrong optima",
    },
    {
        "class": "the objective cut-off row misled the solvers",
        "seen": "seeds 4791 (torch MLP, HiGHS: OPTIMAL 0.39668 where 0.39658 is feasible), "
                "1025 (CBC: 1.0 where 0.374 is)",
        "cause": "the per-query restriction added objective <= r (the heuristic's objective), "
                 "a row parallel to the objective; without it both solve correctly",
        "fix": "the restriction tightens bounds only and falls back to the full problem when "
               "its optimum lies beyond r (cfopt/explainer.py)",
    },
    {
        "class": "LightGBM reads values within 1e-35 of 0 as 0",
        "seen": "seed 4784 (a zero-bin split at -1e-35: -1.0000000180025095e-35 goes right "
                "in LightGBM, left in a plain comparison; the harness's reference missed "
                "the cheap move cfopt found)",
        "cause": "LightGBM maps |x| <= kZeroThreshold to 0 before comparing",
        "fix": "zero-bin thresholds moved to the band's edge (cfopt/models/boosters.py); the "
               "harness emulates the same reading (tests/differential_models.py)",
    },
    {
        "class": "decoding moved an immutable feature by an ulp",
        "seen": "seeds 526, 946, 1424, 2581 (immutable or decrease-only feature near a split: "
                "VERIFICATION_FAILED), 1398 (immutable 0.0108 decoded as 0.010800000000000002)",
        "cause": "mapping the factual's input back to a code, (z - b) / a, and x = lower + "
                 "width * x_unit, are off by an ulp",
        "fix": "an end of the region on the factual's own input is the factual's code, and a "
               "difference within float round-off of a code is no move (cfopt/query/solution.py)",
    },
    {
        "class": "a bound above a feasible point on a raw-unit network",
        "seen": "seed 7390 (sklearn MLP regressor, an input of range 9.4e4, pre-activations "
                "of magnitude 4e4: HiGHS and Gurobi OPTIMAL 0.1475314 with bounds 0.1475259 "
                "/ 0.1475307 where 0.1475176 is feasible; found by the run on seeds "
                "6000-7499)",
        "cause": "the solvers' LP bounds over columns of range 4e4 (an error of the dual "
                 "tolerance times the range) cut off the cheaper region, a slab 8.5e-6 of "
                 "the input's width; Gurobi's integrality tolerance 1e-5 then let a ReLU "
                 "through 1e-5 of its range, 0.4 in the output once the columns were scaled",
        "fix": "each hidden neuron is divided by max(1, min(|l|, |u|)) of its interval "
               "bounds (ReLU is positively homogeneous; the next layer multiplies it back; "
               "cfopt/formulations/predictors.py: neuron_scales); Gurobi runs at "
               "IntFeasTol 1e-7 like the other backends. Dividing by the larger side "
               "instead (the first fix) put the inactive side of a neuron in [-2, 12317] "
               "at -1.6e-4 and HiGHS proved 0.09997 where 0.09911 is feasible (seed 21184, "
               "sklearn MLP, run on seeds 20000-22999)",
    },
    {
        "class": "Gurobi's dual tolerance on a wide integer column",
        "seen": "seed 21235 (linear regression, an integer feature of range 1e5; Gurobi "
                "OPTIMAL 1.53799 where 1.53457 is feasible; also on the code before this "
                "session; run on seeds 20000-22999)",
        "cause": "an integer feature's code column keeps its range (integrality forbids "
                 "shrinking it), and Gurobi's optimality tolerance 1e-6 on its reduced cost "
                 "is an error of 0.1 on the objective",
        "fix": "Gurobi runs at OptimalityTol 1e-9, its least (cfopt/solvers/backends.py)",
    },
    {
        "class": "HiGHS presolve on a restricted network with a duplicated neuron bound",
        "seen": "seed 30294 (sklearn MLP regressor, an integer feature of range 1e6; the "
                "per-query restricted model, every neuron stable, made HiGHS prove the "
                "heuristic's own point 0.12780 optimal where 0.12168 is feasible; from the "
                "model file alone its presolve called it infeasible, right with presolve "
                "off or without any one of its aggregator / parallel-rows / linear-transform "
                "rules; run on seeds 30000-31999)",
        "cause": "each active neuron's output carried its pre-activation's lower bound as "
                 "its own variable bound (OMLT's max(0, l)), a duplicate of y >= zhat >= l "
                 "tight at the restriction's radius; HiGHS's presolve reductions over the "
                 "duplicate cut off the cheaper points",
        "fix": "a ReLU output's lower bound is 0, through the one neuron encoding "
               "(PredictorConstr.set_neuron_bounds), also at build "
               "(cfopt/formulations/predictors.py)",
    },
    {
        "class": "a solver's proof refuted by the query's own verified heuristic point",
        "seen": "seeds 41771 (XGBoost, a factual one float32 ulp above a split: HiGHS "
                "proved 2 optimal where the verified heuristic point costs 1) and 42656 "
                "(MLP regressor, integer features of range 1e6: CBC proved infeasible where "
                "the heuristic point is verified); both on the code before this session "
                "(run on seeds 40000-42999)",
        "cause": "solver numerics on a hard model, and the claim ignored a verified point "
                 "it already held: the solver's point (or its infeasibility proof) was "
                 "reported, with the bound clamped to it",
        "fix": "every verified point of the query is weighed: the cheapest is returned, "
               "and a verified point cheaper than the proven bound, or any against an "
               "infeasibility proof, refutes the proof: FEASIBLE without a bound "
               "(cfopt/query/claims.py claim, contradicted)",
    },
    {
        "class": "the referee measured the margin on a float32 network's own rounding",
        "seen": "seed 52181 (torch MLP on raw inputs of magnitude 1e6; a sampled witness "
                "0.0533 scored 0.0039 on the float32 logits but -0.00056 in exact "
                "arithmetic, below every solver's OPTIMAL ~0.0685; run on seeds "
                "50000-52999)",
        "cause": "float32 evaluation errs by 6e-2 x |w| on such inputs and depends on the "
                 "kernels' summation order; a rigorous worst-case bound (Higham's gamma_n, "
                 "propagated through |W|) is 700x the observed error on a German network "
                 "(0.004 vs 5.5e-6), so relaxing the MILP's margin by it turned every "
                 "float32 answer FEASIBLE",
        "fix": "the declared margin is on the model's scores in exact arithmetic of its "
               "parameters (what the MILP encodes; README 'What a status guarantees'); "
               "the prediction is still the real model's own; the harness scores the "
               "margin in float64 (tests/differential_models.py margin_scores)",
    },
    {
        "class": "HiGHS presolve on a model input of magnitude 1e7 in raw units",
        "seen": "seed 62407 (XGBoost, a feature in [1e7, 1.1e7], two splits 2e5 apart; "
                "HiGHS proves 0.4305031 where 0.4304821 is feasible: within the requested "
                "mip_gap 1e-4, but the reported bound is invalid by 2.1e-5; right with "
                "presolve off, CBC and Gurobi right; run on seeds 60000-62999, code 3b2b1a7)",
        "cause": "the feature variable was already in units of its range, but the "
                 "predictor's input variable was in raw units (bounds [1e7, 1.1e7]), tied to "
                 "it by 1e-6 z - t = 10 and cut by rows 1e-6 z + 0.5 s <= 11: HiGHS's "
                 "presolve misjudged these rows of large constants (the same model with the "
                 "input substituted by z = 1e7 + 1e6 t' is solved right)",
        "fix": "every predictor block's variables are the model inputs normalized to their "
               "box, t = (z - l) / w in [0, 1], with the raw inputs as expressions "
               "(PredictorConstr.unit_inputs / inputs; trees, networks, linear models), and "
               "integer features are steps above their lower bound (m.x_steps): no "
               "variable carries a raw magnitude (cfopt/formulations/predictors/base.py, "
               "cfopt/formulations/tree_cuts.py, cfopt/formulations/features.py)",
    },
    {
        "class": "HiGHS's restart proved a bound above the optimum (small MLP)",
        "seen": "seed 21184 (sklearn MLP, first-layer coefficients 1e4 on an input in "
                "[0, 1]) on the normalized predictor inputs (d493c7c): HiGHS proves "
                "0.099974 where 0.099106 is feasible; CBC and Gurobi right",
        "cause": "HiGHS's root LP bound is the optimum, 0.099106; after '75% inactive "
                 "integer columns, restarting' (a re-presolve with columns fixed by reduced "
                 "cost) its bound is 0.099974; right with restarts or presolve off, and no "
                 "single presolve rule off fixes it",
        "fix": "HiGHS runs with mip_allow_restart off (cfopt/solvers/highs.py)",
    },
    {
        "class": "HiGHS's presolve settled a split within its feasibility tolerance on "
                 "the wrong side (factual 8.3e-8 below a split)",
        "seen": "seed 75232 (LightGBM, 3 classes, target set, integer features, a "
                "factual 8.3e-8 below a split at 0.65, the float32 value below it): HiGHS "
                "proves 0.25 where 0.175 is feasible (CBC, Gurobi, CP-SAT and brute force "
                "agree on 0.175); the same on 4d5d2f8; run on seeds 70000-75999",
        "cause": "at HiGHS's MIP feasibility tolerance of 1e-7 the factual value of the "
                 "feature (8.3e-8 from the split in range units) meets both sides' cut rows "
                 "when the feature is kept; its presolve (sparsify, enumeration, probing) "
                 "fixed the split on the right-hand side and reduced the model to empty at "
                 "0.25, losing the optimum that keeps the feature on the left. Right at a "
                 "tolerance of 1e-8, or with presolve off. Turning presolve rules off was "
                 "tried first: sparsify off (f48a548) made the inner stage of a per-query "
                 "forest prove 0.778 where the optimum is 0.508 (tests/"
                 "test_default_forests.py::test_inner_stage_proves_only_true_bounds); "
                 "probing off (e7aeab7) made HiGHS prove seed 72074 infeasible",
        "fix": "HiGHS runs at a MIP feasibility tolerance of 1e-8 (cfopt/solvers/highs.py; "
               "right from 3e-8 down); its presolve rules stay its defaults. 1e-9, tried "
               "first (1bd93dc; clean on 9000 harness instances), made HiGHS prove the "
               "PROPLACE master of HELOC Table 1 queries 38 and 44 infeasible (Gurobi and "
               "HiGHS at 1e-7 or 1e-8 certify them)",
    },
    {
        "class": "CBC's LP presolve gave a wrong root bound (integer feature of range 9e5)",
        "seen": "seed 72074 (sklearn MLP, an integer feature in [-483382, 439160], "
                "near_boundary): CBC proves 0.035232 optimal where 0.016517 is feasible "
                "(Gurobi); the same on the code before the normalized inputs (4d5d2f8); run "
                "on seeds 70000-72999",
        "cause": "with CLP's presolve the root LP bound is 0.0352, without it 0 (the LP "
                 "relaxation's true value): the presolve misjudged the rows of coefficient "
                 "1e-6 on the integer column of range 9e5; right with presolve off, a "
                 "primal tolerance of 1e-9, or scaling off",
        "fix": "CBC runs with a primal tolerance of 1e-9 (cfopt/solvers/backends.py, "
               "_LEGACY_DEFAULTS). Presolve off, tried first (9241cc9), made CBC prove "
               "wrong optima on three linear models (seeds 75107, 75149, 75321: 0.0169 "
               "where 7.7e-5 is feasible); the primal tolerance and scaling off were both "
               "clean on 1500 more instances (seeds 73000-74499, CBC and Gurobi)",
    },
    {
        "class": "a per-query tree region with an empty tree crashed",
        "seen": "seeds 20044 (LightGBM), 21287 (GradientBoosting), per-query trees, every "
                "solver: InvalidConstraintError on one_leaf (run on seeds 20000-22999)",
        "cause": "the inside-out stage builds the leaves within half the incumbent's cost; "
                 "a tree with none of them gave the row 0 == 1, which Pyomo refuses",
        "fix": "such a tree's row is Constraint.Infeasible: the stage is infeasible, and "
               "its bound (half the cost) is valid (cfopt/formulations/tree_regions.py)",
    },
    {
        "class": "the ladder's first floor took the factual for no counterfactual at a tie",
        "seen": "seed 95721 (torch MLP, 4 classes, target set {1, 3}, near_boundary, L0; "
                "the harness's pseudo-solver highs-ladder, which climbs from one change's "
                "cost as the robust masters do): OPTIMAL 1 with bound 1 where the factual "
                "itself (cost 0) is in the target by the library in a batch (run on seeds "
                "93000-95999, code e7e350c)",
        "cause": "the factual's float32 logits of classes 0 and 3 tie (-6041.875): alone the "
                 "model predicts 0, in the harness's batch 3, and the float64 network puts "
                 "it in the target with score 0.051 above the margin 0.001; first_floor "
                 "asked the real model alone, so the ladder started at 1 and proved a bound "
                 "the declared problem does not have",
        "fix": "first_floor gives a floor only when the factual is no counterfactual for the "
               "real model and for the MILP's float64 network (target score below the "
               "margin beyond a band of 1e-6 (1 + |score|)); else the solve is the plain "
               "one (cfopt/query/ladder.py)",
    },
    {
        "class": "Gurobi's feasibility tolerance on a raw-unit network regressor",
        "seen": "seed 200408 (sklearn MLP regressor, an input of magnitude 5e5 and range "
                "4.7e4, target interval, L1): Gurobi OPTIMAL 0.0137922 with bound 0.0137922 "
                "where 0.0137890 meets the margin (HiGHS and CBC find it; run on seeds "
                "200000-202999, code 5ef4c26)",
        "cause": "Gurobi's default FeasibilityTol 1e-6 per row left the network's output "
                 "7e-5 off: its point overshot the margin by that much, and its bound cut off "
                 "the cheaper points at the margin",
        "fix": "Gurobi runs at FeasibilityTol 1e-8, HiGHS's MIP feasibility tolerance here "
               "(cfopt/solvers/backends.py); tests/test_differential.py LATER_FINDINGS",
    },
    {
        "class": "optimal objectives differ within the margin's tolerance (no false claim)",
        "seen": "German MLP through a Pipeline vs the bare model: 0.7626 vs 0.7749, both "
                "OPTIMAL (HiGHS)",
        "cause": "a solver's feasibility tolerance (1e-6) lets the validity margin give way: "
                 "the cheaper point has logit 0.000998; it is verified by the model, and "
                 "its bound is still a valid bound of the declared problem",
        "fix": "none needed; the harness compares answers only on points clear of the "
               "margin band, the equality tests run at a feasibility tolerance of 1e-9",
    },
]
