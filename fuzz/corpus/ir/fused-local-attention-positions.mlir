
func.func @f(%qkv: tensor<2x6x5x192xf32>, %p: tensor<5xi64>) {
  // expected-error @+1 {{'bt.fused_local_attention' op scale must be > 0, got 0}}
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 32 rotary_dims 8 base 10000.0 scale 0.0 : tensor<2x6x5x192xf32>, tensor<5xi64> -> tensor<2x6x5x2x32xf32>
  return
}
