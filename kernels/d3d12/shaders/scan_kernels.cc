#include "kernels/d3d12/shaders/scan_kernels.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/scan_codegen.h"

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;

constexpr const char* kPassNames[] = {"serial", "line", "lookback", "pack16", "clear"};
constexpr const char* kOpNames[] = {"sum", "prod"};
constexpr const char* kFormatNames[] = {"f32", "f16", "i32", "u16", "i64"};

template <typename E, size_t N>
bool ParseName(absl::string_view text, const char* const (&names)[N], E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

void BuildSerial(KernelAssembler& a, const ScanKernelSpec& spec) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(spec.threads, 1, 1);
  ScanCodegen c(a, spec.op, spec.format);

  const Operand group = a.Scalar(), line = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(line, group, A::l(spec.threads), A::vThreadIDInGroupFlattened().x());
  a.IfUnsignedLess(line, A::Constant(kScanConstLines));
  const LineGeometry geo = EmitLineGeometry(a, line, spec.reverse);
  const uint32_t acc = c.NewValue(), x = c.NewValue();
  c.Identity(acc);
  const Operand i = a.Scalar(), e = a.Scalar();
  a.mov(i, A::l(0));
  a.LoopWhileUnsignedLess(i, A::Constant(kScanConstAxis));
  a.imad(e, i, geo.step, geo.origin);
  c.Load(x, e, A::t(0), spec.format);
  if (spec.exclusive) {
    c.Store(A::u(0), e, acc);
    c.Combine(acc, acc, x);
  } else {
    c.Combine(acc, acc, x);
    c.Store(A::u(0), e, acc);
  }
  a.iadd(i, i, A::l(1));
  a.endloop();
  a.endif();
  a.ret();
}

void BuildPack16(KernelAssembler& a, const ScanKernelSpec& spec) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(spec.threads, 1, 1);
  const Operand group = a.Scalar(), word = a.Scalar(), words = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(word, group, A::l(spec.threads), A::vThreadIDInGroupFlattened().x());
  a.iadd(words, A::Constant(kPackConstCount), A::l(1));
  a.ushr(words, words, A::l(1));
  a.IfUnsignedLess(word, words);
  const uint32_t v = a.NewTemp();  // .x = element 2w, .y = element 2w + 1
  const Operand address = a.Scalar(), second = a.Scalar();
  a.ishl(address, word, A::l(3));
  a.ld_raw(A::r(v).x(), address, A::t(0));
  a.mov(A::r(v).y(), A::l(0));
  a.imad(second, word, A::l(2), A::l(1));
  // Root descriptors are not bounds-checked: never read past the scratch.
  a.IfUnsignedLess(second, A::Constant(kPackConstCount));
  a.iadd(address, address, A::l(4));
  a.ld_raw(A::r(v).y(), address, A::t(0));
  a.endif();
  if (spec.format == ScanFormat::kF16) {
    a.f32tof16(A::r(v).xy(), A::r(v).xy());
  } else {
    a.and_(A::r(v).xy(), A::r(v).xy(), A::l(0xffff, 0xffff, 0, 0));
  }
  a.bfi(A::r(v).x(), A::l(16), A::l(16), A::r(v).y(), A::r(v).x());
  a.ishl(address, word, A::l(2));
  a.store_raw(A::u(0).x(), address, A::r(v).x());
  a.endif();
  a.ret();
}

// clear: thread t zeroes 16-byte slot t.
void BuildClear(KernelAssembler& a) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/0, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(kClearThreads, 1, 1);
  const Operand group = a.Scalar(), slot = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(slot, group, A::l(kClearThreads), A::vThreadIDInGroupFlattened().x());
  a.IfUnsignedLess(slot, A::Constant(kClearConstSlots));
  a.ishl(slot, slot, A::l(4));
  a.store_raw(A::u(0).xyzw(), slot, A::l(0, 0, 0, 0));
  a.endif();
  a.ret();
}

absl::Status Validate(const ScanKernelSpec& spec) {
  if (spec.pass == ScanPass::kClear) return absl::OkStatus();
  if (spec.pass == ScanPass::kPack16) {
    if (spec.format != ScanFormat::kF16 && spec.format != ScanFormat::kU16) {
      return absl::InvalidArgumentError("pack16 packs f16 or u16");
    }
    return absl::OkStatus();
  }
  if (spec.op == ScanOp::kProduct && spec.format == ScanFormat::kI64) {
    return absl::InvalidArgumentError("64-bit products are not a cumulative product type");
  }
  if (spec.op == ScanOp::kSum && spec.format == ScanFormat::kU16) {
    return absl::InvalidArgumentError("UINT16 is not a cumulative summation type");
  }
  if (!IsPowerOfTwo(spec.threads) || spec.threads > 1024 || spec.per_thread == 0 ||
      spec.per_thread > 64) {
    return absl::InvalidArgumentError("bad scan tile shape");
  }
  // Groupshared: totals, the staged tile with its padding, the mailbox and
  // the look-back window.
  const uint64_t value_bytes = WideFormat(spec.format) == ScanFormat::kI64 ? 8 : 4;
  const uint64_t tile = uint64_t{spec.threads} * spec.per_thread;
  if ((spec.threads + tile + tile / 32) * value_bytes + 8 + value_bytes + spec.threads * 4 >
      32768) {
    return absl::InvalidArgumentError("scan tile needs more than 32 KiB of groupshared memory");
  }
  if (spec.pass != ScanPass::kLookback && spec.polls != ScanKernelSpec::kDefaultLookbackPolls) {
    return absl::InvalidArgumentError("only lookback polls");
  }
  return absl::OkStatus();
}

}  // namespace

ScanFormat WideFormat(ScanFormat format) {
  switch (format) {
    case ScanFormat::kF16:
      return ScanFormat::kF32;
    case ScanFormat::kU16:
      return ScanFormat::kI32;
    default:
      return format;
  }
}

uint32_t FormatBytes(ScanFormat format) {
  switch (format) {
    case ScanFormat::kF16:
    case ScanFormat::kU16:
      return 2;
    case ScanFormat::kI64:
      return 8;
    default:
      return 4;
  }
}

std::string ScanKernelSpec::Key() const {
  if (pass == ScanPass::kClear) return "scan.clear";
  const char* format_name = kFormatNames[static_cast<int>(format)];
  if (pass == ScanPass::kPack16) return absl::StrCat("scan.pack16/", format_name);
  std::string key =
      absl::StrCat("scan.", kPassNames[static_cast<int>(pass)], "/", kOpNames[static_cast<int>(op)],
                   "/", format_name, "/", reverse ? "dec" : "inc");
  absl::StrAppend(&key, exclusive ? "/excl" : "/incl");
  if (pass == ScanPass::kSerial) {
    absl::StrAppend(&key, "/g", threads);
  } else {
    absl::StrAppend(&key, "/t", threads, "p", per_thread);
  }
  if (pass == ScanPass::kLookback) absl::StrAppend(&key, "/w", polls);
  return key;
}

absl::StatusOr<ScanKernelSpec> ScanKernelSpec::Parse(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  const absl::Status bad = absl::InvalidArgumentError(absl::StrCat("bad scan kernel key: ", key));
  ScanKernelSpec spec;
  if (parts.empty() || !absl::ConsumePrefix(&parts[0], "scan.") ||
      !ParseName(parts[0], kPassNames, &spec.pass)) {
    return bad;
  }
  if (spec.pass == ScanPass::kClear) {
    if (parts.size() != 1) return bad;
    spec.threads = kClearThreads;
  } else if (spec.pass == ScanPass::kPack16) {
    if (parts.size() != 2 || !ParseName(parts[1], kFormatNames, &spec.format)) return bad;
    spec.threads = kPackThreads;
  } else {
    const bool lookback = spec.pass == ScanPass::kLookback;
    if (parts.size() != (lookback ? 7u : 6u) || !ParseName(parts[1], kOpNames, &spec.op) ||
        !ParseName(parts[2], kFormatNames, &spec.format)) {
      return bad;
    }
    if (parts[3] != "inc" && parts[3] != "dec") return bad;
    spec.reverse = parts[3] == "dec";
    if (parts[4] != "incl" && parts[4] != "excl") return bad;
    spec.exclusive = parts[4] == "excl";
    if (lookback) {
      absl::string_view polls = parts[6];
      if (!absl::ConsumePrefix(&polls, "w") || !absl::SimpleAtoi(polls, &spec.polls)) return bad;
    }
    absl::string_view shape = parts[5];
    if (spec.pass == ScanPass::kSerial) {
      if (!absl::ConsumePrefix(&shape, "g") || !absl::SimpleAtoi(shape, &spec.threads)) return bad;
    } else {
      std::vector<absl::string_view> tp = absl::StrSplit(shape, 'p');
      if (tp.size() != 2 || !absl::ConsumePrefix(&tp[0], "t") ||
          !absl::SimpleAtoi(tp[0], &spec.threads) || !absl::SimpleAtoi(tp[1], &spec.per_thread)) {
        return bad;
      }
    }
  }
  absl::Status status = Validate(spec);
  if (!status.ok()) return status;
  if (spec.Key() != key) return bad;  // one canonical spelling per kernel
  return spec;
}

absl::StatusOr<std::vector<uint8_t>> BuildScanKernel(const ScanKernelSpec& spec) {
  absl::Status status = Validate(spec);
  if (!status.ok()) return status;
  KernelAssembler a;
  switch (spec.pass) {
    case ScanPass::kSerial:
      BuildSerial(a, spec);
      break;
    case ScanPass::kPack16:
      BuildPack16(a, spec);
      break;
    case ScanPass::kClear:
      BuildClear(a);
      break;
    default:
      BuildTiledScan(a, spec);
      break;
  }
  return FinishKernel(a, spec.Key());
}

uint32_t LookbackStateBytes(ScanFormat format) {
  return 4 * (WideFormat(format) == ScanFormat::kI64 ? 8 : 4);
}

// 64 threads, each scanning 4 (short axes: few idle threads) or 16 elements
// serially: on lavapipe the group barriers of the Hillis-Steele step cost far
// more than the serial part (16 per thread ran 2-3x faster than 4 on 4M
// elements), and 64 threads keep it to 6 steps. Look-back tiles are larger
// (64 per thread, 4096 elements: 16 bytes of state per 4096 elements, and a
// quarter of the look-back steps); 64-bit values take 16 per thread so that
// the staged tile fits 32 KiB of groupshared memory.
const std::vector<ScanTileShape>& ScanTileShapes() {
  static const std::vector<ScanTileShape> shapes = {{64, 4}, {64, 16}, {64, 64}};
  return shapes;
}

size_t LookbackTileShape(ScanFormat format) {
  return WideFormat(format) == ScanFormat::kI64 ? 1 : 2;
}

std::vector<ScanKernelSpec> AllScanKernelSpecs() {
  struct OpFormat {
    ScanOp op;
    ScanFormat format;
  };
  const OpFormat kinds[] = {
      {ScanOp::kSum, ScanFormat::kF32},     {ScanOp::kSum, ScanFormat::kF16},
      {ScanOp::kSum, ScanFormat::kI32},     {ScanOp::kSum, ScanFormat::kI64},
      {ScanOp::kProduct, ScanFormat::kF32}, {ScanOp::kProduct, ScanFormat::kF16},
      {ScanOp::kProduct, ScanFormat::kI32}, {ScanOp::kProduct, ScanFormat::kU16},
  };
  const std::vector<ScanTileShape>& shapes = ScanTileShapes();
  std::vector<ScanKernelSpec> specs;
  for (const OpFormat& kind : kinds) {
    for (bool reverse : {false, true}) {
      for (bool exclusive : {false, true}) {
        ScanKernelSpec s;
        s.op = kind.op;
        s.format = kind.format;
        s.reverse = reverse;
        s.exclusive = exclusive;
        s.pass = ScanPass::kSerial;
        s.threads = kSerialThreads;
        s.per_thread = 1;
        specs.push_back(s);
        s.pass = ScanPass::kLine;
        for (size_t shape : {kLineShortTileShape, kLineLongTileShape}) {
          s.threads = shapes[shape].threads;
          s.per_thread = shapes[shape].per_thread;
          specs.push_back(s);
        }
        s.pass = ScanPass::kLookback;
        s.threads = shapes[LookbackTileShape(kind.format)].threads;
        s.per_thread = shapes[LookbackTileShape(kind.format)].per_thread;
        specs.push_back(s);
      }
    }
  }
  ScanKernelSpec clear;
  clear.pass = ScanPass::kClear;
  clear.threads = kClearThreads;
  specs.push_back(clear);
  for (ScanFormat f : {ScanFormat::kF16, ScanFormat::kU16}) {
    ScanKernelSpec s;
    s.pass = ScanPass::kPack16;
    s.format = f;
    s.threads = kPackThreads;
    specs.push_back(s);
  }
  return specs;
}

}  // namespace dmlserve::d3d12
