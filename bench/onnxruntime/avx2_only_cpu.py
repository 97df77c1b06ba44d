# gdb extension: runs a program as if the CPU had nothing beyond AVX2 (no
# AVX-512, AVX-VNNI or AMX), for ONNX Runtime's shared library only, so that
# ORT takes the AVX2 path it takes on an AVX2-only CPU (Zen 2/3,
# pre-Ice-Lake Intel) while running here. The gdb exits with the program's
# status.
#
#   gdb -q -batch -x bench/onnxruntime/avx2_only_cpu.py --args node compare.mjs ...
#
# ORT_AVX2_ONLY_LIB (environment) names the library if it is not
# libonnxruntime.so*.
#
# ORT (MLAS, its CPUIDInfo and the libraries it bundles) decides its kernels
# once, from `cpuid` and `xgetbv`; it has no switch for it, and this VM has no
# CPUID faulting to mask the CPU for a whole process. So every `cpuid` and
# `xgetbv` instruction in the library (found by objdump) gets a breakpoint:
# at the instruction its inputs (leaf, subleaf) are recorded; just after it
# the feature bits past AVX2 are cleared from the outputs:
#   leaf 7.0:  EBX AVX512F/DQ/IFMA/PF/ER/CD/BW/VL, ECX VBMI/VBMI2/VNNI/BITALG/
#              VPOPCNTDQ, EDX 4VNNIW/4FMAPS/VP2INTERSECT/AMX-BF16/AVX512-FP16/
#              AMX-TILE/AMX-INT8
#   leaf 7.1:  EAX AVX-VNNI, AVX512_BF16; EDX AVX-VNNI-INT8
#   leaf 0xD.0 and XCR0: the opmask and ZMM state bits (5-7) and AMX's
#              tile state bits (17-18)
# Breakpoints are hit only while ORT initialises, so the timed code runs
# untouched. The program's children (the dmlserve and oneDNN benches) are
# not traced.
import os
import subprocess

import gdb

LIB = os.environ.get("ORT_AVX2_ONLY_LIB", "libonnxruntime.so")
STATE_BITS = 0xE0 | (1 << 17) | (1 << 18)  # XCR0 / leaf 0xD.0 EAX
LEAF7_EBX = (1 << 16) | (1 << 17) | (1 << 21) | (1 << 26) | (1 << 27) | (1 << 28) | (1 << 30) | (1 << 31)
LEAF7_ECX = (1 << 1) | (1 << 6) | (1 << 11) | (1 << 12) | (1 << 14)
LEAF7_EDX = (1 << 2) | (1 << 3) | (1 << 8) | (1 << 22) | (1 << 23) | (1 << 24) | (1 << 25)
LEAF7_1_EAX = (1 << 4) | (1 << 5)
LEAF7_1_EDX = 1 << 4


def instruction_offsets(path, mnemonic):
    """Offsets of `mnemonic` instructions in the file's code (objdump)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], check=True,
                         capture_output=True, text=True).stdout
    offsets = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == mnemonic and fields[0].endswith(":"):
            offsets.append(int(fields[0][:-1], 16))
    return offsets


def register(name):
    return int(gdb.parse_and_eval("$" + name)) & 0xFFFFFFFFFFFFFFFF


def clear(name, bits):
    gdb.execute("set $%s = %d" % (name, register(name) & ~bits))


inputs = {}  # thread -> (leaf, subleaf) of the cpuid it is executing
cleared = {"cpuid 7.0": 0, "cpuid 7.1": 0, "cpuid 0xd.0": 0, "xgetbv": 0}


class CpuidIn(gdb.Breakpoint):
    def stop(self):
        inputs[gdb.selected_thread().ptid] = (register("rax") & 0xFFFFFFFF,
                                              register("rcx") & 0xFFFFFFFF)
        return False


class CpuidOut(gdb.Breakpoint):
    def stop(self):
        leaf, subleaf = inputs.pop(gdb.selected_thread().ptid, (None, None))
        if leaf == 7 and subleaf == 0:
            clear("rbx", LEAF7_EBX)
            clear("rcx", LEAF7_ECX)
            clear("rdx", LEAF7_EDX)
            cleared["cpuid 7.0"] += 1
        elif leaf == 7 and subleaf == 1:
            clear("rax", LEAF7_1_EAX)
            clear("rdx", LEAF7_1_EDX)
            cleared["cpuid 7.1"] += 1
        elif leaf == 0xD and subleaf == 0:
            clear("rax", STATE_BITS)
            cleared["cpuid 0xd.0"] += 1
        return False


class XgetbvOut(gdb.Breakpoint):
    def stop(self):
        if register("rcx") & 0xFFFFFFFF == 0:  # XCR0
            clear("rax", STATE_BITS)
            cleared["xgetbv"] += 1
        return False


def arm():
    """Breakpoints on the library's cpuid and xgetbv, once it is mapped."""
    pid = gdb.selected_inferior().pid
    with open("/proc/%d/maps" % pid) as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or LIB not in fields[5] or int(fields[2], 16) != 0:
                continue
            base = int(fields[0].split("-")[0], 16)
            path = fields[5]
            for offset in instruction_offsets(path, "cpuid"):
                CpuidIn("*0x%x" % (base + offset), internal=True)
                CpuidOut("*0x%x" % (base + offset + 2), internal=True)  # 0f a2
            for offset in instruction_offsets(path, "xgetbv"):
                XgetbvOut("*0x%x" % (base + offset + 3), internal=True)  # 0f 01 d0
            gdb.write("avx2_only_cpu: %s\n" % path)
            return path
    return None


for command in ("set pagination off", "set confirm off", "set print thread-events off",
                "set print inferior-events off",
                "handle SIGPIPE SIGUSR1 SIGUSR2 SIGPROF SIGCHLD nostop noprint pass",
                "catch load " + os.path.basename(LIB)):
    gdb.execute(command, to_string=True)
armed = None
gdb.execute("run", to_string=True)
while gdb.selected_inferior().pid != 0:
    if armed is None:
        armed = arm()
    gdb.execute("continue", to_string=True)
if armed is None:
    gdb.write("avx2_only_cpu: %s was never loaded\n" % LIB)
else:
    gdb.write("avx2_only_cpu: feature bits cleared: %s\n" %
              ", ".join("%s x%d" % (k, v) for k, v in cleared.items()))
# The program's exit status (128 + the signal when a signal killed it), so
# that a caller's `set -e` sees a failure.
try:
    status = int(gdb.parse_and_eval("$_exitcode"))
except (gdb.error, ValueError):
    try:
        status = 128 + int(gdb.parse_and_eval("$_exitsignal"))
    except (gdb.error, ValueError):
        status = 1
gdb.execute("quit %d" % status)
