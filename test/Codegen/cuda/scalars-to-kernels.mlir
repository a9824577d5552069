// RUN: bt-opt %s -split-input-file --bt-scalars-to-kernels | FileCheck %s

// A 0-d result computed on the host from a 0-d tensor (the global norm's
// sqrt of a sum of squares): one 0-d linalg.generic repeats the scalar ops;
// no tensor.extract or tensor.from_elements is left.
// CHECK-LABEL: func.func @from_elements
//  CHECK-SAME:   %[[SS:.*]]: tensor<f32>
//       CHECK:   %[[E:.*]] = tensor.empty() : tensor<f32>
//       CHECK:   %[[N:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = []} ins(%[[SS]] : tensor<f32>) outs(%[[E]] : tensor<f32>)
//       CHECK:   ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
//       CHECK:     %[[S:.*]] = math.sqrt %[[IN]] : f32
//       CHECK:     %[[T:.*]] = arith.addf %[[S]], %{{.*}} : f32
//       CHECK:     linalg.yield %[[T]] : f32
//       CHECK:   return %[[N]]
//   CHECK-NOT:   tensor.extract
//   CHECK-NOT:   tensor.from_elements
func.func @from_elements(%ss: tensor<f32>) -> tensor<f32> {
  %c = arith.constant 1.0e-06 : f32
  %x = tensor.extract %ss[] : tensor<f32>
  %s = math.sqrt %x : f32
  %t = arith.addf %s, %c : f32
  %r = tensor.from_elements %t : tensor<f32>
  return %r : tensor<f32>
}

// -----

// A device scalar captured by an elementwise payload (AdamW's clip
// coefficient, from two 0-d tensors and an f64 step): materialized once,
// read by both consumers as an extra input with the broadcast map.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[BC:.*]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @captured
//  CHECK-SAME:   %[[G:.*]]: tensor<4xf32>, %[[H:.*]]: tensor<4xf32>, %[[A:.*]]: tensor<f32>, %[[STEP:.*]]: tensor<i64>
//       CHECK:   %[[C:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[STEP]] : tensor<f32>, tensor<i64>)
//       CHECK:     arith.sitofp
//       CHECK:     math.powf
//       CHECK:     arith.truncf
//       CHECK:     arith.mulf
//       CHECK:   %[[R1:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[BC]], #[[ID]]], iterator_types = ["parallel"]} ins(%[[G]], %[[C]] : tensor<4xf32>, tensor<f32>)
//       CHECK:   ^bb0(%[[IN:.*]]: f32, %[[CL:.*]]: f32, %{{.*}}: f32):
//       CHECK:     arith.mulf %[[IN]], %[[CL]] : f32
//       CHECK:   %[[R2:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[BC]], #[[ID]]], iterator_types = ["parallel"]} ins(%[[H]], %[[C]] : tensor<4xf32>, tensor<f32>)
//       CHECK:   return %[[R1]], %[[R2]]
//   CHECK-NOT:   tensor.extract
func.func @captured(%g: tensor<4xf32>, %h: tensor<4xf32>, %a: tensor<f32>, %step: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %beta = arith.constant 0.9 : f64
  %x = tensor.extract %a[] : tensor<f32>
  %n = tensor.extract %step[] : tensor<i64>
  %t = arith.sitofp %n : i64 to f64
  %p = math.powf %beta, %t : f64
  %pf = arith.truncf %p : f64 to f32
  %clip = arith.mulf %x, %pf : f32
  %init = tensor.empty() : tensor<4xf32>
  %r1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%g : tensor<4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %clip : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %r2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%h : tensor<4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %clip : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %r1, %r2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A fill with a device scalar becomes a generic reading it; host scalars
// that depend on no device value (constants, dims) are left alone.
// CHECK-LABEL: func.func @fill
//       CHECK:   %[[C:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<f32>)
//       CHECK:     arith.negf
//       CHECK:   %[[F:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<f32>) outs(%{{.*}} : tensor<3xf32>)
//       CHECK:   linalg.fill ins(%cst : f32) outs(%{{.*}} : tensor<3xf32>)
//   CHECK-NOT:   tensor.extract
func.func @fill(%a: tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %cst = arith.constant 2.0 : f32
  %x = tensor.extract %a[] : tensor<f32>
  %y = arith.negf %x : f32
  %e = tensor.empty() : tensor<3xf32>
  %f = linalg.fill ins(%y : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %k = linalg.fill ins(%cst : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  return %f, %k : tensor<3xf32>, tensor<3xf32>
}

// -----

// Rank-0 arguments that only the host code reads (tensor.extract: the KV
// cache's fill length, the sampler handle) are passed by value
// (bt.host_scalar); one that a kernel reads (a linalg operand, after the
// rewrite above) is not, nor is an argument of a private function.
// CHECK-LABEL: func.func @host_scalars
//  CHECK-SAME:   %{{.*}}: tensor<i64> {bt.host_scalar}, %{{.*}}: tensor<i64> {bt.host_scalar}, %{{.*}}: tensor<f32>, %{{.*}}: tensor<?xf32>)
// CHECK-LABEL: func.func private @not_public
//  CHECK-SAME:   %{{.*}}: tensor<i64>) -> index
func.func @host_scalars(%len: tensor<i64>, %sampler: tensor<i64>, %a: tensor<f32>, %x: tensor<?xf32>) -> (tensor<?xf32>, i64, tensor<f32>) {
  %l = tensor.extract %len[] : tensor<i64>
  %n = arith.index_cast %l : i64 to index
  %s = tensor.extract_slice %x[0] [%n] [1] : tensor<?xf32> to tensor<?xf32>
  %h = tensor.extract %sampler[] : tensor<i64>
  %e = tensor.empty() : tensor<f32>
  %c = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%a : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.addf %in, %in : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %s, %h, %c : tensor<?xf32>, i64, tensor<f32>
}
func.func private @not_public(%len: tensor<i64>) -> index {
  %l = tensor.extract %len[] : tensor<i64>
  %n = arith.index_cast %l : i64 to index
  return %n : index
}
