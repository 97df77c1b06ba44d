#ifndef DMLSERVE_SERVER_RESPONSE_ENCODER_H_
#define DMLSERVE_SERVER_RESPONSE_ENCODER_H_

// Kernel results to dmlserve.v1 messages.

#include "dmlserve/v1/dmlserve.pb.h"
#include "kernels/core/tensor.h"
#include "scheduler/job.h"

namespace dmlserve {

// Moves the bytes out when `tensor` holds the only reference to them (the
// usual case for a job's output), copies them otherwise.
void EncodeTensor(Tensor tensor, v1::Tensor* proto);

void EncodeExecutionInfo(const ExecutionInfo& info, v1::ExecutionInfo* proto);

// The output and execution info of a successful job.
void EncodeJobOutput(JobResult result, v1::ExecuteResponse* response);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_RESPONSE_ENCODER_H_
