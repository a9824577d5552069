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
