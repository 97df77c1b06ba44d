#ifndef DMLSERVE_KERNELS_CORE_OVERLOADED_H_
#define DMLSERVE_KERNELS_CORE_OVERLOADED_H_

// Overloaded{lambda...}: one callable from several lambdas, for std::visit
// on an Operation. Every operator switch is written as
//
//   std::visit(Overloaded{
//                  [](const ScanOperation& scan) { ... },
//                  [](const QuantizedMatMulOperation& matmul) { ... },
//              },
//              operation);
//
// with one lambda per alternative and no catch-all (no `auto` parameter), so
// that adding an alternative to Operation fails to compile at every site
// that does not handle it, instead of misrouting it at run time.

namespace dmlserve {

template <typename... Lambdas>
struct Overloaded : Lambdas... {
  using Lambdas::operator()...;
};
template <typename... Lambdas>
Overloaded(Lambdas...) -> Overloaded<Lambdas...>;

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_OVERLOADED_H_
