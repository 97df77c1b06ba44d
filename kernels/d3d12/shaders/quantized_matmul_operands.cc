#include "kernels/d3d12/shaders/quantized_matmul_operands.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/derived_form_cache.h"
#include "kernels/d3d12/shaders/quantized_matmul_b_forms.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

namespace dmlserve::d3d12 {
namespace {

uint32_t ScaleBitsAt(const Tensor& t, uint64_t i) {
  const uint64_t index = t.element_count() == 1 ? 0 : i;
  uint32_t bits;
  std::memcpy(&bits, t.data() + 4 * index, 4);
  return bits;
}

void StoreWord(std::string& s, uint64_t word, uint32_t value) {
  std::memcpy(&s[4 * word], &value, 4);
}

// Whether every column of `op` has the same B parameters (per-tensor b_scale
// and b_zero_point): then one 8-byte entry serves them all.
bool UniformColumnParams(const QuantizedMatMulOperation& op) {
  auto single = [](const Tensor& t) { return !t.present() || t.element_count() == 1; };
  return single(op.b_scale) && single(op.b_zero_point);
}

// `columns` entries of b_scale's float bits and b_zero_point; column c has
// column c % N's parameters (an outer product's columns are B's channels x N).
std::shared_ptr<const Buffer> ColumnParamBytes(const QuantizedMatMulOperation& op,
                                               uint64_t columns) {
  std::string out(columns * 8, '\0');
  // Per element through ScaleBitsAt / ZeroPointAt, each of which counts the
  // tensor's elements again, this cost ~10 ns a column: N entries are made
  // once per tensor for a registered B but once per batch for inline ones.
  const bool one_scale = op.b_scale.element_count() == 1;
  const Tensor& zp = op.b_zero_point;
  const bool one_zero_point = !zp.present() || zp.element_count() == 1;
  for (uint64_t c = 0; c < columns; ++c) {
    const uint64_t column = c % op.n;
    uint32_t scale_bits;
    std::memcpy(&scale_bits, op.b_scale.data() + 4 * (one_scale ? 0 : column), 4);
    StoreWord(out, 2 * c, scale_bits);
    const int32_t zero_point = zp.present() ? ZeroPointValue(zp, one_zero_point ? 0 : column) : 0;
    StoreWord(out, 2 * c + 1, static_cast<uint32_t>(zero_point));
  }
  return Buffer::Adopt(std::move(out));
}

// The resident key of op's per-column parameters, or "" when they are sent
// with every batch. They stay on the device when the registered tensors
// they come from say what they are: a registered b_scale, and a b_zero_point
// that is registered too, absent, or a per-tensor 0 (the same entries as
// absent). The key belongs to the scale's id and names a registered zero
// point's id after a space (ResidentTensors: evicting either drops it).
// Inline per-column parameters are not kept: each request could bring new
// ones, and their entries would pile up on the device.
std::string ColumnParamsKey(const QuantizedMatMulOperation& op) {
  const std::string& scale_id = op.b_scale.registered_id();
  if (scale_id.empty()) return "";
  std::string key = absl::StrCat(scale_id, "/qmm-columns");
  const Tensor& zp = op.b_zero_point;
  if (!zp.present()) return key;
  if (!zp.registered_id().empty()) return absl::StrCat(key, " ", zp.registered_id());
  if (zp.element_count() == 1 && ZeroPointAt(zp, 0) == 0) return key;
  return "";
}

// A packed form of op's B (`form` names it: "qmm-b-packed", "qmm-b-outer"),
// resident when B is registered (and the host repack cached).
BufferId AddPackedB(const QuantizedMatMulOperation& op, const std::string& form,
                    std::shared_ptr<const Buffer> (*pack)(const QuantizedMatMulOperation&),
                    const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder) {
  const std::string& id = op.b.registered_id();
  if (id.empty()) {
    std::shared_ptr<const Buffer> packed = pack(op);
    return builder.AddUpload(packed, 0, packed->size());
  }
  // Both layouts hold every slice's KO x N octs.
  const uint64_t size = uint64_t{op.b_batch} * op.b_channel * DepthOcts(op.k) * op.n * 8;
  const uint64_t cache_bytes = options.packed_weight_cache_bytes;
  std::string key = id + "/" + form;
  return builder.AddResident(size, key, [&op, pack, key, cache_bytes] {
    return DerivedFormCache::Get().FindOrMake(key, {op.b.bytes}, cache_bytes,
                                              [&] { return pack(op); });
  });
}

}  // namespace

uint64_t ARowBytes(uint32_t k) { return (uint64_t{k} + 3) / 4 * 4; }

void AppendARows(const QuantizedMatMulOperation& op, std::string& out) {
  const uint64_t rows = uint64_t{op.a_batch} * op.a_channel * op.m;
  const uint64_t row_bytes = ARowBytes(op.k);
  const size_t start = out.size();
  out.resize(start + rows * row_bytes, '\0');
  for (uint64_t r = 0; r < rows; ++r) {
    std::memcpy(&out[start + r * row_bytes], op.a.data() + r * op.k, op.k);
  }
}

BufferId UploadARows(const QuantizedMatMulOperation& op, PlanBuilder& builder) {
  if (op.k % 4 == 0) return builder.AddUpload(op.a.bytes, 0, op.a.byte_size());
  std::string rows_bytes;
  AppendARows(op, rows_bytes);
  const uint64_t size = rows_bytes.size();
  return builder.AddUpload(Buffer::Adopt(std::move(rows_bytes)), 0, size);
}

void AppendRowParams(const QuantizedMatMulOperation& op, uint64_t rows, std::string& out) {
  const size_t start = out.size() / 4;
  out.resize(out.size() + rows * 16, '\0');
  for (uint64_t r = 0; r < rows; ++r) {
    const uint32_t m = static_cast<uint32_t>(r % op.m);
    StoreWord(out, start + 4 * r + 0, ScaleBitsAt(op.a_scale, m));
    StoreWord(out, start + 4 * r + 1, ScaleBitsAt(op.output_scale, m));
    StoreWord(out, start + 4 * r + 2, static_cast<uint32_t>(ZeroPointAt(op.a_zero_point, m)));
    StoreWord(out, start + 4 * r + 3, static_cast<uint32_t>(ZeroPointAt(op.output_zero_point, m)));
  }
}

bool UniformRowParams(const QuantizedMatMulOperation& op) {
  auto single = [](const Tensor& t) { return !t.present() || t.element_count() == 1; };
  return single(op.a_scale) && single(op.output_scale) && single(op.a_zero_point) &&
         single(op.output_zero_point);
}

uint32_t AppendStackedRowParams(const std::vector<WorkItem*>& items, std::string& out) {
  bool shared = true;
  std::string first_entry;
  for (WorkItem* item : items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    if (!UniformRowParams(op)) {
      shared = false;
      break;
    }
    std::string entry;
    AppendRowParams(op, 1, entry);
    if (first_entry.empty()) first_entry = entry;
    if (entry != first_entry) {
      shared = false;
      break;
    }
  }
  if (shared) {
    out += first_entry;
    return 0;
  }
  for (WorkItem* item : items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    AppendRowParams(op, uint64_t{op.a_batch} * op.a_channel * op.m, out);
  }
  return 16;
}

ColumnParams AddColumnParams(const QuantizedMatMulOperation& op, uint64_t columns,
                             const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder) {
  if (UniformColumnParams(op)) {
    std::shared_ptr<const Buffer> entry = ColumnParamBytes(op, 1);
    return {builder.AddUpload(entry, 0, entry->size()), 0};
  }
  const std::string key = columns == op.n ? ColumnParamsKey(op) : "";
  if (key.empty()) {
    std::shared_ptr<const Buffer> entries = ColumnParamBytes(op, columns);
    return {builder.AddUpload(entries, 0, entries->size()), 8};
  }
  DerivedFormCache::Sources sources = {op.b_scale.bytes};
  if (!op.b_zero_point.registered_id().empty()) sources.push_back(op.b_zero_point.bytes);
  const uint64_t cache_bytes = options.packed_weight_cache_bytes;
  return {builder.AddResident(columns * 8, key,
                              [&op, columns, key, sources, cache_bytes] {
                                return DerivedFormCache::Get().FindOrMake(
                                    key, sources, cache_bytes,
                                    [&] { return ColumnParamBytes(op, columns); });
                              }),
          8};
}

BufferId PackedB(const QuantizedMatMulOperation& op, BLayout layout,
                 const ColumnParams& column_params, const QuantizedMatMulPlannerOptions& options,
                 PlanBuilder& builder) {
  const bool outer = layout == BLayout::kOuterProduct;
  if (!op.b.registered_id().empty() || !options.pack_b_on_device) {
    return outer ? AddPackedB(op, "qmm-b-outer", PackOuterBOcts, options, builder)
                 : AddPackedB(op, "qmm-b-packed", PackBOcts, options, builder);
  }
  const uint64_t slices = uint64_t{op.b_batch} * op.b_channel;
  const uint32_t ko = DepthOcts(op.k);
  const BufferId raw = builder.AddUpload(op.b.bytes, 0, op.b.byte_size());
  const BufferId packed = builder.AddDeviceBuffer(BufferKind::kScratch, slices * ko * op.n * 8);
  Dispatch d;
  d.kernel = QuantizedMatMulPackSpec::kKey;
  d.constants[kQmmConstColumns] = op.n;
  d.constants[kQmmConstDepth] = op.k;
  d.constants[kQmmConstDepthOcts] = ko;
  d.constants[kQmmConstChannels] = static_cast<uint32_t>(slices);
  d.constants[kQmmConstPackOuter] = outer ? 1 : 0;
  d.srvs[0].buffer = raw;
  d.srvs[1].buffer = column_params.buffer;
  d.constants[kQmmConstColumnParamBytes] = column_params.stride_bytes;
  d.uavs[0].buffer = packed;
  SetGroupCount(d, CeilDiv(slices * ko * op.n, QuantizedMatMulPackSpec::kThreads));
  builder.AddDispatch(kPackStage, std::move(d));
  return packed;
}

absl::Status FinishRows(WorkItem* item, BufferId output, uint64_t first_row, uint64_t rows,
                        uint32_t n, bool sole_reader, ReadBackBuffers& outputs) {
  const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
  const uint64_t row_bytes = uint64_t{(n + 3) / 4} * 4;
  if (output >= outputs.size() || outputs[output] == nullptr ||
      outputs[output]->size() < (first_row + rows) * row_bytes) {
    return absl::InternalError("matmul output missing from the read-back buffers");
  }
  std::shared_ptr<Buffer> bytes;
  if (sole_reader && first_row == 0 && row_bytes == n && outputs[output]->size() == rows * n) {
    bytes = std::move(outputs[output]);
  } else {
    bytes = Buffer::Uninitialized(rows * n);
    const char* src = outputs[output]->data() + first_row * row_bytes;
    for (uint64_t r = 0; r < rows; ++r) {
      std::memcpy(bytes->data() + r * n, src + r * row_bytes, n);
    }
  }
  item->output.data_type = op.output_data_type;
  item->output.sizes = op.output_sizes;
  item->output.bytes = std::move(bytes);
  item->output.registration.reset();
  return absl::OkStatus();
}

absl::Status FinishJob(WorkItem* item, BufferId output, uint64_t first_row, bool sole_reader,
                       ReadBackBuffers& outputs) {
  const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
  return FinishRows(item, output, first_row, uint64_t{op.batch} * op.channel * op.m, op.n,
                    sole_reader, outputs);
}

}  // namespace dmlserve::d3d12
