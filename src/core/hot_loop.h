// NINFER_HOT_LOOP: function multi-versioning for hot loops written in plain C++ (the KV codecs,
// the Hadamard transform, the reference ops, the DeltaNet loops). On x86-64 with GCC the
// function is compiled twice, for x86-64-v3 (AVX2 + FMA) and for the baseline x86-64, and the
// dynamic loader picks one when the program starts (GNU ifunc). So one binary runs on any
// x86-64 CPU and an AVX2 CPU still runs AVX2 code. The rest of the build targets the baseline;
// the fast matmul/attention kernels pick their instruction set at run time (cpu_fast.h).
//
// Put it on functions that own a whole loop nest: a call from a cloned function to a function
// that is not inlined runs that function's own (baseline, unless it is cloned too) code.
// The codecs compile with fp-contract off (codecs/common.h), so both versions of an encoder
// produce the same bytes; elsewhere the v3 version may fuse a*b+c (~1 ulp differences).
// A build for x86-64-v3 everywhere (cmake -DNINFER_X86_V3=ON) or with clang (the fuzz build)
// compiles one version.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__)
#define NINFER_HOT_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NINFER_HOT_LOOP
#endif
