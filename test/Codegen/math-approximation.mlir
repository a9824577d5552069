// RUN: bt-opt %s -split-input-file --bt-math-approximation | FileCheck %s
// RUN: bt-opt %s -split-input-file \
// RUN:   --bt-math-approximation="exclude=grad,train_step" \
// RUN:   | FileCheck %s --check-prefix=EXCL

// f32 erf and tanh, scalar and vector, become polynomials of arith/math ops
// (no math.erf / math.tanh left) in every function; with `exclude`, the named
// functions keep theirs (the CPU pipeline's gradient entry points).

// CHECK-LABEL: func.func @decode_tokens
// CHECK-NOT: math.erf
// CHECK-NOT: math.tanh
// CHECK: return
// CHECK-LABEL: func.func @grad
// CHECK-NOT: math.erf
// CHECK: return
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: math.tanh
// CHECK: return

// EXCL-LABEL: func.func @decode_tokens
// EXCL-NOT: math.erf
// EXCL-NOT: math.tanh
// EXCL: return
// EXCL-LABEL: func.func @grad
// EXCL: math.erf %{{.*}} : f32
// EXCL-LABEL: func.func @train_step
// EXCL: math.tanh %{{.*}} : vector<8xf32>
func.func @decode_tokens(%x: f32, %v: vector<8xf32>) -> (f32, vector<8xf32>) {
  %e = math.erf %x : f32
  %t = math.tanh %v : vector<8xf32>
  return %e, %t : f32, vector<8xf32>
}
func.func @grad(%x: f32) -> f32 {
  %e = math.erf %x : f32
  return %e : f32
}
func.func @train_step(%v: vector<8xf32>) -> vector<8xf32> {
  %t = math.tanh %v : vector<8xf32>
  return %t : vector<8xf32>
}

// -----

// f64 is left alone (the approximations are f32 ones).

// CHECK-LABEL: func.func @wide
// CHECK: math.erf %{{.*}} : f64
// EXCL-LABEL: func.func @wide
// EXCL: math.erf %{{.*}} : f64
func.func @wide(%x: f64) -> f64 {
  %e = math.erf %x : f64
  return %e : f64
}
