// RUN: bt-opt %s -split-input-file -verify-diagnostics --bt-drop-inout-results | FileCheck %s

// bt-drop-inout-results removes the results that are in-out arguments updated
// in place, and fails where bufferization returned a copy instead.

// CHECK-LABEL: func.func @inplace(
// CHECK-SAME:    %{{.*}}: memref<4xf32> {bt.inout, bt.name = "kv_cache"}) -> (memref<4xf32> {bt.name = "out"})
// CHECK:         return %{{.*}} : memref<4xf32>
func.func @inplace(%x: memref<4xf32>, %c: memref<4xf32> {bt.inout, bt.name = "kv_cache"})
    -> (memref<4xf32> {bt.name = "out"}, memref<4xf32> {bt.inout_arg = "kv_cache"}) {
  return %x, %c : memref<4xf32>, memref<4xf32>
}

// -----

func.func @copied(%c: memref<4xf32> {bt.inout, bt.name = "kv_cache"})
    -> (memref<4xf32> {bt.inout_arg = "kv_cache"}) {
  %a = memref.alloc() : memref<4xf32>
  memref.copy %c, %a : memref<4xf32> to memref<4xf32>
  // expected-error @+1 {{'func.return' op returns a copy of in-out argument #0 as result #0: the buffer was not updated in place}}
  return %a : memref<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op result #0 is the in-out argument "kv_cache", but no argument has bt.inout and that bt.name}}
func.func @unknown(%c: memref<4xf32>) -> (memref<4xf32> {bt.inout_arg = "kv_cache"}) {
  return %c : memref<4xf32>
}
