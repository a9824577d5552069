// RUN: bt-opt %s --bt-params-to-arguments --split-input-file --verify-diagnostics | FileCheck %s

// Parameters become leading arguments in module declaration order (z, a, m),
// restricted to what each function uses, also through calls; the order is
// recorded in bt.params and every bt.param is erased.

// CHECK-NOT: bt.param
// CHECK-LABEL: func.func @f
//  CHECK-SAME:   (%[[Z:.*]]: tensor<4xf32> {bt.param = "z"}, %[[M:.*]]: tensor<4xf32> {bt.param = "m"}, %[[X:.*]]: tensor<4xf32>)
//  CHECK-SAME:   attributes {bt.params = ["z", "m"]}
//       CHECK:   %[[S:.*]] = arith.subf %[[X]], %[[M]]
//       CHECK:   arith.mulf %[[S]], %[[Z]]
// CHECK-LABEL: func.func @g
//  CHECK-SAME:   (%[[A:.*]]: tensor<4xf32> {bt.param = "a"}, %[[M2:.*]]: tensor<4xf32> {bt.param = "m"}, %[[X2:.*]]: tensor<4xf32>)
//  CHECK-SAME:   attributes {bt.params = ["a", "m"]}
//       CHECK:   call @helper(%[[A]], %[[X2]])
//       CHECK:   arith.addf %{{.*}}, %[[M2]]
// CHECK-LABEL: func.func private @helper
//  CHECK-SAME:   (%{{.*}}: tensor<4xf32> {bt.param = "a"}, %{{.*}}: tensor<4xf32>)
//  CHECK-SAME:   attributes {bt.params = ["a"]}
// CHECK-LABEL: func.func @no_params
//  CHECK-SAME:   (%{{.*}}: tensor<4xf32>) -> tensor<4xf32> {
bt.param @"z" : tensor<4xf32>
bt.param @"a" : tensor<4xf32>
bt.param @"m" : tensor<4xf32>
bt.param @"unused" : tensor<4xf32>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %m = bt.param_ref @"m" : tensor<4xf32>
  %z = bt.param_ref @"z" : tensor<4xf32>
  %s = arith.subf %x, %m : tensor<4xf32>
  %r = arith.mulf %s, %z : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %m = bt.param_ref @"m" : tensor<4xf32>
  %s = arith.addf %r, %m : tensor<4xf32>
  return %s : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = bt.param_ref @"a" : tensor<4xf32>
  %r = arith.addf %x, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @no_params(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A model-level op still refers to a parameter by symbol.
// expected-note @below {{parameter declared here}}
bt.param @"lm" : tensor<16x8xf32>
func.func @model_level(%h: tensor<2x8xf32>) -> tensor<2x16xf32> {
  // expected-error @below {{uses parameter "lm" by symbol; only bt.param_ref can be turned into an argument (run bt-decompose first)}}
  %l = bt.lm_head %h weight @"lm" : tensor<2x8xf32> -> tensor<2x16xf32>
  return %l : tensor<2x16xf32>
}
