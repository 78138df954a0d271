// The schedule generators' action tables for small pipelines, pinned, and
// what a replay with equal stage costs predicts (F = B = W = 1; B includes
// W unless the schedule splits them). The bubble is the share of the step
// a rank does not compute: (P - 1) / (M + P - 1) for GPipe and 1F1B,
// (P - 1) / (V M + P - 1) for the interleaved schedule (with every chunk
// costing 1), and ZB-H1's step is 3M + (P - 1)(F + B - W).
// RUN: loom-opt --loom-build-schedule="schedule=gpipe ranks=2 microbatches=3" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=GPIPE
// RUN: loom-opt --loom-build-schedule="ranks=3 microbatches=4" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=ONEFONEB
// RUN: loom-opt --loom-build-schedule="ranks=4 microbatches=2" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=FEWER
// RUN: loom-opt --loom-build-schedule="schedule=interleaved ranks=2 virtual-stages=2 microbatches=4" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=INTERLEAVED
// RUN: loom-opt --loom-build-schedule="schedule=zb-h1 ranks=3 microbatches=3" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=ZBH1
// RUN: loom-opt --loom-build-schedule="ranks=2 microbatches=2 schedule-file=%S/Inputs/user-schedule.txt" --loom-print-schedule %s -o /dev/null | FileCheck %s --check-prefix=FILE
// RUN: loom-opt --loom-build-schedule="ranks=2 microbatches=2" %s | FileCheck %s --check-prefix=ATTR

// GPIPE:      schedule gpipe: 2 ranks, 2 stages, 3 microbatches
// GPIPE-NEXT: rank 0: F0.0 SF0.0 F0.1 SF0.1 F0.2 SF0.2 RB0.0 B0.0 RB0.1 B0.1 RB0.2 B0.2
// GPIPE-NEXT: rank 1: RF1.0 F1.0 RF1.1 F1.1 RF1.2 F1.2 B1.0 SB1.0 B1.1 SB1.1 B1.2 SB1.2
// GPIPE-NEXT: simulated (F 1, B 1, W 1 per stage): step 12, bubble 25.0% (rank 0 25.0%, rank 1 25.0%)
// GPIPE-NEXT: stage 0: at most 3 microbatches in flight
// GPIPE-NEXT: stage 1: at most 3 microbatches in flight

// ONEFONEB:      schedule 1f1b: 3 ranks, 3 stages, 4 microbatches
// ONEFONEB-NEXT: rank 0: F0.0 SF0.0 F0.1 SF0.1 F0.2 SF0.2 RB0.0 B0.0 F0.3 SF0.3 RB0.1 B0.1 RB0.2 B0.2 RB0.3 B0.3
// ONEFONEB-NEXT: rank 1: RF1.0 F1.0 SF1.0 RF1.1 F1.1 SF1.1 RB1.0 B1.0 SB1.0 RF1.2 F1.2 SF1.2 RB1.1 B1.1 SB1.1 RF1.3 F1.3 SF1.3 RB1.2 B1.2 SB1.2 RB1.3 B1.3 SB1.3
// ONEFONEB-NEXT: rank 2: RF2.0 F2.0 B2.0 SB2.0 RF2.1 F2.1 B2.1 SB2.1 RF2.2 F2.2 B2.2 SB2.2 RF2.3 F2.3 B2.3 SB2.3
// ONEFONEB-NEXT: simulated (F 1, B 1, W 1 per stage): step 18, bubble 33.3% (rank 0 33.3%, rank 1 33.3%, rank 2 33.3%)
// ONEFONEB-NEXT: stage 0: at most 3 microbatches in flight
// ONEFONEB-NEXT: stage 1: at most 2 microbatches in flight
// ONEFONEB-NEXT: stage 2: at most 1 microbatch in flight

// Fewer microbatches than stages: still proved; stage s holds min(P - s, M).
// FEWER:      schedule 1f1b: 4 ranks, 4 stages, 2 microbatches
// FEWER:      simulated (F 1, B 1, W 1 per stage): step 15, bubble 60.0%
// FEWER-NEXT: stage 0: at most 2 microbatches in flight
// FEWER-NEXT: stage 1: at most 2 microbatches in flight
// FEWER-NEXT: stage 2: at most 2 microbatches in flight
// FEWER-NEXT: stage 3: at most 1 microbatch in flight

// INTERLEAVED:      schedule interleaved: 2 ranks, 4 stages, 4 microbatches
// INTERLEAVED-NEXT: rank 0: F0.0 SF0.0 F0.1 SF0.1 RF2.0 F2.0 SF2.0 RF2.1 F2.1 SF2.1 F0.2 SF0.2 RB2.0 B2.0 SB2.0 F0.3 SF0.3 RB2.1 B2.1 SB2.1 RF2.2 F2.2 SF2.2 RB0.0 B0.0 RF2.3 F2.3 SF2.3 RB0.1 B0.1 RB2.2 B2.2 SB2.2 RB2.3 B2.3 SB2.3 RB0.2 B0.2 RB0.3 B0.3
// INTERLEAVED-NEXT: rank 1: RF1.0 F1.0 SF1.0 RF1.1 F1.1 SF1.1 RF3.0 F3.0 B3.0 SB3.0 RF3.1 F3.1 B3.1 SB3.1 RF1.2 F1.2 SF1.2 RB1.0 B1.0 SB1.0 RF1.3 F1.3 SF1.3 RB1.1 B1.1 SB1.1 RF3.2 F3.2 B3.2 SB3.2 RF3.3 F3.3 B3.3 SB3.3 RB1.2 B1.2 SB1.2 RB1.3 B1.3 SB1.3
// INTERLEAVED-NEXT: simulated (F 1, B 1, W 1 per stage): step 27, bubble 11.1% (rank 0 11.1%, rank 1 11.1%)

// ZBH1:      schedule zb-h1: 3 ranks, 3 stages, 3 microbatches
// ZBH1-NEXT: rank 0: F0.0 SF0.0 F0.1 SF0.1 F0.2 SF0.2 RB0.0 B0.0 W0.0 RB0.1 B0.1 W0.1 RB0.2 B0.2 W0.2
// ZBH1-NEXT: rank 1: RF1.0 F1.0 SF1.0 RF1.1 F1.1 SF1.1 RB1.0 B1.0 SB1.0 RF1.2 F1.2 SF1.2 RB1.1 B1.1 SB1.1 W1.0 RB1.2 B1.2 SB1.2 W1.1 W1.2
// ZBH1-NEXT: rank 2: RF2.0 F2.0 B2.0 SB2.0 RF2.1 F2.1 B2.1 SB2.1 RF2.2 F2.2 B2.2 SB2.2 W2.0 W2.1 W2.2
// ZBH1-NEXT: simulated (F 1, B 1, W 1 per stage): step 11, bubble 18.2% (rank 0 18.2%, rank 1 18.2%, rank 2 18.2%)

// FILE:      schedule file: 2 ranks, 2 stages, 2 microbatches
// FILE-NEXT: rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1
// FILE-NEXT: rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1

// ATTR: module attributes {loom.pipeline_schedule = {actions = ["F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1", "RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1"], kind = "1f1b", microbatches = 2 : i64, ranks = 2 : i64, stages = 2 : i64}}
module {
}
