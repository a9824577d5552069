//===- spm_shim_blob.cc - the SentencePiece shim, embedded -----------------===//
//
// The bytes of the bt_spm_shim shared object (spm_shim.cc), embedded into
// btrt so that every binary (including a standalone executable) can load it
// from memory (tokenizer.cc). BT_SPM_SHIM_PATH is set by CMake.
//
//===----------------------------------------------------------------------===//

#ifndef BT_SPM_SHIM_PATH
#error "BT_SPM_SHIM_PATH must name the built shim"
#endif

__asm__(".pushsection .rodata.bt_spm_shim,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl bt_spm_shim_begin\n"
        ".hidden bt_spm_shim_begin\n"
        "bt_spm_shim_begin:\n"
        ".incbin \"" BT_SPM_SHIM_PATH "\"\n"
        ".globl bt_spm_shim_end\n"
        ".hidden bt_spm_shim_end\n"
        "bt_spm_shim_end:\n"
        ".popsection\n");
