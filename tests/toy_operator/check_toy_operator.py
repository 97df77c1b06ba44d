"""Adds a toy operator the way docs/architecture.md says, and checks that it works.

"Adding an operator" in docs/architecture.md lists every place a new operator touches, and
claims that the compiler finds the code sites. toy_operator.patch follows those steps for
`toy_negate` (output = -input, FLOAT32): a proto message, an OperatorKind and operation struct,
the decoder, a KServe model, the compatibility key, a CPU kernel, a D3D12 device that says it
does not support it (Device::Supports), so that the CPU fallback runs it there, and the test
reference. This check:

 1. the docs: every file the patch changes is named in that section, and every code file the
    section names is changed by the patch (or is listed in OPTIONAL, steps the toy needs not);
 2. the patched tree builds (`dmlserve`, the Python stubs, the test reference) in a copy under
    WORK_DIR;
 3. the compiler enforces it: each C++ file that the section says the compiler finds fails to
    compile (-fsyntax-only) when it is left as it was, against the patched headers;
 4. a real server from that build answers toy_negate over the native API and KServe v2, lists it
    in GetServerInfo, and counts it in /metrics; with --d3d12 (D3D12 built too), a second
    server on the D3D12 backend (lavapipe in CI) runs the toy on its CPU fallback while a scan
    still runs on D3D12.

The copy is kept in step file by file (a file is rewritten only when its content changed), so
a rerun rebuilds only what changed. When the code moves on, regenerate the patch: apply it
(`git apply --3way tests/toy_operator/toy_operator.patch`), fix what the compiler says, and
`git diff > tests/toy_operator/toy_operator.patch` without the patch file itself.

Usage: check_toy_operator.py SOURCE_ROOT WORK_DIR [--d3d12]
"""

import argparse
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
PATCH = HERE / "toy_operator.patch"
SECTION = "### Adding an operator"
# Files the section names that the toy needs not change: the response encoder (its output is a
# single tensor), conformance cases (the check below computes -x itself), and the std::visit
# helper.
OPTIONAL = {"server/response_encoder.cc", "tests/conformance/", "kernels/core/overloaded.h"}
# Changed by the patch but not compiler-enforced: new declarations, and the D3D12 device's
# optional Supports override.
NOT_ENFORCED = {"kernels/core/operation.h", "kernels/d3d12/d3d12_device.h",
                "proto/dmlserve/v1/dmlserve.proto"}


def fail(message):
    print(f"check_toy_operator: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, cwd=None, env=None):
    result = subprocess.run(command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    return result.returncode, result.stdout


def patched_files(patch_text):
    return sorted(set(re.findall(r"^\+\+\+ b/(\S+)", patch_text, re.M)))


def section_paths(root):
    text = (root / "docs/architecture.md").read_text(encoding="utf-8")
    start = text.find(SECTION)
    if start < 0:
        fail(f"docs/architecture.md has no '{SECTION}' section")
    end = text.find("\n#", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    return set(re.findall(r"`((?:proto|server|scheduler|kernels|tests)/[^`\s]+)`", section))


def check_docs(root, files):
    named = section_paths(root)
    problems = []
    for path in files:
        if path not in named and not any(path.startswith(d) for d in named if d.endswith("/")):
            problems.append(f"{path} is changed to add an operator but not named in "
                            f"docs/architecture.md '{SECTION}'")
    for path in sorted(named):
        if path in OPTIONAL or path.endswith("/"):
            continue
        if not (root / path).is_file():
            problems.append(f"docs/architecture.md '{SECTION}' names {path}, which does not exist")
        elif path not in files:
            problems.append(f"docs/architecture.md '{SECTION}' names {path}, which the toy "
                            f"operator did not need: drop it, or list it in OPTIONAL")
    if problems:
        fail("\n".join(problems))
    print(f"docs: the {len(files)} files the patch changes are the ones the section names")


def tracked_files(root):
    code, out = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root)
    if code != 0:
        fail(f"git ls-files failed in {root}:\n{out}")
    return [f for f in out.split("\0") if f and (root / f).is_file()]


def write_if_changed(path, data, mode):
    """Writes `data` (and the permission bits `mode`) to `path` unless it holds them already."""
    if path.exists() and path.read_bytes() == data:
        if path.stat().st_mode & 0o777 != mode & 0o777:
            path.chmod(mode & 0o777)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode & 0o777)
    return True


def sync_patched_copy(root, src, files, patch_text):
    """Makes `src` the source tree with the patch applied, touching only what changed."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        for rel in files:
            if (root / rel).is_file():
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, scratch / rel)
        code, out = run(["git", "apply", "--whitespace=nowarn", str(PATCH)], cwd=scratch)
        if code != 0:
            fail("toy_operator.patch no longer applies (regenerate it, see this script's "
                 f"header):\n{out}")
        patched = {rel: (scratch / rel).read_bytes() for rel in files}
    changed = 0
    wanted = set()
    for rel in tracked_files(root):
        if rel.startswith("build"):
            continue
        wanted.add(rel)
        data = patched.get(rel, (root / rel).read_bytes())
        changed += write_if_changed(src / rel, data, (root / rel).stat().st_mode)
    for rel, data in patched.items():
        if rel not in wanted:  # a file the patch adds
            wanted.add(rel)
            changed += write_if_changed(src / rel, data, 0o644)
    for path in list(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and not rel.startswith("build/") and rel not in wanted:
            path.unlink()
            changed += 1
    print(f"copy: {changed} files written under {src}")


def build(src, d3d12):
    env = dict(os.environ,
               DMLSERVE_BUILD_TARGETS="dmlserve dmlserve_proto_python dmlserve_test_reference",
               DMLSERVE_BUILD_DIR="build")
    options = ["-DDMLSERVE_TEST_WINE=OFF", "-DDMLSERVE_BUILD_BENCH=OFF",
               f"-DDMLSERVE_WITH_D3D12={'ON' if d3d12 else 'OFF'}"]
    code, out = run([str(src / "scripts/build.sh"), *options], cwd=src, env=env)
    if code != 0:
        fail(f"the patched tree does not build:\n{out[-6000:]}")
    print("build: the patched tree builds dmlserve, the Python stubs and the test reference")


def syntax_check(entry, rel, content):
    """Compiles `content` as file `rel` would be (its compile_commands.json entry), syntax only,
    from a temporary file. Returns (exit code, compiler output)."""
    with tempfile.NamedTemporaryFile("wb", suffix=".cc") as source:
        source.write(content)
        source.flush()
        command = shlex.split(entry["command"])
        if "-o" in command:
            at = command.index("-o")
            del command[at:at + 2]
        command = [w for w in command if w != "-c" and w != entry["file"] and not w.endswith(rel)]
        return run(command + ["-fsyntax-only", source.name], cwd=entry["directory"])


def check_compiler_finds(root, src, files):
    """Each compiler-enforced file compiles patched and fails unpatched (the control shows the
    command itself is sound, so the failure is the missing case)."""
    commands = {pathlib.Path(entry["file"]).resolve(): entry
                for entry in json.loads((src / "build/compile_commands.json").read_text())}
    checked = 0
    for rel in files:
        if rel in NOT_ENFORCED or not rel.endswith(".cc"):
            continue
        entry = commands.get((src / rel).resolve())
        if entry is None:
            continue  # not part of this configuration (D3D12 off)
        code, out = syntax_check(entry, rel, (src / rel).read_bytes())
        if code != 0:
            fail(f"the patched {rel} does not compile on its own:\n{out[-3000:]}")
        code, out = syntax_check(entry, rel, (root / rel).read_bytes())
        if code == 0:
            fail(f"{rel} compiles unchanged with a new operator: the compiler does not find "
                 f"this site, so the section must say so (and the site should be a std::visit "
                 f"or a switch without default)")
        if "toy" not in out.lower() and "ToyNegate" not in out:
            fail(f"{rel} fails to compile unchanged, but not over the new operator:\n"
                 f"{out[-3000:]}")
        checked += 1
    if checked == 0:
        fail("no compiler-enforced file was checked")
    print(f"compiler: {checked} files fail to compile until they handle the new operator")


def check_server(root, src, d3d12):
    """Serves toy_negate from the patched build: on the CPU backend, or behind D3D12."""
    sys.path.insert(0, str(root / "tests/python"))
    stubs = list((src / "build").rglob("dmlserve_pb2.py"))
    if not stubs:
        fail("the patched build made no Python stubs")
    sys.path.insert(0, str(stubs[0].parent.parent.parent))
    import grpc  # noqa: E402
    import numpy as np  # noqa: E402
    from dmlserve.v1 import dmlserve_pb2 as pb  # noqa: E402
    from dmlserve.v1 import dmlserve_pb2_grpc as rpc  # noqa: E402
    from inference import grpc_predict_v2_pb2 as kpb  # noqa: E402
    from inference import grpc_predict_v2_pb2_grpc as krpc  # noqa: E402
    from server_process import ServerProcess  # noqa: E402

    # gpu_first: the D3D12 devices run the toy operator, not the CPU beside them.
    args = ["--backend=d3d12", "--placement=gpu_first"] if d3d12 else ["--backend=cpu"]
    os.environ.pop("DMLSERVE_SERVER_ARGS", None)
    values = np.array([1.5, -2.0, 0.0, 3.25, -0.0, 1e30], dtype=np.float32)
    with ServerProcess(str(src / "build/server/dmlserve"), args) as server:
        channel = grpc.insecure_channel(server.grpc_address)
        native = rpc.OperatorServiceStub(channel)
        request = pb.ExecuteRequest(request_id="toy")
        request.toy_negate.input.data_type = pb.FLOAT32
        request.toy_negate.input.sizes.extend([2, 3])
        request.toy_negate.input.data = values.tobytes()
        response = native.Execute(request, timeout=60)
        got = np.frombuffer(response.output.data, dtype=np.float32)
        if list(response.output.sizes) != [2, 3] or got.tobytes() != (-values).tobytes():
            fail(f"toy_negate over the native API answered {list(response.output.sizes)} {got}")
        device = response.info.device
        if d3d12 and not device.startswith("cpu"):
            fail(f"toy_negate ran on {device}: D3D12 does not support it, the CPU fallback "
                 f"should run it")

        bad = pb.ExecuteRequest()
        bad.toy_negate.input.data_type = pb.INT32
        bad.toy_negate.input.sizes.append(1)
        bad.toy_negate.input.data = b"\0" * 4
        try:
            native.Execute(bad, timeout=60)
            fail("an INT32 toy_negate was accepted")
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.INVALID_ARGUMENT or \
                    "toy_negate.input.data_type" not in error.details():
                fail(f"an INT32 toy_negate got {error.code()}: {error.details()}")

        if d3d12:
            scan = pb.ExecuteRequest()
            scan.cumulative_summation.input.data_type = pb.FLOAT32
            scan.cumulative_summation.input.sizes.append(4)
            scan.cumulative_summation.input.data = np.ones(4, np.float32).tobytes()
            answer = native.Execute(scan, timeout=60)
            if not answer.info.device.startswith("d3d12"):
                fail(f"a scan ran on {answer.info.device} next to the toy, not on D3D12")

        kserve = krpc.GRPCInferenceServiceStub(channel)
        infer = kpb.ModelInferRequest(model_name="toy_negate")
        tensor = infer.inputs.add(name="input", datatype="FP32", shape=[6])
        tensor.contents.fp32_contents.extend(values.tolist())
        answer = kserve.ModelInfer(infer, timeout=60)
        got = np.frombuffer(answer.raw_output_contents[0], dtype=np.float32)
        if got.tobytes() != (-values).tobytes():
            fail(f"toy_negate over KServe answered {got}")

        info = native.GetServerInfo(pb.GetServerInfoRequest(), timeout=60)
        if "toy_negate" not in str(info):
            fail(f"GetServerInfo does not list toy_negate:\n{info}")
        with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=60) as r:
            metrics = r.read().decode()
        if 'operator="toy_negate"' not in metrics:
            fail("/metrics has no series for operator=\"toy_negate\"")
        channel.close()
    print(f"server: toy_negate answered over the native API (on {device}) and KServe v2, "
          f"listed and counted{'; scans stayed on D3D12' if d3d12 else ''}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("work_dir")
    parser.add_argument("--d3d12", action="store_true")
    args = parser.parse_args()
    root = pathlib.Path(args.root).resolve()
    src = pathlib.Path(args.work_dir).resolve() / "src"
    patch_text = PATCH.read_text(encoding="utf-8")
    files = patched_files(patch_text)
    check_docs(root, files)
    sync_patched_copy(root, src, files, patch_text)
    build(src, args.d3d12)
    check_compiler_finds(root, src, files)
    check_server(root, src, d3d12=False)
    if args.d3d12:
        check_server(root, src, d3d12=True)


if __name__ == "__main__":
    main()
