// RUN: bt-opt %s --bt-mark-entry-points | FileCheck %s

// Public functions with a body: C interface and read-only tensor arguments.
// CHECK-LABEL: func.func @entry
//  CHECK-SAME:   (%{{.*}}: tensor<4xf32> {bt.param = "w", bufferization.writable = false}, %{{.*}}: tensor<?xi64> {bufferization.writable = false}, %{{.*}}: index)
//  CHECK-SAME:   attributes {bt.params = ["w"], llvm.emit_c_interface}
func.func @entry(%w: tensor<4xf32> {bt.param = "w"}, %ids: tensor<?xi64>, %n: index) -> tensor<4xf32> attributes {bt.params = ["w"]} {
  return %w : tensor<4xf32>
}

// Private functions and declarations are left alone.
// CHECK-LABEL: func.func private @helper
//  CHECK-SAME:   (%{{.*}}: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-LABEL: func.func private @decl
//   CHECK-NOT:   emit_c_interface
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @decl(tensor<4xf32>)
