#include "kernels/d3d12/shaders/scan_planner.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {
namespace {

Dispatch ScanDispatch(const ScanKernelSpec& spec, uint32_t axis, uint32_t inner, uint32_t lines,
                      uint32_t tiles) {
  Dispatch d;
  d.kernel = spec.Key();
  d.constants[kScanConstAxis] = axis;
  d.constants[kScanConstInner] = inner;
  d.constants[kScanConstLines] = lines;
  d.constants[kScanConstTiles] = tiles;
  return d;
}

}  // namespace

absl::Status ScanFormatOf(const ScanOperation& op, ScanOp* scan_op, ScanFormat* format) {
  const bool sum = op.kind == OperatorKind::kCumulativeSummation;
  *scan_op = sum ? ScanOp::kSum : ScanOp::kProduct;
  switch (op.input.data_type) {
    case DataType::kFloat32:
      *format = ScanFormat::kF32;
      return absl::OkStatus();
    case DataType::kFloat16:
      *format = ScanFormat::kF16;
      return absl::OkStatus();
    case DataType::kInt32:
    case DataType::kUint32:
      *format = ScanFormat::kI32;
      return absl::OkStatus();
    case DataType::kInt64:
    case DataType::kUint64:
      if (sum) {
        *format = ScanFormat::kI64;
        return absl::OkStatus();
      }
      break;
    case DataType::kUint16:
      if (!sum) {
        *format = ScanFormat::kU16;
        return absl::OkStatus();
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(OperatorName(op.kind), " does not support ", DataTypeName(op.input.data_type)));
}

absl::Status PlanScan(WorkItem* item, const ScanPlannerOptions& options, PlanBuilder& builder) {
  const ScanOperation& op = std::get<ScanOperation>(*item->operation);
  ScanKernelSpec spec;
  absl::Status status = ScanFormatOf(op, &spec.op, &spec.format);
  if (!status.ok()) return status;
  spec.reverse = op.direction == AxisDirection::kDecreasing;
  spec.exclusive = op.exclusive;

  const uint64_t elements = op.input.element_count();
  const uint64_t lines64 = op.outer * op.inner;
  const ScanFormat wide = WideFormat(spec.format);
  // Kernels address bytes with 32-bit offsets.
  if (elements * FormatBytes(wide) > kMaxKernelBufferBytes || lines64 > UINT32_MAX ||
      op.inner > UINT32_MAX) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the D3D12 scan kernels address at most 4 GiB per buffer; this tensor has ",
                     elements, " elements of ", DataTypeName(op.input.data_type)));
  }
  const uint32_t axis = op.axis_size;
  const uint32_t inner = static_cast<uint32_t>(op.inner);
  const uint32_t lines = static_cast<uint32_t>(lines64);
  const uint64_t element_bytes = FormatBytes(spec.format);
  const bool packed = wide != spec.format;

  const BufferId input = builder.AddUpload(op.input.bytes, 0, elements * element_bytes);
  const BufferId output = builder.AddDeviceBuffer(BufferKind::kOutput, elements * element_bytes);
  const BufferId result =
      packed ? builder.AddDeviceBuffer(BufferKind::kScratch, elements * 4) : output;

  int stage = 0;
  const bool strided_lines = inner >= options.strided_min_inner && lines >= options.line_min_lines;
  if (axis <= options.serial_max_axis || strided_lines) {
    spec.pass = ScanPass::kSerial;
    spec.threads = kSerialThreads;
    spec.per_thread = 1;
    Dispatch d = ScanDispatch(spec, axis, inner, lines, 0);
    d.srvs[0].buffer = input;
    d.uavs[0].buffer = result;
    SetGroupCount(d, CeilDiv(lines, spec.threads));
    builder.AddDispatch(stage++, std::move(d));
  } else {
    const std::vector<ScanTileShape>& shapes = ScanTileShapes();
    const ScanTileShape& short_shape = shapes[kLineShortTileShape];
    size_t shape_index = axis <= short_shape.threads * short_shape.per_thread ? kLineShortTileShape
                                                                              : kLineLongTileShape;
    uint64_t tiles = CeilDiv(axis, shapes[shape_index].threads * shapes[shape_index].per_thread);
    spec.pass = ScanPass::kLine;
    if (tiles > options.line_max_tiles && lines < options.line_min_lines) {
      spec.pass = ScanPass::kLookback;
      spec.polls = options.lookback_polls;
      shape_index = LookbackTileShape(spec.format);
    }
    if (options.tile_shape >= 0) {
      shape_index = std::min(static_cast<size_t>(options.tile_shape), shapes.size() - 1);
    }
    spec.threads = shapes[shape_index].threads;
    spec.per_thread = shapes[shape_index].per_thread;
    tiles = CeilDiv(axis, spec.tile());
    Dispatch d = ScanDispatch(spec, axis, inner, lines, static_cast<uint32_t>(tiles));
    d.srvs[0].buffer = input;
    d.uavs[0].buffer = result;
    if (spec.pass == ScanPass::kLine) {
      SetGroupCount(d, lines);
    } else {
      // Single pass: one group per (line, tile), each with a slot of
      // look-back state (a tile holds at least 256 elements: far within
      // the 32-bit limit checked above), zeroed by `clear` a stage before.
      const uint64_t groups = uint64_t{lines} * tiles;
      const uint64_t state_bytes = groups * LookbackStateBytes(spec.format);
      const BufferId state = builder.AddDeviceBuffer(BufferKind::kScratch, state_bytes);
      ScanKernelSpec clear_spec;
      clear_spec.pass = ScanPass::kClear;
      Dispatch clear;
      clear.kernel = clear_spec.Key();
      clear.constants[kClearConstSlots] = static_cast<uint32_t>(state_bytes / 16);
      clear.uavs[0].buffer = state;
      SetGroupCount(clear, CeilDiv(state_bytes / 16, kClearThreads));
      builder.AddDispatch(stage++, std::move(clear));
      d.uavs[1].buffer = state;
      SetGroupCount(d, groups);
    }
    builder.AddDispatch(stage++, std::move(d));
  }
  if (packed) {
    ScanKernelSpec pack;
    pack.pass = ScanPass::kPack16;
    pack.format = spec.format;
    pack.threads = kPackThreads;
    Dispatch d;
    d.kernel = pack.Key();
    d.constants[kPackConstCount] = static_cast<uint32_t>(elements);
    d.srvs[0].buffer = result;
    d.uavs[0].buffer = output;
    SetGroupCount(d, CeilDiv(CeilDiv(elements, 2), pack.threads));
    builder.AddDispatch(stage++, std::move(d));
  }

  builder.AddFinisher([item, output,
                       bytes = elements * element_bytes](ReadBackBuffers& outputs) -> absl::Status {
    if (output >= outputs.size() || outputs[output] == nullptr || outputs[output]->size() < bytes) {
      return absl::InternalError("scan output missing from the read-back buffers");
    }
    const ScanOperation& op = std::get<ScanOperation>(*item->operation);
    item->output.data_type = op.input.data_type;
    item->output.sizes = op.input.sizes;
    // The read-back buffer is the tensor's storage unless it carries padding
    // (an odd count of 16-bit values).
    item->output.bytes = outputs[output]->size() == bytes
                             ? std::move(outputs[output])
                             : Buffer::Copy(outputs[output]->view().substr(0, bytes));
    item->output.registration.reset();
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

}  // namespace dmlserve::d3d12
