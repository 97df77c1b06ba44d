// The AMX micro-kernel (qgemm_ukernel_amx-inl.h) on the scalar model of the tile instructions
// (amx_tiles.h): the same blocking, edges and configuration as the real one, on any CPU, so that
// the exactness tests cover the tile path on machines without AMX. Not in any level's table.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {
namespace {

#include "kernels/cpu/qgemm_ukernel_amx-inl.h"

}  // namespace

const QGemmUkernel* AmxModelQGemmUkernel() {
  static const AmxKernels<AmxTileModel>* const model =
      new AmxKernels<AmxTileModel>("amx_model", "amx_model_signed_a", CpuIsa::kGeneric);
  return &model->kernel;
}

const QGemmUkernel* AmxModelPrefetchQGemmUkernel() {
  static const AmxKernels<AmxTileModel, kAmxPrefetchSteps>* const model =
      new AmxKernels<AmxTileModel, kAmxPrefetchSteps>(
          "amx_model_prefetch", "amx_model_prefetch_signed_a", CpuIsa::kGeneric);
  return &model->kernel;
}

}  // namespace dmlserve
