// Schedules that cannot run are errors before anything runs.
// RUN: echo "module {}" | not loom-opt --loom-build-schedule="ranks=2 microbatches=2 schedule-file=%S/Inputs/deadlocking-schedule.txt" 2>&1 | FileCheck %s --check-prefix=DEADLOCK
// RUN: echo "module {}" | not loom-opt --loom-build-schedule="schedule=interleaved ranks=4 virtual-stages=2 microbatches=6" 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: echo "module {}" | not loom-opt --loom-build-schedule="schedule=chimera" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: echo "module {}" | not loom-opt --loom-build-schedule="ranks=3 schedule-file=%S/Inputs/user-schedule.txt" 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: loom-opt --loom-print-schedule --split-input-file --verify-diagnostics %s

// DEADLOCK: error: loom-build-schedule: deadlock: rank 0 waits at RB0.0 (its action #3) for SB1.0 from rank 1, which waits at RF1.1 (its action #2) for SF0.1 from rank 0: the ranks wait on each other
// GROUPS: error: loom-build-schedule: 'interleaved' runs microbatches in groups of the 4 ranks, which do not divide 6 microbatches
// UNKNOWN: error: loom-build-schedule: unknown schedule 'chimera' (gpipe, 1f1b, interleaved, zb-h1)
// RANKS: error: loom-build-schedule: schedule file '{{.*}}user-schedule.txt' lists 2 ranks, not 3

// A hand-edited schedule is proved again: rank 0 runs stage 0's backward
// of microbatch 0 without receiving its gradient from rank 1.
// expected-error @+1 {{loom-print-schedule: B0.0 on rank 0 has no RB0.0}}
module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 B0.0", "RF1.0 F1.0 B1.0 SB1.0"], kind = "file", microbatches = 1 : i64, ranks = 2 : i64, stages = 2 : i64}} {
}

// -----

// expected-error @+1 {{loom-print-schedule: the module has no 'loom.pipeline_schedule' (run loom-build-schedule first)}}
module {
}

// -----

// expected-error @+1 {{'builtin.module' op 'loom.pipeline_schedule' must be a dictionary on a module with integer 'ranks', 'stages' and 'microbatches' and 'actions' (strings)}}
module attributes {loom.pipeline_schedule = {ranks = 2 : i64}} {
}
