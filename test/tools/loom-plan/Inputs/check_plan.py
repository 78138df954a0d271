"""Checks loom-plan's JSON (docs/design/planner.md).

  brute-force EXHAUSTIVE.json PRUNED.json
      EXHAUSTIVE holds every layout, compiled (--exhaustive): its choice must
      be the fastest feasible one, every feasible layout must fit the
      device, every infeasible one must say why; PRUNED (the default
      search) must choose the same layout.
  memory PLAN.json REPORT.json
      The choice's predicted peak per compiled rank against loom-run
      --report-json's measured peaks of that layout: within 2%, and no
      other rank above them.
  holds SEARCH.json LOOM-PLAN ARGS...
      Every layout SEARCH skipped as holding at least what a compiled one
      that does not fit holds, compiled (LOOM-PLAN ARGS --evaluate it):
      it does not fit either.
  probed SEARCH.json LOOM-PLAN ARGS...
      Every layout SEARCH left uncompiled because its memory probe put it
      over the device's memory, compiled: it does not fit either, and
      needs within 20% of what its probe said.
  fewer-blocks WRITTEN.json FULL.json
      WRITTEN's choice is a pipeline written out from one rank of each kind
      compiled with fewer blocks per chunk, FULL's (--no-fold) compiled
      whole: the same layout and bytes, the step within 0.5%, every rank's
      peak within 8% (1% where compiled past the ranks' depth).
  choice PLAN.json KEY=VALUE...
      The choice has these keys.
  written WRITTEN.json FULL.json
      WRITTEN's choice is a pipeline whose programs were written out from a
      compile of a few microbatches (its peaks from a compile past the
      pipeline's depth), FULL's (--no-fold) compiled with every
      microbatch: the same layout and bytes sent and held, the step within
      0.5%, peaks per rank within 2.5%.
  folded FOLDED.json FULL.json [STEP_TOLERANCE]
  blocks FOLDED.json FULL.json
      FOLDED's choice was extrapolated from two smaller microbatch counts,
      FULL's (--no-fold) compiled with every microbatch: the same layout,
      step time, FLOP rate and bytes sent and held, and peaks per rank
      within 2.5% (the memory planner's first fit packs the microbatches
      in flight a little differently from one count to the next).
"""
import json
import re
import subprocess
import sys


def layout(entry):
    return ",".join(f"{k}={v}" for k, v in sorted(entry.items()))


def brute_force(exhaustive_path, pruned_path):
    every = json.load(open(exhaustive_path))
    pruned = json.load(open(pruned_path))
    candidates = [{"choice": every["choice"], "predicted": every["predicted"]}]
    candidates += every["alternatives"]
    feasible = [c for c in candidates if c["predicted"]["feasible"]]
    if not feasible:
        sys.exit("no feasible layout")
    best = min(feasible, key=lambda c: c["predicted"]["step_s"])
    if best["predicted"]["step_s"] != every["predicted"]["step_s"]:
        sys.exit(f"the choice {layout(every['choice'])} is not the fastest: "
                 f"{layout(best['choice'])}")
    for c in candidates:
        p = c["predicted"]
        if p["feasible"] and p["shortfall_bytes"] != 0:
            sys.exit(f"{layout(c['choice'])}: feasible with a shortfall")
        if not p["feasible"] and not p.get("reason"):
            sys.exit(f"{layout(c['choice'])}: infeasible without a reason")
    if pruned["choice"] != every["choice"]:
        sys.exit(f"the pruned search chose {layout(pruned['choice'])}, the "
                 f"exhaustive one {layout(every['choice'])}")
    if pruned["compiled"] >= every["compiled"]:
        sys.exit("the pruned search compiled as many layouts")
    print(f"{len(candidates)} layouts, {len(feasible)} feasible; the choice "
          f"is the fastest; the pruned search compiled {pruned['compiled']} "
          f"and chose it too")


def memory(plan_path, report_path):
    plan = json.load(open(plan_path))
    ranks = json.load(open(report_path))["ranks"]
    predicted = plan["predicted"]
    # The planner compiles the first rank of each pipeline stage; the others
    # run copies of its program on their own blocks.
    for rank, peak in zip(predicted["ranks"], predicted["peak_bytes"]):
        measured = ranks[rank]["measured_peak_bytes"]
        if abs(peak - measured) > 0.02 * measured:
            sys.exit(f"rank {rank}: predicted {peak} bytes, measured "
                     f"{measured}")
    others = {r["measured_peak_bytes"] for r in ranks}
    if max(others) > max(predicted["peak_bytes"]) * 1.02:
        sys.exit(f"a rank the planner did not compile peaks at {max(others)}")
    print(f"{len(predicted['ranks'])} of {len(ranks)} ranks compiled: "
          f"predicted peaks within 2% of the measured, and no other rank "
          f"higher")


def choice(plan_path, pairs):
    got = json.load(open(plan_path))["choice"]
    for pair in pairs:
        key, value = pair.split("=")
        if str(got[key]).lower() != value.lower():
            sys.exit(f"choice {key}={got[key]}, expected {value}")
    print("choice " + " ".join(pairs))


def compare_extrapolated(folded_path, full_path, key, step_tolerance,
                         bytes_tolerance, peak_tolerance):
    """The prediction in FOLDED_PATH, extrapolated (its `key` says from
    what), against FULL_PATH's of the same layout compiled whole: the step
    and FLOP rate within `step_tolerance`, the bytes sent and held within
    `bytes_tolerance`, each rank's peak within `peak_tolerance` (relative).
    Returns the folded plan and its prediction."""
    fold = json.load(open(folded_path))
    full = json.load(open(full_path))
    if fold["choice"] != full["choice"]:
        sys.exit(f"folded {layout(fold['choice'])}, full "
                 f"{layout(full['choice'])}")
    a, b = fold["predicted"], full["predicted"]
    if key not in a:
        sys.exit(f"the folded prediction has no {key}: not extrapolated")
    if key in b:
        sys.exit("the --no-fold prediction was extrapolated")
    for name in ("step_s", "tflops_per_device"):
        if abs(a[name] - b[name]) > step_tolerance * abs(b[name]):
            sys.exit(f"{name}: folded {a[name]}, full {b[name]}")
    for name in ("comm_bytes", "param_bytes", "grad_bytes",
                 "optimizer_bytes", "peak_bytes"):
        tolerance = peak_tolerance if name == "peak_bytes" else \
            bytes_tolerance
        if len(a[name]) != len(b[name]) or any(
                abs(x - y) > tolerance * y for x, y in zip(a[name], b[name])):
            sys.exit(f"{name}: folded {a[name]}, full {b[name]}")
    return fold, a


def folded(folded_path, full_path, step_tolerance="1e-9"):
    """Many microbatches from two smaller counts. STEP_TOLERANCE: the
    relative error allowed the step (1e-9: the same). Where data
    parallelism's collectives overlap the last microbatch's backward, the
    memory planner's reuse of their buffers (which makes the runtime wait)
    differs from one microbatch count to the next, and the step is affine
    in the count only within about 1%. Bytes are the same, peaks within
    3.5% (the memory planner's first fit packs the larger count's buffers a
    little differently from the whole count's: 1.98% at most until gradient
    sums were made in place, 3.4% since, on pp 4's third rank)."""
    tolerance = float(step_tolerance)
    fold, a = compare_extrapolated(folded_path, full_path,
                                   "extrapolated_from_microbatches",
                                   tolerance, 0, 0.035)
    m1, m2 = a["extrapolated_from_microbatches"]
    same = "the same step" if tolerance <= 1e-9 else \
        f"the step within {tolerance:.0%}"
    print(f"M={fold['choice']['microbatches']} from M={m1},{m2}: {same} "
          f"and bytes as compiled in full, peaks within 3.5%")


def written(written_path, full_path):
    """A pipeline's programs written out at its microbatch count from a
    compile of five (PipelineFold.h): its replay times the same
    instructions as the whole compile's but for the buffers they reuse, so
    the step is within 0.5%; the bytes are the same; the peaks come from a
    compile past the pipeline's depth, within 2.5%."""
    fold, a = compare_extrapolated(written_path, full_path,
                                   "written_out_from_microbatches", 5e-3, 0,
                                   0.025)
    if "peak_from_microbatches" not in a and \
            a["written_out_from_microbatches"] < \
            fold["choice"]["microbatches"] - 3:
        sys.exit("the written-out choice's peaks were not compiled again")
    print(f"M={fold['choice']['microbatches']} written out from "
          f"M={a['written_out_from_microbatches']}: the step within 0.5%, "
          f"the same bytes, peaks within 2.5% as compiled in full")


def blocks(folded_path, full_path):
    """A prediction from the model folded to one and two repeated blocks per
    pipeline chunk (and perhaps two microbatch counts) against the whole
    model compiled as is: the step, FLOP rate and bytes sent and held are
    affine in the blocks (to 1e-6), the peaks within 2%. Folded by
    microbatches as well, the step is within 2%: where data parallelism's
    traffic overlaps the compute, the wait is affine in the microbatches
    only within about 1% (folded() above)."""
    both = "extrapolated_from_microbatches" in \
        json.load(open(folded_path))["predicted"]
    _, a = compare_extrapolated(folded_path, full_path,
                                "extrapolated_from_blocks",
                                2e-2 if both else 1e-6, 1e-6, 0.02)
    k1, k2 = a["extrapolated_from_blocks"]
    print(f"from {k1} and {k2} blocks: the same step and bytes as the whole "
          f"model, peaks within 2%" + (" (and microbatches)" if both else ""))


def stages(written_path, full_path):
    """A pipeline written out from a compile of one pipeline rank of each
    kind (StageFold, PipelineFold.h) against the same layout compiled whole,
    every rank and microbatch: the step within 0.5%, the same bytes, the
    fullest rank's peak within 2.5% and every rank's within 6% (the
    written-out peaks: the device has room to spare, so they are not
    compiled again)."""
    fold, a = compare_extrapolated(written_path, full_path,
                                   "written_out_from_ranks", 5e-3, 0, 0.06)
    if "peak_from_microbatches" in a:
        sys.exit("the choice's peaks were compiled again")
    b = json.load(open(full_path))["predicted"]
    fullest = a["peak_bytes_per_rank"] / b["peak_bytes_per_rank"] - 1
    if abs(fullest) > 0.025:
        sys.exit(f"the fullest rank's peak: written out "
                 f"{a['peak_bytes_per_rank']}, full {b['peak_bytes_per_rank']}")
    worst = max(abs(x / y - 1) for x, y in zip(a["peak_bytes"],
                                                 b["peak_bytes"]))
    print(f"pp={fold['choice']['pp']} written out from "
          f"{a['written_out_from_ranks']} ranks: the step within 0.5%, the "
          f"same bytes, the fullest rank's peak within 2.5%, every rank's "
          f"within 6%")
    print(f"  (fullest {100 * fullest:+.1f}%, worst rank "
          f"{100 * worst:.1f}%)", file=sys.stderr)


def fewer_blocks(written_path, full_path):
    """WRITTEN's pipeline written out from one pipeline rank of each kind,
    compiled twice with fewer repeated blocks per chunk, a block apart
    (`extrapolated_from_blocks`, `written_out_from_ranks`), against FULL's,
    the same layout compiled whole (--no-fold): the step within 0.5%, the
    same bytes; every rank's peak within 8% where written out from five
    microbatches (a few microbatches' buffers pack tighter), within 1%
    where compiled past the ranks' depth (`peak_from_microbatches`: near
    the device's memory)."""
    fold, a = compare_extrapolated(written_path, full_path,
                                   "extrapolated_from_blocks", 5e-3, 0, 0.08)
    if "written_out_from_ranks" not in a:
        sys.exit("the pipeline was not written out from fewer ranks")
    b = json.load(open(full_path))["predicted"]
    deep = "peak_from_microbatches" in a
    errors = [x / y - 1 for x, y in zip(a["peak_bytes"], b["peak_bytes"])]
    worst = max(errors, key=abs)
    if deep and abs(worst) > 0.01:
        sys.exit(f"peaks compiled past the depth {a['peak_bytes']} against "
                 f"{b['peak_bytes']}")
    k1, k2 = a["extrapolated_from_blocks"]
    print(f"pp={fold['choice']['pp']} written out from "
          f"{a['written_out_from_ranks']} ranks of {k1} and {k2} blocks: the "
          f"step within 0.5%, the same bytes, every rank's peak within " +
          ("1% (compiled past the depth)" if deep else "8%"))
    print(f"  (worst rank {100 * worst:+.1f}%)", file=sys.stderr)


def layout_argument(c):
    """A JSON `choice` as loom-plan's --evaluate takes it."""
    return (f"dp={c['dp']},tp={c['tp']},pp={c['pp']},zero={c['zero']},"
            f"group={c['zero_shard_group']},"
            f"sp={int(c['sequence_parallel'])},"
            f"mbs={c['microbatch_size']},M={c['microbatches']},"
            f"schedule={c['schedule']},V={c['virtual_stages']},"
            f"recompute={c['recompute']}")


def holds(search_path, *command):
    """Every layout the search in SEARCH_PATH skipped as holding at least
    what a compiled layout that does not fit holds, compiled (COMMAND, a
    loom-plan run of the search's model and cluster, plus --evaluate of
    it): it does not fit either."""
    skipped = [p for p in json.load(open(search_path))["pruned"]
               if "holds at least" in p["reason"]]
    if not skipped:
        sys.exit("the search skipped no layout as holding at least another's")
    for entry in skipped:
        layout = layout_argument(entry["choice"])
        run = subprocess.run(list(command) + ["--evaluate", layout],
                             capture_output=True, text=True)
        if "no layout fits" not in run.stdout:
            sys.exit(f"{layout} was skipped, but fits:\n{run.stdout}")
    print(f"{len(skipped)} layouts skipped as holding at least what one "
          f"that does not fit holds: none fits")


def size_bytes(text, before):
    """The size (`N.N GiB`, `MiB` or `KiB`) that follows `before` in TEXT."""
    found = re.search(re.escape(before) + r" ([0-9.]+) (GiB|MiB|KiB)", text)
    if not found:
        return None
    unit = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}[found.group(2)]
    return float(found.group(1)) * unit


def probed(search_path, *command):
    """Every layout the search in SEARCH_PATH left uncompiled because its
    memory probe put it over the device's memory, compiled (COMMAND, a
    loom-plan run of the search's model and cluster, plus --evaluate of
    it): it does not fit either, and needs within 20% of what the probe
    said."""
    skipped = [p for p in json.load(open(search_path))["pruned"]
               if "its memory probe puts" in p["reason"]]
    if not skipped:
        sys.exit("the search's memory probes put no layout over memory")
    worst = 0.0
    for entry in skipped:
        layout = layout_argument(entry["choice"])
        run = subprocess.run(list(command) + ["--evaluate", layout],
                             capture_output=True, text=True)
        if "no layout fits" not in run.stdout:
            sys.exit(f"{layout} was probed over memory, but fits:\n"
                     f"{run.stdout}")
        probe = size_bytes(entry["reason"], "fullest rank at")
        needs = size_bytes(run.stdout, "needs")
        if probe is None or needs is None:
            sys.exit(f"no sizes in {entry['reason']!r} or {run.stdout!r}")
        error = probe / needs - 1
        worst = max(worst, abs(error))
        if abs(error) > 0.2:
            sys.exit(f"{layout}: probed at {probe:.0f} bytes, compiled at "
                     f"{needs:.0f}")
    print(f"{len(skipped)} layouts probed over memory: none fits, each "
          f"probe within 20% of its compile")
    print(f"  (worst {100 * worst:.1f}%)", file=sys.stderr)


def at_once(search_path, full_path):
    """The layout of FULL_PATH (an --evaluate --no-fold of it, compiled
    whole) as the search in SEARCH_PATH predicted it: an interleaved
    pipeline whose screen estimate came near the device's memory, its
    ranks compiled past their depth at once (`peak_from_microbatches`,
    no `written_out_peak_bytes`: no compile at five microbatches before).
    The step within 0.5% and the same bytes sent, every rank's peak
    within 1% of the whole compile's."""
    search = json.load(open(search_path))
    full = json.load(open(full_path))
    found = [x["predicted"] for x in search["alternatives"]
             if x["choice"] == full["choice"]]
    if "predicted" in search and search["choice"] == full["choice"]:
        found.append(search["predicted"])
    if not found:
        sys.exit(f"the search did not compile {layout(full['choice'])}")
    a, b = found[0], full["predicted"]
    if "peak_from_microbatches" not in a or "written_out_peak_bytes" in a:
        sys.exit("its ranks were not compiled past their depth at once")
    if abs(a["step_s"] / b["step_s"] - 1) > 5e-3:
        sys.exit(f"step: at once {a['step_s']}, full {b['step_s']}")
    if a["comm_bytes"] != b["comm_bytes"]:
        sys.exit(f"bytes sent: at once {a['comm_bytes']}, full "
                 f"{b['comm_bytes']}")
    errors = [x / y - 1 for x, y in zip(a["peak_bytes"], b["peak_bytes"])]
    if len(a["peak_bytes"]) != len(b["peak_bytes"]) or \
            max(map(abs, errors)) > 0.01:
        sys.exit(f"peaks: at once {a['peak_bytes']}, full {b['peak_bytes']}")
    print(f"pp={full['choice']['pp']} interleaved, compiled past the depth "
          f"at {a['peak_from_microbatches']} microbatches at once: the step "
          f"within 0.5%, the same bytes, every rank's peak within 1%")
    print(f"  (worst rank {100 * max(errors, key=abs):+.2f}%)",
          file=sys.stderr)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "brute-force":
        brute_force(*sys.argv[2:4])
    elif command == "folded":
        folded(*sys.argv[2:5])
    elif command == "written":
        written(*sys.argv[2:4])
    elif command == "holds":
        holds(*sys.argv[2:])
    elif command == "probed":
        probed(*sys.argv[2:])
    elif command == "at-once":
        at_once(*sys.argv[2:4])
    elif command == "fewer-blocks":
        fewer_blocks(*sys.argv[2:4])
    elif command == "stages":
        stages(*sys.argv[2:4])
    elif command == "blocks":
        blocks(*sys.argv[2:4])
    elif command == "memory":
        memory(*sys.argv[2:4])
    else:
        choice(sys.argv[2], sys.argv[3:])
