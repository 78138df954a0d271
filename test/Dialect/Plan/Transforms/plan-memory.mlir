// RUN: loom-opt --loom-plan-memory=print-summary --split-input-file --verify-diagnostics %s | FileCheck %s
// The search's windows (2, 8, 32... positions wide here) and chunks (of 2
// buffers) place the same.
// RUN: loom-opt "--loom-plan-memory=print-summary window-positions=2" --split-input-file --verify-diagnostics %s | FileCheck %s
// RUN: loom-opt "--loom-plan-memory=print-summary chunk-buffers=2" --split-input-file --verify-diagnostics %s | FileCheck %s

// %a dies at the second kernel, so %c reuses its bytes; %b, an output, lives
// to the end in the bytes of the input, dead after the first kernel. Buffers
// are 64-byte aligned (16 x f32 = 64 bytes, 20 x f32 = 80 -> 128).
// CHECK-LABEL: func.func @reuse() attributes {plan.arena_size = 192 : i64}
// CHECK:         plan.input "x" offset 128 : memref<16xf32>
// CHECK:         plan.alloc offset 0 : memref<20xf32>
// CHECK:         plan.alloc offset 128 : memref<16xf32>
// CHECK:         plan.alloc offset 0 : memref<20xf32>
// expected-remark @+1 {{arena 192 bytes for 4 buffers of 384 bytes in all}}
func.func @reuse() {
  %x = plan.input "x" : memref<16xf32>
  %a = plan.alloc : memref<20xf32>
  plan.kernel "k" ins(%x : memref<16xf32>) outs(%a : memref<20xf32>)
  %b = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%a : memref<20xf32>) outs(%b : memref<16xf32>)
  %c = plan.alloc : memref<20xf32>
  plan.kernel "k" ins(%b : memref<16xf32>) outs(%c : memref<20xf32>)
  plan.output "b", %b : memref<16xf32>
  plan.output "c", %c : memref<20xf32>
  return
}

// -----

// A view keeps the buffer behind it alive: %a is read through %v by the last
// kernel, so %b cannot take its bytes.
// CHECK-LABEL: func.func @views() attributes {plan.arena_size = 192 : i64}
// CHECK:         plan.alloc offset 0 : memref<4x4xf32>
// CHECK:         plan.alloc offset 64 : memref<16xf32>
// CHECK:         plan.alloc offset 128 : memref<16xf32>
// expected-remark @+1 {{arena 192 bytes for 3 buffers of 192 bytes in all}}
func.func @views() {
  %a = plan.alloc : memref<4x4xf32>
  %v = plan.view %a : memref<4x4xf32> to memref<16xf32>
  %b = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%v : memref<16xf32>) outs(%b : memref<16xf32>)
  %c = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%v, %b : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>)
  plan.output "c", %c : memref<16xf32>
  return
}

// -----

// What a send reads lives to the end of the step: the send may complete
// only after the receive that follows, so %r must not take %h's bytes (the
// input, an output too, keeps offset 0).
// CHECK-LABEL: func.func @send_lives_to_end
// CHECK:      %[[H:.*]] = plan.alloc offset 64 : memref<16xf32>
// CHECK:      plan.kernel "send" ins(%[[H]] : memref<16xf32>)
// CHECK:      %[[R:.*]] = plan.alloc offset 128 : memref<16xf32>
// CHECK-NEXT: plan.kernel "recv" outs(%[[R]] : memref<16xf32>)
// expected-remark @+1 {{arena 192 bytes for 3 buffers of 192 bytes in all}}
func.func @send_lives_to_end() {
  %x = plan.input "x" : memref<16xf32>
  %h = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%h : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  plan.kernel "send" ins(%h : memref<16xf32>) attrs {pairs = [array<i64: 0, 1>], tag = 0 : i64}
  %r = plan.alloc : memref<16xf32>
  plan.kernel "recv" outs(%r : memref<16xf32>) attrs {pairs = [array<i64: 1, 0>], tag = 0 : i64}
  plan.output "x", %x : memref<16xf32>
  plan.output "r", %r : memref<16xf32>
  return
}

// -----

// A send `released_by` a receive from its target (which the target sends
// only after it read the send's data) lives only until that receive's
// result is first read: %z, allocated after, takes %h's bytes. The
// attribute is dropped. (%y is written in place of %r, which its kernel
// reads last.)
// CHECK-LABEL: func.func @send_released_by_a_receive
// CHECK:      %[[H:.*]] = plan.alloc offset [[OFFSET:[0-9]+]] : memref<16xf32>
// CHECK:      plan.kernel "send" ins(%[[H]] : memref<16xf32>) attrs {pairs = [array<i64: 0, 1>], tag = 0 : i64}
// CHECK:      plan.alloc offset [[OFFSET]] : memref<16xf32>
// expected-remark @+1 {{arena 192 bytes for 5 buffers of 320 bytes in all}}
func.func @send_released_by_a_receive() {
  %x = plan.input "x" : memref<16xf32>
  %h = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%h : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  plan.kernel "send" ins(%h : memref<16xf32>) attrs {pairs = [array<i64: 0, 1>], released_by = 0 : i64, tag = 0 : i64}
  %r = plan.alloc : memref<4xf32>
  plan.kernel "recv" outs(%r : memref<4xf32>) attrs {pairs = [array<i64: 1, 0>], tag = 0 : i64}
  %y = plan.alloc : memref<4xf32>
  plan.kernel "elementwise" ins(%r : memref<4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %e = loom.exp %a : tensor<4xf32>
    loom.yield %e : tensor<4xf32>
  }
  %z = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%z : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  plan.output "y", %y : memref<4xf32>
  plan.output "z", %z : memref<16xf32>
  return
}

// -----

// A collective's buffers live until its result is first read or the next
// collective is posted: %g (the reduce-scatter's input, dead after it as a
// value) is not reused by %t, allocated right after, which would make the
// runtime wait for the communication at once (without the rule %t takes
// offset 64); %u, after the next collective, may reuse freed bytes.
// CHECK-LABEL: func.func @in_flight() attributes {plan.arena_size = 256 : i64}
// CHECK:         plan.alloc offset 64 : memref<16xf32>
// CHECK:         plan.alloc offset 128 : memref<8xf32>
// CHECK:         plan.alloc offset 192 : memref<16xf32>
// CHECK:         plan.alloc offset 0 : memref<16xf32>
// expected-remark @+1 {{arena 256 bytes for 5 buffers of 320 bytes in all}}
func.func @in_flight() {
  %x = plan.input "x" : memref<8xf32>
  %g = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%x : memref<8xf32>) outs(%g : memref<16xf32>)
  %s = plan.alloc : memref<8xf32>
  plan.kernel "reduce_scatter" ins(%g : memref<16xf32>) outs(%s : memref<8xf32>) attrs {groups = [array<i64: 0, 1>], op = "sum"}
  %t = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%x : memref<8xf32>) outs(%t : memref<16xf32>)
  plan.kernel "all_reduce" ins(%t : memref<16xf32>) outs(%t : memref<16xf32>) attrs {groups = [array<i64: 0, 1>], op = "sum"}
  %u = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%t : memref<16xf32>) outs(%u : memref<16xf32>)
  plan.output "s", %s : memref<8xf32>
  plan.output "u", %u : memref<16xf32>
  return
}

// -----

// An elementwise kernel writes its output in place of an input of the same
// type that it reads last: a sum over microbatches keeps one buffer. %s1
// takes %s0's bytes and %s2 those of %s1 (their chain ends at the output);
// %g1 and %g2 die at their sums but are the other operand, so they are
// not the one taken.
// CHECK-LABEL: func.func @in_place() attributes {plan.arena_size = 192 : i64}
// CHECK:         %[[S0:.*]] = plan.alloc offset [[SUM:[0-9]+]] : memref<16xf32>
// CHECK:         plan.alloc offset {{[0-9]+}} : memref<16xf32>
// CHECK:         %[[S1:.*]] = plan.alloc offset [[SUM]] : memref<16xf32>
// CHECK:         plan.alloc offset {{[0-9]+}} : memref<16xf32>
// CHECK:         %[[S2:.*]] = plan.alloc offset [[SUM]] : memref<16xf32>
// expected-remark @+1 {{arena 192 bytes for 6 buffers of 384 bytes in all}}
func.func @in_place() {
  %x = plan.input "x" : memref<16xf32>
  %s0 = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%s0 : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  %g1 = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%g1 : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.neg %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  %s1 = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%s0, %g1 : memref<16xf32>, memref<16xf32>) outs(%s1 : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %e = loom.add %a, %b : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  %g2 = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%x : memref<16xf32>) outs(%g2 : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.neg %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  %s2 = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%s1, %g2 : memref<16xf32>, memref<16xf32>) outs(%s2 : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf32>):
    %e = loom.add %a, %b : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  plan.output "s", %s2 : memref<16xf32>
  return
}

// -----

// Not in place: an input of another type (%h, f32 into bf16), an input the
// kernel also reads through a view (%t: read transposed, an element would
// be overwritten before it is read), an input read again later (%u), and a
// kernel that is not its output's first use (%w is written by "k" first).
// Each output gets bytes other than its input's.
// CHECK-LABEL: func.func @not_in_place() attributes {plan.arena_size = 384 : i64}
// CHECK:         plan.alloc offset 64 : memref<16xf32>
// CHECK:         plan.alloc offset 128 : memref<16xbf16>
// CHECK:         plan.alloc offset 64 : memref<4x4xf32>
// CHECK:         plan.alloc offset 192 : memref<4x4xf32>
// CHECK:         plan.alloc offset 64 : memref<16xf32>
// CHECK:         plan.alloc offset 256 : memref<16xf32>
// CHECK:         plan.alloc offset 320 : memref<16xf32>
// CHECK:         plan.alloc offset 64 : memref<16xf32>
// expected-remark @+1 {{arena 384 bytes for 9 buffers of 576 bytes in all}}
func.func @not_in_place() {
  %x = plan.input "x" : memref<16xf32>
  %h = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%x : memref<16xf32>) outs(%h : memref<16xf32>)
  %hb = plan.alloc : memref<16xbf16>
  plan.kernel "elementwise" ins(%h : memref<16xf32>) outs(%hb : memref<16xbf16>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.cast %a : tensor<16xf32> -> tensor<16xbf16>
    loom.yield %e : tensor<16xbf16>
  }
  %t = plan.alloc : memref<4x4xf32>
  plan.kernel "k" ins(%x : memref<16xf32>) outs(%t : memref<4x4xf32>)
  %tv = plan.view %t : memref<4x4xf32> to memref<4x4xf32>
  %tt = plan.alloc : memref<4x4xf32>
  plan.kernel "elementwise" ins(%t, %tv : memref<4x4xf32>, memref<4x4xf32>) outs(%tt : memref<4x4xf32>) {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>):
    %e = loom.add %a, %b : tensor<4x4xf32>
    loom.yield %e : tensor<4x4xf32>
  }
  %u = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%x : memref<16xf32>) outs(%u : memref<16xf32>)
  %v = plan.alloc : memref<16xf32>
  plan.kernel "elementwise" ins(%u : memref<16xf32>) outs(%v : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  %w = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%u : memref<16xf32>) outs(%w : memref<16xf32>)
  %w2 = plan.alloc : memref<16xf32>
  plan.kernel "k" ins(%x : memref<16xf32>) outs(%w2 : memref<16xf32>)
  plan.kernel "elementwise" ins(%w2 : memref<16xf32>) outs(%w : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>):
    %e = loom.exp %a : tensor<16xf32>
    loom.yield %e : tensor<16xf32>
  }
  plan.output "hb", %hb : memref<16xbf16>
  plan.output "tt", %tt : memref<4x4xf32>
  plan.output "v", %v : memref<16xf32>
  plan.output "w", %w : memref<16xf32>
  return
}
