//===- spm_shim_blob.cc - the SentencePiece shim, embedded -----------------===//
//
// The bytes of the bt_spm_shim shared object (spm_shim.cc) and of the two
// SentencePiece libraries it was linked against (Debian's libsentencepiece.so.0
// and libsentencepiece_train.so.0, which carry their own protobuf-lite),
// embedded into btrt so that every binary (including a standalone executable)
// can load them from memory (tokenizer.cc) on a machine without those
// libraries or with another, ABI-incompatible build of them (the GPU box).
// BT_SPM_SHIM_PATH, BT_SPM_LIB_PATH and BT_SPM_TRAIN_LIB_PATH are set by CMake.
//
//===----------------------------------------------------------------------===//

#if !defined(BT_SPM_SHIM_PATH) || !defined(BT_SPM_LIB_PATH) || \
    !defined(BT_SPM_TRAIN_LIB_PATH)
#error "BT_SPM_SHIM_PATH, BT_SPM_LIB_PATH and BT_SPM_TRAIN_LIB_PATH must be set"
#endif

// One embedded file: symbols NAME_begin and NAME_end around its bytes.
#define BT_EMBED(NAME, PATH)                                                   \
  __asm__(".pushsection .rodata." #NAME ",\"a\",@progbits\n"                    \
          ".balign 64\n"                                                       \
          ".globl " #NAME "_begin\n"                                           \
          ".hidden " #NAME "_begin\n" #NAME "_begin:\n"                        \
          ".incbin \"" PATH "\"\n"                                             \
          ".globl " #NAME "_end\n"                                             \
          ".hidden " #NAME "_end\n" #NAME "_end:\n"                            \
          ".popsection\n")

BT_EMBED(bt_spm_shim, BT_SPM_SHIM_PATH);
BT_EMBED(bt_spm_lib, BT_SPM_LIB_PATH);
BT_EMBED(bt_spm_train_lib, BT_SPM_TRAIN_LIB_PATH);

