#!/usr/bin/env python3
"""Fails if a source file of runtime/ or tools/ writes, renames or removes a
file other than through the one atomic writer (AtomicFileWriter /
WriteFileAtomically, runtime/base/file_util.h; issue 14, data loss).

    check_write_paths.py SOURCE_ROOT

Every C/C++ source under runtime/ and tools/ (tests excluded) is searched for
the system and library calls that create, replace or delete files. The only
occurrences allowed are those listed in ALLOWED below, each with the reason it
is not a user's output file; a new occurrence anywhere else fails the check,
naming file:line, so that a new write path either goes through the writer or
is added here with its reason, in review.
"""
import os
import re
import sys

# Calls that create, truncate, replace or delete a file or directory.
FORBIDDEN = re.compile(
    r"\bofstream\b|\bstd::fstream\b|\bfopen\s*\(|\bfreopen\s*\(|\bO_CREAT\b|\bO_TRUNC\b"
    r"|\bcreat\s*\(|[^_\w]rename(at2?)?\s*\(|\bunlink(at)?\s*\(|\bremove\s*\(|\bremove_all\s*\("
    r"|\brmdir\s*\(|\bmkstemp\w*\s*\(|\bmkdtemp\s*\(|\bcopy_file\s*\(|filesystem::copy\b"
    r"|\bsymlink\s*\(|\btruncate\s*\(|raw_fd_ostream|ToolOutputFile|openFileForWrite"
    r"|writeToOutput|\bfs::remove\b|\bfs::rename\b|\bfs::copy\b|\bmkdir\s*\(")

# (path relative to the source root, substring of the line, why it is allowed).
ALLOWED = [
    # The writer itself.
    ("runtime/base/file_util.cc", "", "AtomicFileWriter: the one writer"),
    # Temporary files and directories that are ours, never a user's path.
    ("runtime/base/shared_object.cc", "unlink(tmp_path", "its own temporary copy of a shared object"),
    ("runtime/tooling/bench.cc", "remove_all(path_", "ScratchDir: its own mkdtemp directory"),
    ("runtime/tooling/bench.cc", "remove_all(dir_", "TorchRunner: its own scratch directory"),
    ("runtime/tooling/bench.cc", "std::remove(file(\"model.safetensors\")", "TorchRunner: its own scratch copy of the weights"),
    ("runtime/tooling/bench.cc", "mkdtemp(", "ScratchDir: a new temporary directory"),
    # Checkpoint directories: assembled under a temporary name inside the run's
    # (or the checkpoint's parent) directory, files inside written by the
    # writer, then renamed into place (CheckTrainOutputDir and
    # Trainer::SaveCheckpoint refuse directories that are not a run's or a
    # checkpoint).
    ("runtime/train/trainer.cc", "mkdtemp(", "SaveCheckpoint: its temporary directory"),
    ("runtime/train/trainer.cc", "remove_all(tmp", "SaveCheckpoint: its temporary directory"),
    ("runtime/train/trainer.cc", "remove_all(old", "SaveCheckpoint: the checkpoint it replaced"),
    ("runtime/train/trainer.cc", "rename(", "SaveCheckpoint: directory swap"),
    ("runtime/train/trainer.cc", "renameat2(", "SaveCheckpoint: directory swap"),
    ("runtime/tooling/train_files.cc", "mkdir(cur", "MakeDirs: the output directory"),
    ("runtime/tooling/train_files.cc", "rmdir(path", "RemoveTree: the run's own temporaries and old checkpoints"),
    ("runtime/tooling/train_files.cc", "unlink(path", "RemoveTree: the run's own temporaries and old checkpoints"),
    ("runtime/tooling/train_files.cc", "unlink(script_path", "RenderGnuplot: its own script"),
    ("runtime/tooling/train_files.cc", "unlink(tmp", "RenderGnuplot: gnuplot's own output, copied by the writer"),
    ("runtime/tooling/train.cc", "unlink(link_tmp", "the `latest` link's temporary"),
    ("runtime/tooling/train.cc", "symlink(name", "the `latest` link's temporary"),
    ("runtime/tooling/train.cc", "rename(tmp", "a finished checkpoint directory into the run"),
    ("runtime/tooling/train.cc", "rename(link_tmp", "the `latest` link"),
    ("runtime/device/cuda_emu/profile.cc", "fopen(tmp", "BT_CUDA_EMU_PROFILE: the emulator's debug profile, written at exit to a temporary and renamed (the emulator depends on no runtime layer, so not on AtomicFileWriter)"),
    ("runtime/device/cuda_emu/profile.cc", "rename(tmp", "BT_CUDA_EMU_PROFILE: the temporary renamed over the profile"),
    ("runtime/model/init_from_vanilla.cc", "mkdir(dir", "CreateEmptyDir: a new or empty output directory"),
]

EXTS = (".c", ".cc", ".cpp", ".h")


def main():
    root = sys.argv[1]
    used = set()
    bad = []
    checked = 0
    for top in ("runtime", "tools"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            rel_dir = os.path.relpath(d, root)
            dirs[:] = [x for x in dirs if x not in ("test", "tests")]
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                rel = os.path.join(rel_dir, f)
                checked += 1
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        code = line.split("//")[0]
                        if not FORBIDDEN.search(code):
                            continue
                        ok = [i for i, (p, s, _) in enumerate(ALLOWED) if p == rel and s in code]
                        if ok:
                            used.update(ok)
                        else:
                            bad.append(f"{rel}:{n}: {line.strip()}")
    for b in bad:
        print(f"error: {b}: writes, renames or removes a file outside AtomicFileWriter "
              "(runtime/base/file_util.h); use WriteFileAtomically, or list it with its "
              "reason in test/Inputs/check_write_paths.py")
    stale = [ALLOWED[i] for i in range(len(ALLOWED)) if i not in used]
    for p, s, why in stale:
        print(f"error: {p}: the allowed occurrence '{s}' ({why}) is gone: remove it from the list")
    if bad or stale:
        return 1
    print(f"OK: {checked} files, every write through AtomicFileWriter or listed "
          f"({len(ALLOWED)} allowed occurrences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
