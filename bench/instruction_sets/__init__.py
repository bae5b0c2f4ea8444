"""Run numeric code on the instruction sets onnxruntime may pick, on one machine.

onnxruntime chooses its integer kernels from the CPU it finds: AMX, AVX-512 VNNI, AVX-VNNI,
AVX-512BW or AVX2 (the last two multiply byte pairs with the saturating ``vpmaddubsw``). The
tests run the same script natively, under ``qemu-x86_64 -cpu Haswell`` (an emulated AVX2-only
CPU: no AVX-512, no VNNI; Debian's ``qemu-user``) and, on a CPU with AMX, with AMX refused to the
process (``noamx.c``: a seccomp filter answering ``arch_prctl(ARCH_REQ_XCOMP_PERM)`` with EPERM,
so onnxruntime falls back to its AVX-512 VNNI kernels).
"""
